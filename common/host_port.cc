#include "common/host_port.h"

namespace downpour {
namespace {

absl::string_view Unbracketed(absl::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host.remove_prefix(1);
    host.remove_suffix(1);
  }
  return host;
}

}  // namespace

std::optional<HostPort> SplitHostPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == address.size()) {
    return std::nullopt;
  }
  // "::1" alone is a host without a port, not host ":" port "1".
  const absl::string_view host = address.substr(0, colon);
  if (host.find(':') != absl::string_view::npos && host.front() != '[') {
    return std::nullopt;
  }
  return HostPort{std::string(Unbracketed(host)),
                  std::string(address.substr(colon + 1))};
}

std::string HostOf(absl::string_view address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    return std::string(close == absl::string_view::npos
                           ? address
                           : address.substr(1, close - 1));
  }
  std::optional<HostPort> split = SplitHostPort(address);
  return split.has_value() ? split->host : std::string(address);
}

}  // namespace downpour

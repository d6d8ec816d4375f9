// Member keys and request bounds.
#include "coordinator/member_identity.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace downpour::coordinator {
namespace {

absl::Status CheckSize(absl::string_view what, absl::string_view value,
                       size_t limit) {
  if (value.size() <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " is ", value.size(), " bytes, over the limit of ",
                   limit, ": refused before anything was stored"));
}

// A DNS name (letters, digits, '-', '_' in dot-separated labels), an IPv4
// address, or a bracketed IPv6 literal (hex digits, ':' and '.'), then a port
// 1-65535: what a daemon can be dialled at, and nothing a log line, a path or
// a format string could make of it.
bool IsMemberAddress(absl::string_view address) {
  std::optional<HostPort> split = SplitHostPort(address);
  if (!split.has_value() || split->host.empty()) return false;
  int port = 0;
  if (split->port.size() > 5 ||
      !std::all_of(split->port.begin(), split->port.end(),
                   absl::ascii_isdigit) ||
      !absl::SimpleAtoi(split->port, &port) || port < 1 || port > 65535) {
    return false;
  }
  const std::string& host = split->host;
  if (address.front() == '[') {
    return std::all_of(host.begin(), host.end(), [](char c) {
      return absl::ascii_isxdigit(c) || c == ':' || c == '.';
    });
  }
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty() || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
    }
  }
  return true;
}

absl::Status CheckAddress(absl::string_view op, absl::string_view address) {
  if (address.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op,
        ": address is empty: a member registers with the host:port it "
        "serves on"));
  }
  RETURN_IF_ERROR(
      CheckSize(absl::StrCat(op, ": address"), address, kMaxAddressBytes));
  if (IsMemberAddress(address)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": address '", absl::CHexEscape(address),
      "' is not host:port (a DNS name, an IPv4 address or a bracketed IPv6 "
      "address, and a port 1-65535): refused before anything was stored"));
}

}  // namespace

namespace {

void RandomBytes(char* bytes, size_t size) {
  size_t got = 0;
  while (got < size) {
    const ssize_t n = getrandom(bytes + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      SPDLOG_LOGGER_CRITICAL(Log(Logger::kCoordinator),
                             "getrandom failed ({}): cannot issue member keys",
                             std::strerror(errno));
      std::abort();
    }
    got += static_cast<size_t>(n);
  }
}

}  // namespace

std::string NewMemberKey() {
  char bytes[16];
  RandomBytes(bytes, sizeof(bytes));
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

uint64_t NewPushKey() {
  uint64_t key = 0;
  while (key == 0) RandomBytes(reinterpret_cast<char*>(&key), sizeof(key));
  return key;
}

bool SameKey(absl::string_view given, absl::string_view expected) {
  if (expected.empty() || given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  return diff == 0;
}

absl::Status CheckRegisterBounds(const proto::RegisterServerRequest& request) {
  if (absl::Status s = CheckAddress("register", request.address()); !s.ok()) {
    return s;
  }
  return CheckSize("register: member_key", request.member_key(), kMaxKeyBytes);
}

absl::Status CheckRegisterBounds(const proto::RegisterWorkerRequest& request) {
  if (absl::Status s = CheckAddress("register", request.address()); !s.ok()) {
    return s;
  }
  return CheckSize("register: member_key", request.member_key(), kMaxKeyBytes);
}

absl::Status CheckHeartbeatBounds(const proto::HeartbeatRequest& request) {
  const proto::MemberReport& report = request.report();
  for (auto [what, value, limit] :
       {std::make_tuple("heartbeat: role", absl::string_view(request.role()),
                        kMaxRoleBytes),
        std::make_tuple("heartbeat: address",
                        absl::string_view(request.address()), kMaxAddressBytes),
        std::make_tuple("heartbeat: member_key",
                        absl::string_view(request.member_key()), kMaxKeyBytes),
        std::make_tuple("heartbeat: report.device",
                        absl::string_view(report.device()), kMaxDeviceBytes),
        std::make_tuple("heartbeat: report.diverged",
                        absl::string_view(report.diverged()),
                        kMaxDivergedBytes)}) {
    if (absl::Status s = CheckSize(what, value, limit); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace downpour::coordinator

// "host:port" addresses, as the config, flags and daemons write them:
//
//   SplitHostPort("10.0.0.2:7001")  -> {"10.0.0.2", "7001"}
//   SplitHostPort("[::1]:7000")     -> {"::1", "7000"}    (brackets dropped)
//   SplitHostPort("host")           -> nullopt            (no port)
//   HostOf("[::1]:7000")            -> "::1";  HostOf("host") -> "host"
//
// Nothing is resolved or range-checked here (config_field.h's IsHostPort
// validates config values).
#ifndef DOWNPOUR_COMMON_HOST_PORT_H_
#define DOWNPOUR_COMMON_HOST_PORT_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace downpour {

struct HostPort {
  std::string host;  // without the brackets of an IPv6 literal
  std::string port;
};

// nullopt when `address` has no ':' before a non-empty port.
std::optional<HostPort> SplitHostPort(absl::string_view address);

// The host part of `address`, brackets dropped; `address` itself when it has
// no port.
std::string HostOf(absl::string_view address);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_HOST_PORT_H_

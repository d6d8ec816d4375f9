// Plain HTTP/1.1 over TCP for tests: a daemon's /metrics, a Prometheus API,
// or any request written out by hand.
#ifndef DOWNPOUR_COMMON_TESTING_HTTP_CLIENT_H_
#define DOWNPOUR_COMMON_TESTING_HTTP_CLIENT_H_

#include <string>

#include "absl/status/statusor.h"

namespace downpour::testing {

// A connected TCP socket to `address` (host:port); -1 when it cannot be
// made. The caller closes it.
int ConnectTcp(const std::string& address);

// Sends `request` as it is and returns all that comes back until the server
// closes or 10 s pass without a byte. Unavailable when it cannot connect.
absl::StatusOr<std::string> HttpExchange(const std::string& address,
                                         const std::string& request);

// An HTTP/1.1 answer: the status code (0 when none came) and the body.
struct HttpAnswer {
  int code = 0;
  std::string body;
};
// GET `target` (a path with its query, already percent-encoded) from the
// plain-HTTP server at `address` (host:port), e.g. a daemon's /metrics or a
// Prometheus API (HttpExchange; a chunked body is decoded). Unavailable when
// it cannot connect. `headers`: extra lines, each ending in "\r\n".
absl::StatusOr<HttpAnswer> HttpGet(const std::string& address,
                                   const std::string& target,
                                   const std::string& headers = "");
// `text` percent-encoded for a URL's query (RFC 3986 unreserved kept).
std::string UrlEncode(const std::string& text);

}  // namespace downpour::testing

#endif  // DOWNPOUR_COMMON_TESTING_HTTP_CLIENT_H_

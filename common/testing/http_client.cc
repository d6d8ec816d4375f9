// Plain HTTP/1.1 over a TCP socket, for tests.
#include "common/testing/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/host_port.h"

namespace downpour::testing {
namespace {

// A chunked body (RFC 9112 7.1) decoded; what cannot be parsed ends it.
std::string Dechunk(absl::string_view chunked) {
  std::string out;
  for (;;) {
    const size_t eol = chunked.find("\r\n");
    if (eol == absl::string_view::npos) break;
    absl::string_view size_text = chunked.substr(0, eol);
    size_text = size_text.substr(0, size_text.find(';'));
    size_t size = 0;
    for (char c : size_text) {
      if (!absl::ascii_isxdigit(c)) break;
      size = size * 16 + (absl::ascii_isdigit(c)
                              ? c - '0'
                              : absl::ascii_tolower(c) - 'a' + 10);
    }
    if (size == 0 || eol + 2 + size > chunked.size()) break;
    out.append(chunked.data() + eol + 2, size);
    chunked.remove_prefix(std::min(chunked.size(), eol + 2 + size + 2));
  }
  return out;
}

}  // namespace

int ConnectTcp(const std::string& address) {
  const std::optional<HostPort> split = SplitHostPort(address);
  if (!split.has_value()) return -1;
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(split->host.c_str(), split->port.c_str(), &hints, &found) !=
      0) {
    return -1;
  }
  int fd = socket(found->ai_family, found->ai_socktype, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  return fd;
}

absl::StatusOr<std::string> HttpExchange(const std::string& address,
                                         const std::string& request) {
  const int fd = ConnectTcp(address);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
  }
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw;
  char buffer[8192];
  for (;;) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return raw;
}

absl::StatusOr<HttpAnswer> HttpGet(const std::string& address,
                                   const std::string& target,
                                   const std::string& headers) {
  absl::StatusOr<std::string> raw = HttpExchange(
      address, absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: ", address,
                            "\r\nConnection: close\r\n", headers, "\r\n"));
  if (!raw.ok()) return raw.status();
  HttpAnswer answer;
  const size_t head_end = raw->find("\r\n\r\n");
  if (head_end == std::string::npos) return answer;  // code 0: no answer
  const std::string head = raw->substr(0, head_end);
  const std::vector<std::string> status_line =
      absl::StrSplit(head.substr(0, head.find("\r\n")), ' ');
  if (status_line.size() < 2 ||
      !absl::SimpleAtoi(status_line[1], &answer.code)) {
    answer.code = 0;
  }
  answer.body = raw->substr(head_end + 4);
  if (absl::StrContains(absl::AsciiStrToLower(head),
                        "transfer-encoding: chunked")) {
    answer.body = Dechunk(answer.body);
  }
  return answer;
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ||
        c == '~') {
      out += static_cast<char>(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

}  // namespace downpour::testing

#include "rpc/accept_watch.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_limit.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "proto/health.grpc.pb.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"

namespace downpour {
namespace {

// A wildcard bind is reached through loopback.
std::string DialTarget(const std::string& address) {
  for (const char* wildcard : {"0.0.0.0:", "[::]:"}) {
    if (absl::StartsWith(address, wildcard)) {
      return absl::StrCat("127.0.0.1:", address.substr(std::strlen(wildcard)));
    }
  }
  return address;
}

std::string FdSummary() {
  return absl::StrCat(OpenFdCount(), " of ", FdLimit(),
                      " file descriptors open");
}

// Closes a descriptor when it goes out of scope.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  const int fd_;
};

// Milliseconds left until `deadline`, at least 0.
int MillisLeft(absl::Time deadline) {
  return static_cast<int>(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

// The raw probe (see CheckAccepts): does the server react to a fresh TCP
// connection at `target` (host:port) before `deadline`?
AcceptCheckResult ProbeReaction(const std::string& target,
                                absl::Time deadline) {
  const HostPort split = SplitHostPort(target).value_or(HostPort{target, ""});
  const std::string& host = split.host;
  const std::string& port = split.port;
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    return {AcceptCheck::kAccepted,
            absl::StrCat("cannot resolve ", target, " (", gai_strerror(error),
                         "): no verdict")};
  }
  const int fd = socket(found->ai_family,
                        found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        found->ai_protocol);
  if (fd < 0) {
    const int error = errno;
    freeaddrinfo(found);
    return {error == EMFILE || error == ENFILE ? AcceptCheck::kNoDescriptors
                                               : AcceptCheck::kAccepted,
            absl::StrCat("probe socket: ", std::strerror(error))};
  }
  FdCloser closer(fd);
  const int connected = connect(fd, found->ai_addr, found->ai_addrlen);
  const int connect_errno = errno;
  freeaddrinfo(found);
  if (connected != 0 && connect_errno != EINPROGRESS) {
    return {AcceptCheck::kNotAccepted,
            absl::StrCat("connect: ", std::strerror(connect_errno))};
  }
  pollfd wait = {fd, POLLOUT, 0};
  if (poll(&wait, 1, MillisLeft(deadline)) <= 0) {
    return {AcceptCheck::kNotAccepted,
            "the TCP connection was not even established (listen queue full?)"};
  }
  int error = 0;
  socklen_t length = sizeof(error);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
  if (error != 0) {
    return {AcceptCheck::kNotAccepted,
            absl::StrCat("connect: ", std::strerror(error))};
  }
  // "GET " starts neither a TLS record nor the HTTP/2 preface: a TLS server
  // answers with an alert or closes, an HTTP/2 one sends its SETTINGS (maybe
  // before reading anything) and a GOAWAY. A connection nobody accepted sits
  // in the kernel's queue and never answers.
  static constexpr char kProbe[] = "GET / HTTP/1.1\r\n\r\n";
  send(fd, kProbe, sizeof(kProbe) - 1, MSG_NOSIGNAL);
  wait = {fd, POLLIN, 0};
  if (poll(&wait, 1, MillisLeft(deadline)) <= 0) {
    return {
        AcceptCheck::kNotAccepted,
        "a fresh TCP connection got no reaction at all: nobody accepted it"};
  }
  return {AcceptCheck::kAccepted, ""};
}

}  // namespace

AcceptCheckResult CheckAccepts(const std::string& address,
                               absl::Duration deadline) {
  const uint64_t limit = FdLimit();
  const uint64_t open = OpenFdCount();
  if (open == 0 || (limit > 0 && open + kFdHeadroom > limit)) {
    return {AcceptCheck::kNoDescriptors, FdSummary()};
  }
  const std::string target = DialTarget(address);
  // A channel of its own, with its own subchannel pool: a new TCP connection
  // (and TLS handshake with this process's own certificate) each time.
  auto stub = grpc::health::v1::Health::NewStub(
      MakeChannel(target, /*fresh_connection=*/true));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(absl::ToDoubleSeconds(deadline)));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status =
      stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  if (status.ok()) return {AcceptCheck::kAccepted, ""};
  // The call failing says little by itself: under TLS a handshake that gets
  // no answer fails the connection attempt (UNAVAILABLE) long before the
  // deadline, just like one refused for a certificate that does not name
  // this address. Whether the server took the connection at all is what the
  // raw probe tells.
  AcceptCheckResult probe =
      ProbeReaction(target, absl::Now() + std::min(deadline, absl::Seconds(2)));
  const std::string call =
      absl::StrCat("health Check: ", FromGrpcStatus(status).ToString());
  if (probe.outcome == AcceptCheck::kAccepted) {
    probe.detail = absl::StrCat(call, "; yet the server reacts to a raw probe",
                                probe.detail.empty() ? "" : ": ", probe.detail);
  } else {
    probe.detail = absl::StrCat(call, "; raw probe: ", probe.detail, " (",
                                FdSummary(), ")");
  }
  return probe;
}

AcceptWatch::AcceptWatch(std::string who, std::string address,
                         std::function<void()> on_stuck)
    : AcceptWatch(std::move(who), std::move(address), std::move(on_stuck),
                  Options()) {}

AcceptWatch::AcceptWatch(std::string who, std::string address,
                         std::function<void()> on_stuck, Options options)
    : who_(std::move(who)),
      address_(std::move(address)),
      on_stuck_(std::move(on_stuck)),
      options_(options),
      thread_([this] { Loop(); }) {}

AcceptWatch::~AcceptWatch() {
  stop_.Notify();
  thread_.join();
}

void AcceptWatch::Loop() {
  int failed = 0;   // checks in a row that found the listener gone
  int pressed = 0;  // checks in a row without free descriptors
  while (!stop_.WaitForNotificationWithTimeout(options_.period)) {
    const AcceptCheckResult check = CheckAccepts(address_, options_.deadline);
    if (stop_.HasBeenNotified()) return;  // shutting down: not a failure
    std::string why;
    switch (check.outcome) {
      case AcceptCheck::kAccepted:
        if (failed > 0 || pressed > 0) {
          SPDLOG_LOGGER_INFO(Log(Logger::kRpc), "{} accepts connections again",
                             who_);
        }
        if (!check.detail.empty()) {
          SPDLOG_LOGGER_DEBUG(Log(Logger::kRpc), "{}: {}", who_, check.detail);
        }
        failed = pressed = 0;
        continue;
      case AcceptCheck::kNoDescriptors:
        // No verdict on the listener; the failures so far stand.
        ++pressed;
        SPDLOG_LOGGER_WARN(Log(Logger::kRpc),
                           "{}: out of file descriptors ({}), {} of {} checks "
                           "in a row: cannot tell whether it still accepts",
                           who_, check.detail, pressed,
                           options_.pressure_checks);
        if (pressed < options_.pressure_checks) continue;
        why = absl::StrCat("out of file descriptors for ", pressed,
                           " checks in a row: ", check.detail);
        break;
      case AcceptCheck::kNotAccepted:
        pressed = 0;
        ++failed;
        SPDLOG_LOGGER_WARN(Log(Logger::kRpc),
                           "{}: a new connection to its own address {} was not "
                           "accepted ({} of {} in a row): {}",
                           who_, address_, failed, options_.failures,
                           check.detail);
        if (failed < options_.failures) continue;
        why = check.detail;
        break;
    }
    SPDLOG_LOGGER_ERROR(
        Log(Logger::kRpc),
        "{} no longer accepts connections on {} ({}): shutting down so that "
        "it is restarted and its work moves elsewhere meanwhile; raise the "
        "fd limit (LimitNOFILE) if it ran out of file descriptors",
        who_, address_, why);
    stuck_ = true;
    on_stuck_();
    return;
  }
}

}  // namespace downpour

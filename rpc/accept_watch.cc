#include "rpc/accept_watch.h"

#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_limit.h"
#include "common/logging.h"
#include "rpc/server_util.h"
#include "proto/health.grpc.pb.h"

namespace downpour {

std::string CheckAccepts(const std::string& address, absl::Duration deadline) {
  // A wildcard bind is reached through loopback.
  std::string target = address;
  for (const char* wildcard : {"0.0.0.0:", "[::]:"}) {
    if (absl::StartsWith(target, wildcard)) {
      target = absl::StrCat("127.0.0.1:", target.substr(std::strlen(wildcard)));
    }
  }
  // A channel of its own, with its own subchannel pool: a new TCP connection
  // (and TLS handshake) each time, which is what a dead listener refuses.
  auto stub = grpc::health::v1::Health::NewStub(
      MakeChannel(target, /*fresh_connection=*/true));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(absl::ToDoubleSeconds(deadline)));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status =
      stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  // Only a connection that never got an answer means the listener is gone:
  // an error the server sent (a TLS handshake our own certificate cannot pass
  // for this address, NOT_SERVING, ...) proves it accepted.
  const bool no_answer =
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      absl::StrContains(status.error_message(), "timed out");
  if (status.ok() || !no_answer) return "";
  return absl::StrCat(status.error_message(), " (", OpenFdCount(), " of ",
                      FdLimit(), " file descriptors open)");
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
  int failed = 0;
  while (!stop_.WaitForNotificationWithTimeout(options_.period)) {
    const std::string error = CheckAccepts(address_, options_.deadline);
    if (stop_.HasBeenNotified()) return;  // shutting down: not a failure
    if (error.empty()) {
      if (failed > 0) {
        SPDLOG_LOGGER_INFO(Log(Logger::kRpc), "{} accepts connections again",
                           who_);
      }
      failed = 0;
      continue;
    }
    ++failed;
    SPDLOG_LOGGER_WARN(Log(Logger::kRpc),
                       "{}: a new connection to its own address {} failed ({} "
                       "of {} in a row): {}",
                       who_, address_, failed, options_.failures, error);
    if (failed >= options_.failures) {
      SPDLOG_LOGGER_ERROR(
          Log(Logger::kRpc),
          "{} no longer accepts connections on {} ({}): shutting down so that "
          "it is restarted and its work moves elsewhere meanwhile; raise the "
          "fd limit (LimitNOFILE) if it ran out of file descriptors",
          who_, address_, error);
      stuck_ = true;
      on_stuck_();
      return;
    }
  }
}

}  // namespace downpour

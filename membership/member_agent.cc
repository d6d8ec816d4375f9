// Heartbeat loop shared by ps and workers.
#include "membership/member_agent.h"

#include <algorithm>
#include <string>

#include "absl/time/clock.h"
#include "common/logging.h"

namespace downpour::membership {

MemberAgent::MemberAgent(CoordinatorClient* client, std::string role, int index,
                         std::string address, double interval_s,
                         Registrar registrar, Reporter reporter,
                         Handler handler)
    : client_(client),
      address_(std::move(address)),
      role_(std::move(role)),
      index_(index),
      interval_s_(interval_s),
      registrar_(std::move(registrar)),
      reporter_(std::move(reporter)),
      handler_(std::move(handler)) {}

void MemberAgent::SetIdentity(const std::string& role, int index) {
  absl::MutexLock lock(&identity_mu_);
  role_ = role;
  index_ = index;
}

MemberAgent::~MemberAgent() {
  if (thread_.joinable()) Stop();
}

void MemberAgent::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void MemberAgent::Stop(absl::Duration final_beat_budget) {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  // The last heartbeat carries the final figures (a worker's metrics and
  // pushes, a ps's loss counts): asked again while the coordinator does not
  // answer it, within the budget. A beat that registered again reported
  // nothing: the next one does.
  const absl::Time until = absl::Now() + final_beat_budget;
  for (int attempt = 0;; ++attempt) {
    if (Beat() && !registered_again_) return;
    if (attempt + 1 >= kFinalBeatAttempts && absl::Now() >= until) break;
    if (attempt + 1 >= kFinalBeatAttempts) {
      absl::SleepFor(std::min(absl::Seconds(interval_s_), until - absl::Now()));
    }
  }
  std::string role;
  int index = 0;
  {
    absl::MutexLock lock(&identity_mu_);
    role = role_;
    index = index_;
  }
  SPDLOG_LOGGER_WARN(Log(Logger::kRpc),
                     "{} {}: the coordinator did not take the final report "
                     "within {:.1f} s: what it shows of this member stops at "
                     "its last heartbeat",
                     role, index, absl::ToDoubleSeconds(final_beat_budget));
}

void MemberAgent::Loop() {
  while (!stop_.WaitForNotificationWithTimeout(absl::Seconds(interval_s_))) {
    Beat();
  }
}

bool MemberAgent::Beat() {
  proto::HeartbeatRequest request;
  {
    absl::MutexLock lock(&identity_mu_);
    request.set_role(role_);
    request.set_index(index_);
  }
  const std::string role = request.role();
  const int index = request.index();
  registered_again_ = false;
  request.set_address(address_);
  *request.mutable_report() = reporter_();
  absl::StatusOr<proto::HeartbeatResponse> response =
      client_->Heartbeat(request);
  if (absl::IsFailedPrecondition(response.status())) {
    // The coordinator restarted and forgot us: register again.
    SPDLOG_LOGGER_WARN(Log(Logger::kRpc),
                       "{} {}: coordinator does not know us; registering again",
                       role, index);
    absl::Status registered = registrar_();
    registered_again_ = true;
    if (!registered.ok()) {
      SPDLOG_LOGGER_WARN(Log(Logger::kRpc), "{} {}: {}", role, index,
                         std::string(registered.message()));
    }
    return registered.ok();
  }
  if (absl::IsPermissionDenied(response.status())) {
    // Not a network problem: the coordinator does not take this process for
    // the member it claims to be (its key was replaced). Said once.
    if (!refused_) {
      SPDLOG_LOGGER_ERROR(Log(Logger::kRpc), "{} {}: {}", role, index,
                          std::string(response.status().message()));
    }
    refused_ = true;
    return true;  // answered: asking again changes nothing
  }
  refused_ = false;
  if (!response.ok()) {
    if (!coordinator_down_) {
      SPDLOG_LOGGER_WARN(
          Log(Logger::kRpc),
          "{} {}: coordinator unreachable ({}); carrying on with "
          "the placement we have",
          role, index, std::string(response.status().message()));
    }
    coordinator_down_ = true;
    return false;
  }
  if (coordinator_down_) {
    SPDLOG_LOGGER_INFO(Log(Logger::kRpc), "{} {}: coordinator reachable again",
                       role, index);
    coordinator_down_ = false;
  }
  handler_(*response);
  return true;
}

}  // namespace downpour::membership

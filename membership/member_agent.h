// The heartbeat loop a ps or worker runs against the coordinator: registers,
// sends a report every heartbeat.interval_s, re-registers after a coordinator
// restart, and hands each response to the daemon. Keeps running (and says so)
// while the coordinator is unreachable: the daemon goes on with what it has.
#ifndef DOWNPOUR_MEMBERSHIP_MEMBER_AGENT_H_
#define DOWNPOUR_MEMBERSHIP_MEMBER_AGENT_H_

#include <algorithm>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "membership/coordinator_client.h"

namespace downpour::membership {

// Thread-compatible: Start once, Stop once.
class MemberAgent {
 public:
  using Reporter = std::function<proto::MemberReport()>;
  using Handler = std::function<void(const proto::HeartbeatResponse&)>;
  // Registers (again); returns the error when it could not.
  using Registrar = std::function<absl::Status()>;

  // `address` is where this daemon serves (sent with each heartbeat).
  // `client` is not owned and must outlive the agent. The handler runs on the
  // agent's thread (and on Stop's caller for the last heartbeat).
  MemberAgent(CoordinatorClient* client, std::string role, int index,
              std::string address, double interval_s, Registrar registrar,
              Reporter reporter, Handler handler);
  ~MemberAgent();  // Stop()s if started

  MemberAgent(const MemberAgent&) = delete;
  MemberAgent& operator=(const MemberAgent&) = delete;

  void Start();
  // Heartbeats as (role, index) from now on: a standby that took a shard over
  // becomes ("ps", shard). Thread-safe.
  void SetIdentity(const std::string& role, int index);
  // Sends one last heartbeat (so the coordinator sees the final report) and
  // stops. Unanswered (a coordinator cut off, restarting, or reconnecting
  // after a partition), it is asked again every interval for up to
  // `final_beat_budget`, and at least twice.
  void Stop(absl::Duration final_beat_budget = absl::ZeroDuration());

  // The daemons' budget for the final heartbeat: the time a member waits for
  // a peer to come back (rpc.connect_timeout_s), at most 5 s, so that a
  // daemon told to stop still ends well within the launcher's 15 s grace
  // (a coordinator silent longer than that is gone, not reconnecting).
  static absl::Duration FinalBeatBudget(double connect_timeout_s) {
    return absl::Seconds(std::min(connect_timeout_s, 5.0));
  }

 private:
  void Loop();
  // One heartbeat; false when the coordinator did not answer it (or a
  // re-registration failed).
  bool Beat();
  // How often Stop() asks for the final heartbeat when it goes unanswered
  // (each attempt may take rpc.deadline_s against a stalled coordinator).
  static constexpr int kFinalBeatAttempts = 2;

  CoordinatorClient* const client_;
  const std::string address_;
  absl::Mutex identity_mu_;
  std::string role_ ABSL_GUARDED_BY(identity_mu_);
  int index_ ABSL_GUARDED_BY(identity_mu_);
  const double interval_s_;
  const Registrar registrar_;
  const Reporter reporter_;
  const Handler handler_;
  absl::Notification stop_;
  std::thread thread_;
  bool coordinator_down_ = false;  // loop thread only
  // The last Beat registered again instead of reporting (loop thread only).
  bool registered_again_ = false;
  bool refused_ = false;  // loop thread only: PermissionDenied said
};

}  // namespace downpour::membership

#endif  // DOWNPOUR_MEMBERSHIP_MEMBER_AGENT_H_

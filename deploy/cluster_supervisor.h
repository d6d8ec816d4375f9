// Runs the daemons of one job as child processes (or over SSH): starts them in
// order, watches them, restarts those that die (deploy/restart_policy.h),
// shows progress, and stops them in order. The launcher's
// RunCluster (deploy/launcher_lib.h) drives one of these and turns what it saw
// into a LaunchSummary (deploy/launch_summary.h).
//
//   ClusterSupervisor supervisor(config, options);
//   absl::Status status = supervisor.Start();
//   if (status.ok()) status = supervisor.Watch();   // until the workers exit
//   supervisor.Stop([&] { /* the coordinator still answers here */ });
#ifndef DOWNPOUR_DEPLOY_CLUSTER_SUPERVISOR_H_
#define DOWNPOUR_DEPLOY_CLUSTER_SUPERVISOR_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/config.h"
#include "deploy/daemon_process.h"
#include "deploy/launch_options.h"
#include "deploy/launch_summary.h"
#include "deploy/progress_line.h"
#include "deploy/restart_policy.h"

namespace downpour {

// Not thread-safe: one thread calls Start, Watch and Stop in that order.
class ClusterSupervisor {
 public:
  // Keeps references to both; they must outlive the supervisor.
  ClusterSupervisor(const Config& config, const LaunchOptions& options);
  ~ClusterSupervisor();  // kills (SIGKILL) daemons still running

  ClusterSupervisor(const ClusterSupervisor&) = delete;
  ClusterSupervisor& operator=(const ClusterSupervisor&) = delete;

  // Starts the coordinator and waits until it listens (it writes its bound
  // port to <run_dir>/coordinator.port; SSH mode: until it answers at its
  // fixed address), then every ps, every standby (cluster.standby_ps) and
  // every worker, pointed at it. Keeps <run_dir>/launcher.pids naming them
  // (deploy/run_dir_guard.h) from here on. Aborted (name,
  // exit status, log tail) when the coordinator exits first; DeadlineExceeded
  // when it does not listen within options.startup_timeout; the error of a
  // daemon that cannot be started.
  absl::Status Start();

  // Polls the daemons and, every options.progress_period, the coordinator's
  // ClusterStatus (progress line, accuracy mark), until every worker has
  // finished (exited 0: OK) or options.interrupted() (OK; interrupted() is
  // then true), or a worker exits non-zero after reporting that its training
  // diverged (OK; that worker's workers() entry carries `diverged`). A daemon
  // that ends otherwise is handled by config.launcher's policy (DecideRestart)
  // and recorded in faults(): restarted with the same flags (the coordinator
  // on the same port) once its backoff (NextRestartBackoff) has passed, while
  // the others are watched and progress is shown, or left down; Aborted when
  // the policy gives up: its first line names the daemon, its exit and the
  // reason it gave (its --exit_reason_file) or else its log's last line; the
  // end of its log and the policy's reason follow.
  absl::Status Watch();

  // Stops workers (they push what they owe), then ps (final checkpoint), then
  // the coordinator; `before_coordinator` runs just before that (the
  // coordinator still answers). Ends the progress line first.
  void Stop(const std::function<void()>& before_coordinator = nullptr);

  // Aborted naming the first ps that exited non-zero on Stop (its final
  // checkpoint failed), else OK. Daemons left down are not asked.
  absl::Status PsExitStatus();

  // The coordinator's address once Start has it, else "".
  const std::string& coordinator_address() const {
    return coordinator_address_;
  }
  // What Watch saw last.
  const std::vector<WorkerResult>& workers() const { return latest_; }
  const std::string& stop_reason() const { return stop_reason_; }
  // The coordinator's last word on shard take-overs and what they lost.
  const std::vector<proto::ShardRecovery>& shard_recoveries() const {
    return recoveries_;
  }
  // Sets summary's shard_recoveries, acked_pushes_lost, acked_loss_final,
  // shard_replication and coordinator_offset_s from the last answer.
  void AddRecoveryFigures(LaunchSummary* summary) const;
  // Reads the coordinator's figures once more, after the workers and ps
  // stopped: their final heartbeats carry the final loss counts and what
  // the workers trained. Keeps the last ones when it does not answer.
  void ReadFinalFigures();
  double seconds_to_mark() const { return seconds_to_mark_; }
  bool interrupted() const { return interrupted_; }
  // The daemons that ended while the job ran, and what was done.
  const std::vector<FaultRecord>& faults() const { return faults_; }
  // Seconds since Start began, on options.clock.
  double elapsed_seconds() const;
  // Progress output (nothing when options.out is null).
  void Event(const std::string& text);

 private:
  // Stop's wait, between the workers and the ps, for every shard to have a
  // live server and every take-over to have settled (bounded); true when
  // they did.
  bool AwaitShardsServed();
  class Progress;
  // One daemon of the job and what restarting it takes.
  struct Slot {
    DaemonKind kind = DaemonKind::kWorker;
    int index = 0;
    std::string name;    // "ps 0"
    std::string binary;  // "server/ps_server"
    // What runs instead of bin_dir/binary (local mode): a worker's
    // launcher.worker_command, its program resolved. Empty: the binary.
    std::vector<std::string> command;
    std::string address;  // where it serves (its host, in SSH mode)
    std::vector<std::string> args;
    std::unique_ptr<DaemonProcess> process;  // null before its first start
    // Where its daemon writes why it gave up (--exit_reason_file); "" for a
    // remote daemon, whose file would be on its host.
    std::string reason_path;
    int restarts = 0;
    int backoff_streak = 0;  // NextRestartBackoff's streak
    bool finished = false;   // a worker that exited 0
    bool down = false;       // ended and not restarted
    // Ended, to be started again at restart_at; its fault is
    // faults_[restart_fault].
    bool restart_pending = false;
    absl::Time restart_at;
    size_t restart_fault = 0;
  };
  // The record of `slot`'s end for summary.json (action and reason unset).
  static FaultRecord FaultOf(const Slot& slot, const DaemonExit& exit,
                             double elapsed);

  // Starts (or restarts) slot.process with the shared flags and slot.args.
  absl::Status Launch(Slot& slot);
  // Sets the workers' slots' command from launcher.worker_command.
  absl::Status UseWorkerCommand();
  absl::Status StartCoordinator();
  absl::Status WaitForRemoteCoordinator();
  // Handles the slots that ended; counts the workers still running. Aborted
  // for a daemon the policy gives up on. Sets diverged_ (and returns OK) when
  // a worker that exited non-zero reported a divergence.
  absl::Status CheckDaemons(int* running);
  // How `slot`'s daemon ended with `status`; for a worker that exited
  // non-zero, asks the coordinator whether its training diverged.
  DaemonExit ExitOf(const Slot& slot, int status);
  // Ends `slot`'s worker, whose training diverged, with its report's words.
  void EndDiverged(Slot& slot);
  // Records `fault` and schedules `slot`'s restart after its backoff.
  absl::Status ScheduleRestart(Slot& slot, FaultRecord fault, double elapsed,
                               const std::string& ended,
                               const std::string& why);
  // Applies the policy to `slot`, which ended with `status`.
  absl::Status HandleExit(Slot& slot, int status);
  // DecideRestart, except that a worker is not restarted once the
  // coordinator says the job is over: the restart would only be told to
  // stop, and fail the same way (a worker whose last pushes found no server
  // of a shard that died as the job ended).
  RestartDecision DecideFor(const Slot& slot, const DaemonExit& exit);
  // The coordinator's stop reason when it says the job is over; "" when it
  // does not, or does not answer.
  std::string JobOverReason() const;
  // Starts a pending restart of `slot` once its time has come. Aborted (and
  // its fault marked "gave up") when the restart fails.
  absl::Status RestartWhenDue(Slot& slot);
  // Rewrites <run_dir>/launcher.pids: this launcher and every daemon running.
  void WritePids();
  // Asks the coordinator for the figures (again, if the last answer matters).
  void PollCoordinator(int running);
  // Keeps the recovery, loss and backup figures of a ClusterStatus read at
  // `elapsed`.
  void KeepRecoveryFigures(const proto::ClusterStatusResponse& status,
                           double elapsed);
  // What the daemon of `slot` said when it gave up (its exit reason file,
  // on one line), or "" when it wrote none.
  std::string ExitReason(const Slot& slot) const;
  // One line: "ps 1 exited with status 2 after 0.1 s: <ExitReason>", or
  // without a reason "...; its log (PATH) ends: <last line>".
  std::string ExitLine(const Slot& slot, int status) const;
  // ExitLine, then the end of its log.
  std::string Dead(const Slot& slot, int status) const;

  const Config& config_;
  const LaunchOptions& options_;
  Clock* const clock_;
  const absl::Time start_;
  std::unique_ptr<Progress> progress_;

  Slot coordinator_;
  std::vector<Slot> ps_;
  std::vector<Slot> standbys_;
  std::vector<Slot> workers_;
  std::string coordinator_address_;
  std::vector<FaultRecord> faults_;

  std::vector<WorkerResult> latest_;
  std::string stop_reason_;
  std::vector<proto::ShardRecovery> recoveries_;
  uint64_t acked_pushes_lost_ = 0;
  bool acked_loss_final_ = true;
  std::vector<proto::ShardReplication> replication_;
  std::vector<proto::MemberOutage> outages_;
  double coordinator_offset_s_ = 0;
  // Shards last seen without a backup (the launcher says so once per
  // change).
  std::set<int> unbacked_;
  double seconds_to_mark_ = -1;
  LaunchSummary mark_;  // only its task and mark fields (SetMark)
  bool interrupted_ = false;
  bool diverged_ = false;  // a worker exited after its training diverged
};

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_CLUSTER_SUPERVISOR_H_

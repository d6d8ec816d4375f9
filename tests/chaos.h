// The chaos harness: a seeded random schedule of faults against a real
// cluster run by the launcher (2 shards replicated to 2 standbys, 2 workers,
// checkpoints), and the invariants every run must keep, judged at its end
// from what a user can see (summary.json, the final checkpoints, the
// processes left) and printed with the seed so a failure can be replayed.
//
//   chaos::Harness harness(options);             // bin_dir, work_dir, ...
//   absl::StatusOr<chaos::Outcome> reference = harness.Run(seed, {});
//   std::vector<chaos::Fault> faults = chaos::MakeSchedule(seed, 6, 12,
//   layout); chaos::Outcome run = harness.Run(seed, faults); for (const
//   std::string& v : chaos::CheckInvariants(run.observed, judge)) ...
//
// Faults: kill -9 of any daemon (the launcher restarts it), SIGSTOP/SIGCONT
// of any daemon (the coordinator, a shard's primary, a standby, a worker), a
// shard's primary and then whoever took it over killed close together, and
// with cluster.replication 3 (Options::replication, Layout::simultaneous) a
// shard's primary and one of its backups killed in the same instant, a full
// disk under the checkpoint folder (a tmpfs of the launcher's own
// mount namespace, filled and freed again); with the cluster in network
// namespaces (Options::lab), a daemon's host cut off (its link down) or its
// link shaped to a crawl with tc tbf, for a while. With Options::sparse the
// job is sparse_linear on streamed LIBSVM files and bucket moves (psctl
// move-buckets) join the faults, with Layout::elastic_workers workers that
// join (ps_worker --join) and drain (psctl drain-worker) too; the rows and
// buckets are judged as well (tests/chaos_sparse.h). tests/chaos_test runs a
// short schedule; tests/chaos_main.cc (bazel run //tests:chaos) the long one.
// docs/OPERATIONS.md says how to replay a seed.
#ifndef DOWNPOUR_TESTS_CHAOS_H_
#define DOWNPOUR_TESTS_CHAOS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace downpour {
class NetnsLab;
}

namespace downpour::chaos {

enum class FaultKind {
  kKill,        // SIGKILL; the launcher restarts the daemon
  kStop,        // SIGSTOP, SIGCONT after duration_s
  kDoubleKill,  // SIGKILL a shard's primary, then its successor
  // SIGKILL a shard's primary and one of its backups in the same instant
  // (Layout::simultaneous)
  kPrimaryAndBackup,
  kFullDisk,  // the checkpoint folder's filesystem full for duration_s
  // Network faults (a cluster in a NetnsLab only):
  kPartition,  // the daemon's host cut off from the others for duration_s
  kCrawl,      // its link shaped to rate_mbit (tc tbf) for duration_s
  // Sparse jobs only (Layout::sparse), drawn after every other kind:
  // `psctl move-buckets --to index --buckets A-B` of a range of buckets the
  // other shard holds at the fault's time (`bucket_share`: where the range
  // starts in its list, `bucket_count`: how many), not waited for; a
  // refusal (a shard down, a move in progress) is noted as skipped.
  kMoveBuckets,
  // Layout::elastic_workers only: `ps_worker --join` started by the harness
  // (killed at the end if still running), and `psctl drain-worker N` of the
  // worker `index` (modulo those listed then).
  kJoinWorker,
  kDrainWorker,
};

struct Fault {
  double at_s = 0;  // seconds after the cluster was training and backed up
  FaultKind kind = FaultKind::kKill;
  // "ps" (whoever serves shard `index` now), "standby" (configured standby
  // `index`), "worker", "coordinator"; "" for a full disk.
  std::string role;
  int index = 0;
  // kStop: seconds stopped; kFullDisk: seconds full; kDoubleKill: seconds
  // between the successor's take-over and its kill; kPartition, kCrawl:
  // seconds cut off or shaped.
  double duration_s = 0;
  double rate_mbit = 0;  // kCrawl: the link's rate, both ways
  // kPrimaryAndBackup: which of the shard's backups, by its place in the
  // coordinator's list (modulo the backups named then).
  int backup = 0;
  // kMoveBuckets: the range's start, as a fraction of the other shard's
  // buckets, and its length (at least 1, at most what that shard holds).
  double bucket_share = 0;
  int bucket_count = 0;
};

// "3.20 s: kill -9 ps 1 (the shard's server)".
std::string Describe(const Fault& fault);

struct Layout {
  int shards = 2;
  int standbys = 2;
  int workers = 2;
  bool full_disk = true;  // a tmpfs can be mounted (CanMountTmpfs)
  bool network = false;   // the cluster runs in a NetnsLab: cut and crawl
  // cluster.replication 3: kPrimaryAndBackup faults too (drawn after every
  // other kind, so a layout without them gives the schedules it gave before).
  bool simultaneous = false;
  // A sparse job (Options::sparse): bucket moves too, drawn after every
  // other kind (the kinds above keep their schedules).
  bool sparse = false;
  // Sparse only: workers that join (ps_worker --join) and drain (psctl
  // drain-worker), drawn after the moves.
  bool elastic_workers = false;
};

// `count` faults at times drawn over [0, span_s), sorted; the same seed and
// arguments give the same schedule (and a layout without network faults
// the schedule it gave before they existed).
std::vector<Fault> MakeSchedule(uint64_t seed, int count, double span_s,
                                const Layout& layout);

// What a run left behind to judge.
struct Observed {
  bool ended = false;  // the launcher exited within the bound
  int exit_status = -1;
  double seconds = 0;                    // launch to exit
  std::vector<std::string> left_behind;  // "ps 1 (pid 123)": alive after
  // summary.json: empty outcome when it could not be read.
  std::string
      outcome;  // "succeeded", "succeeded with loss: ...", "failed: ..."
  std::string failure;
  double accuracy = 0;
  bool interrupted = false;
  uint64_t acked_pushes_lost = 0;  // reported, all shards
  bool loss_exact = true;
  std::map<int, uint64_t> lost_per_shard;  // reported
  // Per shard, the sources of its recoveries ("replica", "checkpoint").
  std::map<int, std::vector<std::string>> recovery_sources;
  // Whole pushes acknowledged: the workers' last processes' (summary.json)
  // plus, for each earlier worker process (killed here, or ended on its
  // own, or a slot's last one that failed and was left down once the job
  // was over), the last count read from its Status (pushes_acked; read
  // every 0.1 s and just before a kill).
  uint64_t acked_pushes = 0;
  // What those earlier processes may have had applied beyond that count:
  // per process, 2 (in flight at its end), the largest rise seen between two
  // reads of its count, and its fastest rate times how long it lived past
  // its last read (a stopped or starved process cannot be read).
  uint64_t acked_slack = 0;
  int worker_kills = 0;  // by the harness
  int worker_ends = 0;   // earlier worker processes, however they ended
  // Per shard, every block's version in its last checkpoint (updates held).
  std::map<int, std::vector<uint64_t>> versions;
  std::string checkpoint_error;  // why versions are missing
  // Sparse jobs (Options::sparse): the row updates the final checkpoints
  // hold (the sum of every row's version, over the shards' tables) ...
  bool sparse = false;
  uint64_t held_row_updates = 0;
  // ... and those the workers had acknowledged: each worker's last process's
  // final report (the launcher's history.json, else the coordinator's last
  // read) plus each earlier
  // process's last report (MemberReport.sparse_row_updates), with a slack
  // for what the earlier ones may have had applied after it (as for
  // acked_slack: twice their largest rise between two reads, and their
  // fastest rate over the time they lived past the read).
  uint64_t acked_row_updates = 0;
  uint64_t acked_row_slack = 0;
  // Worker slots whose last process's final report (finished, or counting
  // the pushes summary.json gives it) was never read.
  std::vector<int> rows_unread;
  // model.sparse_buckets, and the last placement read while the
  // coordinator ran: per shard its buckets (ShardInfo.buckets).
  int sparse_buckets = 0;
  std::map<int, std::vector<uint32_t>> buckets;
  bool placement_read = false;
  // The moves the coordinator listed last: "move 2 (buckets 3-7, shard 0 ->
  // 1): done" and the like; those still in "copy" or "switched" again in
  // open_moves.
  std::vector<std::string> moves;
  std::vector<std::string> open_moves;
  // Where the moves were read: "the coordinator's state file at the end"
  // or "the last status read".
  std::string moves_source;
};

struct Judge {
  double reference_accuracy = 0;  // the undisturbed run's
  double tolerance = 0.03;        // accuracy may fall this far below it
};

// Every invariant the run broke, one line each (empty: none):
//  - the launcher ended within the bound, and left no daemon running;
//  - it wrote summary.json, and was not interrupted;
//  - "succeeded" only with accuracy within tolerance of the undisturbed run
//    and exit status 0; "failed" only with a reason and a non-zero exit;
//  - on a run that succeeded: per shard, every block at one version; no
//    acknowledged push applied twice (version <= acknowledged + slack); every
//    acknowledged push the model misses is counted in the reported loss
//    (unless the summary gives the loss as a lower bound, "at least": a
//    killed worker process's pushes lost with a shard leave no gap to count);
//    and
//    a loss is reported only for a shard recovered from a checkpoint (no
//    backup: a standby loaded it, or the shard's ps restarted from it),
//    never where every recovery came from a replica;
//  - sparse jobs, on a run that succeeded: the final checkpoints hold no
//    more row updates than the workers acknowledged (+ the slack for ended
//    worker processes), and none fewer unless a loss was reported; every
//    bucket of model.sparse_buckets owned by exactly one shard in the last
//    placement read; no move left in "copy" or "switched".
std::vector<std::string> CheckInvariants(const Observed& observed,
                                         const Judge& judge);

struct Options {
  std::string bin_dir;    // holds deploy/launcher, server/ps_server, ...
  std::string work_dir;   // a folder per run is made under it
  std::string mnist_dir;  // "" = synthetic digits
  int epochs = 40;        // over 6000 examples: about 10 s undisturbed here
  // The launcher must end within this; past it the run is a hang.
  absl::Duration bound = absl::Minutes(4);
  bool full_disk = true;  // mount the checkpoint tmpfs (see CanMountTmpfs)
  // cluster.replication: 2 (a standby per shard) or 3 (two per shard: four
  // standbys; loopback only, not with `lab`).
  int replication = 2;
  // Non-null: every daemon runs on a host of its own in this lab, made by
  // SetUpLab (which also moved this process into its "ctl" host), started
  // by the launcher's --ssh mode; partitions and crawls become possible.
  NetnsLab* lab = nullptr;
  // A sparse job instead (sparse_linear, FTRL, generated LIBSVM files
  // streamed, 32 buckets, cluster.max_workers 3): bucket moves become
  // possible, and the sparse invariants are judged. Loopback only.
  bool sparse = false;
  int sparse_examples = 40000;  // training rows generated
};

// Makes `lab`'s hosts (ctl, coordinator, ps0, ps1, standby0, standby1,
// worker0, worker1) and moves this process into "ctl", where the harness
// and the launcher run. Call it before any thread exists (before any gRPC
// call). "" on success, else why not (a test skips).
std::string SetUpLab(NetnsLab* lab);

// "" when this process may mount a tmpfs in a mount namespace of its own
// (root, or unprivileged user namespaces), else why not.
std::string CanMountTmpfs();

struct Outcome {
  Observed observed;
  std::vector<std::string> done;  // the faults as carried out, or skipped
  std::string run_dir;
};

// "seed 3: succeeded, accuracy 0.9485, 24.9 s" and, a line each, the faults
// as carried out.
std::string Summarize(uint64_t seed, const Outcome& run);

class Harness {
 public:
  explicit Harness(Options options) : options_(std::move(options)) {}

  // Launches the job (seeded with `seed`), waits until it trains with every
  // shard backed up, carries out `faults` on their schedule, waits for the
  // launcher to end (or the bound), and gathers what Observed holds.
  // An error only when the run could not be started at all.
  absl::StatusOr<Outcome> Run(uint64_t seed, const std::vector<Fault>& faults);

 private:
  Options options_;
};

}  // namespace downpour::chaos

#endif  // DOWNPOUR_TESTS_CHAOS_H_

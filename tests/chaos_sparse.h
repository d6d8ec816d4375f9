// The chaos harness's sparse job (tests/chaos.h, Options::sparse): its
// config and data, what a run shows of its rows and buckets (SparseView),
// the elastic faults (bucket moves, workers that join and drain) carried out
// as a user would, with psctl and ps_worker, and the sparse invariants.
// Internal to tests/chaos.cc.
#ifndef DOWNPOUR_TESTS_CHAOS_SPARSE_H_
#define DOWNPOUR_TESTS_CHAOS_SPARSE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "proto/coordinator.pb.h"
#include "proto/coordinator_state.pb.h"
#include "tests/chaos.h"

namespace downpour::chaos::internal {

inline constexpr int kSparseBuckets = 32;

// Writes `dir`/train.svm (`examples` rows) and `dir`/test.svm.
void WriteSparseData(const std::string& dir, int examples);

// The job's data, model, optimizer and training sections (sparse_linear,
// FTRL, the files of WriteSparseData streamed, kSparseBuckets buckets).
std::string SparseJobYaml(const std::string& dir, int epochs);

// The row updates the shards' newest checkpoints under `dir` hold (the sum
// of their rows' versions over every table); an error names the shard.
absl::StatusOr<uint64_t> CheckpointRowUpdates(const std::string& dir,
                                              int shards);

// Per worker slot, its report in the last sample of the launcher's
// history.json (`path`) that lists it: the final reports (the launcher reads
// the history once the workers ended), which a poll may miss.
absl::StatusOr<std::map<int, proto::MemberReport>> FinalWorkerReports(
    const std::string& path);

// What the coordinator shows of a sparse run, read every 0.1 s while it
// runs: the workers' last reports and the placement. Thread-compatible.
class SparseView {
 public:
  void NoteStatus(const proto::ClusterStatusResponse& status);
  void NotePlacement(const proto::GetPlacementResponse& placement);
  const proto::GetPlacementResponse& placement() const { return placement_; }
  bool placement_read() const { return placement_read_; }
  // The buckets shard `shard` holds in the last placement read.
  std::vector<uint32_t> BucketsOf(int shard) const;
  // Worker slot `index`'s last report (step > 0 or finished); null if none.
  const proto::MemberReport* LastReport(int index) const;
  // The worker slots that ever reported.
  std::vector<int> Reported() const;
  // The coordinator's state file as the job ended: its moves replace those
  // the last status read listed (a poll may be seconds old by then).
  void NoteFinalState(const proto::CoordinatorState& state);
  // Fills Observed's placement and moves from the last reads.
  void Fill(Observed* o) const;

 private:
  std::map<int, proto::MemberReport> reports_;
  std::vector<proto::BucketMove> moves_;
  proto::GetPlacementResponse placement_;
  bool placement_read_ = false;
  bool final_state_ = false;
};

// The faults only a sparse job gets: bucket moves through `psctl
// move-buckets`, and (Layout::elastic_workers) `ps_worker --join` and
// `psctl drain-worker`. Each returns what to add to the fault's note.
class ElasticFaults {
 public:
  // `wait(d)`: the harness's wait (it keeps reading the cluster); false once
  // the launcher ended.
  ElasticFaults(std::string bin_dir, std::string config, std::string dir,
                std::function<bool(absl::Duration)> wait)
      : bin_dir_(std::move(bin_dir)),
        config_(std::move(config)),
        dir_(std::move(dir)),
        wait_(std::move(wait)) {}

  std::string Move(const Fault& f, const std::string& coordinator,
                   const SparseView& view);
  std::string Join(const std::string& coordinator);
  std::string Drain(const Fault& f, const std::string& coordinator,
                    const proto::ClusterStatusResponse* status);
  // Waits a little for what still runs, kills the rest; a line each on how
  // the commands ended.
  std::vector<std::string> Finish();

 private:
  // Runs psctl `args` (after --coordinator); waits up to 1.5 s for it to
  // end: "skipped: <why>" on a refusal, "done" or "started" otherwise.
  std::string Psctl(const std::string& what, const std::string& coordinator,
                    std::vector<std::string> args);

  const std::string bin_dir_, config_, dir_;
  const std::function<bool(absl::Duration)> wait_;
  struct Command {
    std::string what;
    std::unique_ptr<Subprocess> process;
  };
  std::vector<Command> psctl_, joined_;
};

// Adds the sparse invariants `o` broke to `v` (a run that succeeded).
void CheckSparseInvariants(const Observed& o, std::vector<std::string>* v);

}  // namespace downpour::chaos::internal

#endif  // DOWNPOUR_TESTS_CHAOS_SPARSE_H_

// The consistency gate of one ps shard: which path a push takes under
// training.consistency (applied at once, held for its ssp turn, or joined
// to a bsp round), the bsp rounds' sparse rows and versions, the ssp lead,
// and the hold bookkeeping (a generation that changes when a held push may
// go on, the release at stop, the reasons a held push gives). The clocks and
// round sums themselves are Consistency's (server/consistency.h).
//
//   ConsistencyGate gate(config, /*index=*/0, counters);
//   switch (gate.RouteOf(worker, tracked)) {
//     case ConsistencyGate::Route::kRound: ... gate.Contribute(...) ...
//     case ConsistencyGate::Route::kAwaitCounting:
//       if (gate.Hold(&mu, until, &waited)) ... retry ...
//     case ConsistencyGate::Route::kDirect:
//       if (auto wait = gate.SspWaitFor(worker, ids, clock)) { ... Hold ... }
//       ... apply ...; gate.Applied(worker, ids, clock);
//   }
//
// Not thread-safe: the owner (Shard) calls it under its exclusive lock, which
// Hold releases while a push waits.
#ifndef DOWNPOUR_SERVER_CONSISTENCY_GATE_H_
#define DOWNPOUR_SERVER_CONSISTENCY_GATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/push_view.h"
#include "server/consistency.h"
#include "server/sparse_tables.h"

namespace downpour::server {

class ConsistencyGate {
 public:
  // How often the ps says whom a held push waits for (per waited-for
  // worker).
  static constexpr absl::Duration kWaitLogInterval = absl::Seconds(5);

  // training.consistency and max_staleness of `config`; `index` names the
  // shard in logs and errors. `counters` must outlive the gate.
  ConsistencyGate(const Config& config, int index, Counters* counters);
  ConsistencyGate(const ConsistencyGate&) = delete;
  ConsistencyGate& operator=(const ConsistencyGate&) = delete;

  Consistency::Mode mode() const { return consistency_.mode(); }

  // ---- holds ----

  // Bumped whenever a held push might go on: a push or round applied, the
  // active set changed, the holds released.
  uint64_t generation() const { return generation_; }
  void Bump() { ++generation_; }
  // Ends every hold, now and later (the ps is stopping).
  void ReleaseHolds() {
    released_ = true;
    ++generation_;
  }
  bool released() const { return released_; }
  // Holds a push, releasing *mu (the owner's lock, held exclusively), until
  // the generation changes or `until`: false at `until` or once released.
  // A push's first hold (*waited false) is counted ("ssp_waits" or
  // "bsp_waits", by the mode) and sets *waited.
  bool Hold(absl::Mutex* mu, absl::Time until, bool* waited)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Unavailable(`why`), the reason a held push gives; logged at most every
  // kWaitLogInterval per waited-for worker.
  absl::Status HoldError(const std::string& why, int waited_for);

  // The workers waited for (Shard::SetActiveWorkers): false, nothing done,
  // when they are the set known already; else logged and set.
  bool SetActiveWorkers(const std::vector<int>& workers);

  // ---- the path of a push ----

  enum class Route {
    kDirect,         // apply now (async), or after its ssp turn
    kAwaitCounting,  // bsp: the worker is not counted in rounds yet: wait
    kRound,          // bsp: joins the rounds of its blocks
  };
  // The path of a push of `worker`; `tracked`: it has a sequence.
  Route RouteOf(int32_t worker, bool tracked) const;
  // The hold error of a kAwaitCounting push that waited in vain.
  absl::Status NotCountedError(int32_t worker);

  // ---- ssp ----

  // Consistency::SspWaitFor: nullopt when the push may be applied now.
  std::optional<Consistency::Wait> SspWaitFor(int32_t worker,
                                              const std::vector<uint32_t>& ids,
                                              uint64_t clock) const {
    return consistency_.SspWaitFor(worker, ids, clock);
  }
  // The hold error of a push that waited in vain for `wait`.
  absl::Status SspHoldError(int32_t worker, const Consistency::Wait& wait);
  // `worker`'s push of `ids` at `clock` applied: counted (the largest lead,
  // "ssp_max_lead"), and the generation bumped. No-op when async.
  void Applied(int32_t worker, const std::vector<uint32_t>& ids,
               uint64_t clock);

  // ---- bsp ----

  // The bsp round id of sparse table `table` (beside the block ids).
  static uint32_t SparseRoundId(uint32_t table) { return 0xFFFFFF00u + table; }
  static bool IsSparseRound(uint32_t id) { return id >= SparseRoundId(0); }
  // The round contributions of `request`: its blocks, then each sparse
  // table as a round of no floats; *bytes: the payload bytes.
  static std::vector<Consistency::BlockGradient> BspGradients(
      const wire::PushView& request, int64_t* bytes);
  // Consistency::BspContribute; when added, `rows` (the push's decoded
  // sparse rows, in request order) wait for their rounds and *rows is
  // cleared.
  Consistency::Contribution Contribute(
      const wire::PushView& request,
      const std::vector<Consistency::BlockGradient>& gradients,
      std::vector<SparseTables::DecodedRows>* rows);
  // The rounds complete now (Consistency::BspCompleteRounds).
  std::vector<uint32_t> CompleteRounds() const {
    return consistency_.BspCompleteRounds();
  }
  // Closes dense round `id`: *mean receives its mean; returns the pushes now
  // applied on every block they carried. REQUIRES: !IsSparseRound(id).
  std::vector<std::pair<int, uint64_t>> TakeRound(uint32_t id,
                                                  std::vector<float>* mean) {
    return consistency_.BspTakeRound(id, mean);
  }
  // A sparse table's complete round merged: per key of the contributors'
  // union (ascending), the sum of their gradients over their number (a key
  // a worker did not push counts 0 for it, as a dense round's mean does),
  // and the counts summed.
  struct SparseRound {
    uint32_t table = 0;
    std::vector<uint64_t> keys;
    std::vector<float> mean;
    std::vector<uint32_t> counts;
  };
  // Closes sparse round `id` of `tables` into *round (no keys when the
  // table is unknown); returns the pushes now applied, as TakeRound.
  // REQUIRES: IsSparseRound(id).
  std::vector<std::pair<int, uint64_t>> TakeSparseRound(
      uint32_t id, const SparseTables& tables, SparseRound* round);
  // Block `block`'s version after its last round (0: none yet).
  uint64_t RoundVersion(uint32_t block) const;
  void SetRoundVersion(uint32_t block, uint64_t version) {
    round_version_[block] = version;
  }
  // The hold error of a round push that waited in vain: whom the first
  // unfinished round of `gradients` waits for.
  absl::Status BspHoldError(
      int32_t worker, const std::vector<Consistency::BlockGradient>& gradients,
      Consistency::Contribution contribution);

 private:
  // Constant after construction.
  const int index_;
  Counters* const counters_;

  Consistency consistency_;  // ssp clocks and bsp rounds
  uint64_t generation_ = 0;
  bool released_ = false;
  // Per waited-for worker, when the ps last logged that someone waits for it.
  std::map<int, absl::Time> wait_logged_;
  // The largest clock lead an applied push had ("ssp_max_lead").
  int64_t max_lead_ = 0;
  // Per block, its version after its last bsp round.
  std::map<uint32_t, uint64_t> round_version_;
  // bsp: by table, each contributor's rows in the table's open round.
  std::map<uint32_t, std::map<int, SparseTables::DecodedRows>> bsp_rows_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_CONSISTENCY_GATE_H_

// Who may push when: the clocks of training.consistency ssp (Ho et al. 2013,
// Stale Synchronous Parallel) and the rounds of bsp, for one ps shard.
//
//   Consistency gate(Consistency::Mode::kSsp, /*max_staleness=*/3);
//   gate.SetActiveWorkers({0, 1});               // from the coordinator
//   if (auto wait = gate.SspWaitFor(1, {3})) {   // hold the push, retry later
//     ... wait->worker is the one it waits for ...
//   } else {
//     ... apply ...; gate.SspApplied(1, {3});
//   }
//
// Clocks are per (worker, block): clock(w, b) is the clock of worker w's last
// push applied to block b. A push carries its worker's clock
// (PushRequest.clock: the worker's push number counted from the start clock the
// coordinator gave it at registration), so every shard sees the same clocks
// whatever the order in which they learn of the workers; a late or restarted
// worker starts at the others' minimum ("joins at the pack") and nobody waits
// for it to redo history. (Clocks counted per shard, with each shard joining
// newcomers when it heard of them, disagreed between shards and deadlocked 4
// workers on 2 shards.) Pushes without a clock (tools) are counted here. Work
// is per block, never per request: a client may split one push into several
// requests. Only the workers in the active set (those the coordinator lists as
// registered, alive and not finished) are waited for; until the first set
// arrives, and for workers outside it, nobody is gated.
//
// bsp: per block, a round collects one contribution from every active worker
// into a sum buffer; when the last one arrives (or the active set shrinks to
// those who contributed) the round is complete and its mean is taken once.
//
// Not thread-safe: the owner (Shard) serialises, like BlockStore.
#ifndef DOWNPOUR_SERVER_CONSISTENCY_H_
#define DOWNPOUR_SERVER_CONSISTENCY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/wire_encoding.h"

namespace downpour::server {

class Consistency {
 public:
  // training.consistency, parsed by the config loader.
  using Mode = ConsistencyMode;

  Consistency(Mode mode, int max_staleness);
  Consistency(const Consistency&) = delete;
  Consistency& operator=(const Consistency&) = delete;

  Mode mode() const { return mode_; }
  int max_staleness() const { return max_staleness_; }

  // The workers waited for, from the coordinator. Newcomers join at the pack
  // (ssp clocks); bsp rounds may complete because of a smaller set (see
  // BspCompleteRounds).
  void SetActiveWorkers(const std::vector<int>& workers);
  bool active_known() const { return active_known_; }
  const std::set<int>& active() const { return active_; }
  // True when pushes of `worker` go through the gate: ssp or bsp, the active
  // set is known and holds the worker.
  bool Gated(int worker) const;

  // ---- ssp ----

  // Why a push of `worker` to `blocks` must wait: the first block on which the
  // worker's clock is more than max_staleness ahead of the slowest active
  // worker, and that worker.
  struct Wait {
    uint32_t block = 0;
    int worker = -1;    // waited for
    int64_t clock = 0;  // the pusher's clock on `block`
    int64_t slowest_clock = 0;
  };
  // nullopt when the push may be applied now (always when not Gated).
  // `push_clock` is PushRequest.clock (the worker's own push number, the
  // same on every shard); 0 = count this worker's pushes here instead.
  std::optional<Wait> SspWaitFor(int worker,
                                 const std::vector<uint32_t>& blocks,
                                 uint64_t push_clock = 0) const;
  // Counts a push of `worker` applied to `blocks` (every mode's pushes are
  // counted). Returns its largest lead over the active minimum before the
  // push (0 when not Gated).
  int64_t SspApplied(int worker, const std::vector<uint32_t>& blocks,
                     uint64_t push_clock = 0);
  int64_t clock(int worker, uint32_t block) const;
  void SetClockForTest(int worker, uint32_t block, int64_t clock) {
    clocks_[worker][block] = clock;
  }

  // ---- bsp ----

  // One block of a contribution: `floats` little-endian float32 values at
  // `data` (any alignment).
  struct BlockGradient {
    uint32_t block = 0;
    const void* data = nullptr;
    size_t floats = 0;  // values at data
    // How the values at data are encoded; summed as float32.
    WireEncoding encoding = WireEncoding::kFloat32;
  };
  enum class Contribution {
    kAdded,    // added to the rounds of its blocks; wait for them to apply
    kPending,  // this (worker, sequence) is already in: wait, nothing added
    kBusy,     // the worker has another push in a round: wait for it, retry
  };
  // REQUIRES: every gradient of a block has the same length.
  Contribution BspContribute(int worker, uint64_t sequence,
                             const std::vector<BlockGradient>& gradients);
  // True while `worker` has a contribution in a round not yet applied.
  bool BspHasPending(int worker) const {
    return pending_.find(worker) != pending_.end();
  }
  // The blocks whose round is complete: it has a contribution and every
  // active worker contributed.
  std::vector<uint32_t> BspCompleteRounds() const;
  // Closes block `block`'s round: *mean receives the mean of its
  // contributions. Returns the (worker, sequence) pushes that are now applied
  // on every block they carried.
  // REQUIRES: `block` is in BspCompleteRounds().
  std::vector<std::pair<int, uint64_t>> BspTakeRound(uint32_t block,
                                                     std::vector<float>* mean);
  // The workers whose contributions block `block`'s open round holds, in
  // ascending order.
  std::vector<int> BspContributors(uint32_t block) const;
  // The active workers that block `block`'s round still waits for.
  std::vector<int> BspWaitingFor(uint32_t block) const;

 private:
  struct Round {
    std::vector<float> sum;
    std::map<int, uint64_t> contributors;  // worker -> sequence
  };
  struct Pending {
    uint64_t sequence = 0;
    std::set<uint32_t> blocks;  // not yet applied
  };

  // The smallest clock on `block` of the active workers other than `worker`
  // (a worker that has not pushed here yet counts 0), and who has it;
  // INT64_MAX and *who untouched when there is none.
  int64_t OthersMin(int worker, uint32_t block, int* who) const;
  // The worker's clock on `block` before a push carrying `push_clock`.
  int64_t ClockBefore(int worker, uint32_t block, uint64_t push_clock) const;

  const Mode mode_;
  const int max_staleness_;
  bool active_known_ = false;
  std::set<int> active_;
  // worker -> block -> clock.
  std::map<int, std::map<uint32_t, int64_t>> clocks_;
  std::map<uint32_t, Round> rounds_;  // open bsp rounds
  std::map<int, Pending> pending_;    // per worker
  std::vector<float> decoded_;        // BspContribute's scratch, reused
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_CONSISTENCY_H_

// Keeps any single worker, buggy or hostile, from ruining a shard's model with
// pushes that pass every absolute bound (config.robustness):
//
//   PushGuard guard(options);
//   RETURN_IF_ERROR(guard.CheckRate(worker, now));        // once per push
//   guard.RecordPush(worker, now);          // once per push past CheckRate
//   ASSIGN_OR_RETURN(double clip, guard.CheckNorm(block, worker, norm));
//   ... apply, scaled down to `clip` when it is > 0 ...
//   guard.RecordNorm(block, worker, norm);                // per block applied
//
// Norms. Per block, each worker keeps an exponential moving average of its
// recent norms to that block; once it has made warmup_pushes, it counts. A
// block gradient is clipped to norm_clip_factor times the lower median of the
// counted workers' averages, and refused beyond norm_refuse_factor times the
// upper median of the *other* counted workers' averages of all they pushed,
// refused pushes included. So a worker's own history never excuses it, no
// worker can drag another's refusal bound down, and when the gradients of all
// honest workers grow together (a damaged model) each is refused about once,
// not for good: the others' refused norms raise its bound. With only one
// other counted worker, only a newcomer is refused: of two established
// workers the guard cannot tell which one is wrong, and the one that was
// there first is trusted. Medians are recomputed every few pushes. A
// per-block ring of recent norms would be owned by a worker that floods: a
// per-worker average gives each worker one vote however fast it pushes.
// Norms shrink over training; an average lags above them, so honest pushes
// stay under the bound. Refused pushes count neither towards a worker's
// warm-up nor its clip average, so a worker refused from its first push
// never gets to count.
//
// Rates. Per worker, a count of its pushes past the rate bound (applied or
// not: a worker whose pushes are refused for their norms still pushes)
// decaying with time constant rate_window; a push is refused (Unavailable,
// which honest clients retry with backoff) while the worker's count exceeds
// rate_factor times the median count of the active workers (those that
// pushed within the last quarter window) plus kRateSlack. With one active
// worker there is nothing to compare with, and no limit.
//
// Every refusal is counted ("suspect_pushes_worker_<w>", "guard_refused_norm",
// "guard_refused_rate"), every clip too ("clipped_blocks_worker_<w>",
// "guard_clipped_blocks": honest workers meet it now and then), and
// logged as a WARN line naming the worker, block, norm and bound (at most a
// few per worker each 10 s; common/log_throttle.h).
//
// Thread-compatible, like BlockStore: the owner (Shard) serialises. Memory:
// 16 bytes per (block pushed to, configured worker), allocated on the first
// push to a block; nothing is allocated per push but for the counter names of
// suspect pushes. Not checkpointed or replicated: a restarted or promoted ps
// warms up again.
#ifndef DOWNPOUR_SERVER_PUSH_GUARD_H_
#define DOWNPOUR_SERVER_PUSH_GUARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/log_throttle.h"

namespace downpour::server {

class PushGuard {
 public:
  struct Options {
    // Workers 0 .. num_workers - 1 are tracked; pushes of other ids pass
    // unchecked (PushAdmission refuses them first).
    int num_workers = 0;
    // Block ids 0 .. num_blocks - 1 (the model's) are tracked.
    int64_t num_blocks = 0;
    // Names this ps in messages.
    int shard_index = 0;
    // config.robustness; its factors at 0 turn that check off.
    RobustnessSection robustness;
    // Where the counters above go. Not owned; may be null.
    Counters* counters = nullptr;
    // Time source of the WARN lines' throttle (tests inject a FakeClock);
    // null = Clock::Real(). CheckRate and RecordPush take `now` themselves.
    Clock* clock = nullptr;
  };

  // Pushes a worker may make beyond rate_factor times the median, per window.
  static constexpr double kRateSlack = 16;
  // Weight of a new norm in a worker's average of log norms.
  static constexpr double kNormWeight = 1.0 / 16;
  // A block's typical norm is recomputed after this many recorded pushes.
  static constexpr uint32_t kRecomputeEvery = 8;
  // A worker's average stops counting after this many pushes to the block by
  // others (a worker that left, or was replaced).
  static constexpr uint32_t kForgetAfter = 4096;

  explicit PushGuard(Options options);
  ~PushGuard();
  PushGuard(const PushGuard&) = delete;
  PushGuard& operator=(const PushGuard&) = delete;

  // Unavailable when `worker` has pushed more than its fair share lately:
  // "push: ps 0 refuses worker 3's push: 812 pushes in the last ~5 s, over
  // the bound 4 x 50 (median worker) + 16 (robustness.rate_factor); retry
  // later". OK otherwise (and always with rate_factor 0).
  absl::Status CheckRate(int32_t worker, absl::Time now);
  // Counts one push of `worker` that passed CheckRate, for CheckRate, whether
  // it is then applied or not (once per push, however often it is checked).
  void RecordPush(int32_t worker, absl::Time now);

  // The norm a block gradient of L2 norm `norm` is to be clipped to (0: none)
  // or Aborted when it is beyond norm_refuse_factor times the block's
  // typical norm: "push: block 3 gradient norm 9.2e+08 of worker 3 is beyond
  // 1000 x 0.41, the norm typical of this block's workers
  // (robustness.norm_refuse_factor); nothing was applied ...". Aborted, not
  // InvalidArgument: the shard uses the sequence up and answers the push OK
  // with PushResponse.refused; the worker goes on without that gradient and
  // counts none of it as applied, so an honest worker's rare outlier costs
  // it one gradient, not its life. Before warm-up,
  // 0 (no bound). A refused norm goes into the worker's average of all it
  // pushed, which only ever raises the other workers' bounds.
  absl::StatusOr<double> CheckNorm(uint32_t block, int32_t worker, double norm);
  // Records the norm of `worker`'s block gradient as pushed (before clipping:
  // a clipped worker's average must not fall to its bound).
  void RecordNorm(uint32_t block, int32_t worker, double norm);

  // Whether CheckNorm needs norms at all (either norm factor is on).
  bool wants_norms() const { return clip_factor_ > 0 || refuse_factor_ > 0; }

  // The block's typical norm (0 while warming up), for tests.
  double TypicalNormForTest(uint32_t block) const;

 private:
  struct BlockNorms;
  struct WorkerRate {
    double count = 0;                         // decayed applied pushes
    absl::Time last = absl::InfinitePast();   // its newest push
    absl::Time since = absl::InfinitePast();  // when it last became active
  };

  // The block's state, null for an untracked id or worker; created on first
  // use.
  BlockNorms* Norms(uint32_t block, int32_t worker);
  void Recompute(BlockNorms* norms);
  // `worker`'s count decayed to `now`.
  double CountAt(const WorkerRate& rate, absl::Time now) const;
  // rate_factor * the active workers' median count + kRateSlack; +inf with
  // fewer than two active workers. Cached for a sixteenth of the window.
  double RateBound(absl::Time now, double* median);
  // The norm `worker`'s push to a block is refused beyond (times
  // refuse_factor): the upper median of the other counted workers' means of
  // all they pushed;
  // 0 (none) without another, or with just one when `worker` counts too.
  double RefuseRef(const BlockNorms& norms, int32_t worker) const;
  // Counts (`counter` and `per_worker` for `worker`) and logs one suspect push.
  void Suspect(int32_t worker, CounterStat Stats::*counter,
               WorkerCounterStat Stats::*per_worker, const std::string& what);

  const Options options_;
  const double clip_factor_;
  const double refuse_factor_;
  const double rate_factor_;
  const absl::Duration window_;
  std::vector<std::unique_ptr<BlockNorms>> blocks_;  // by block id
  std::vector<WorkerRate> rates_;                    // by worker id
  std::vector<double> scratch_;                      // medians; reused
  absl::Time bound_time_ = absl::InfinitePast();
  double bound_ = 0;
  double bound_median_ = 0;
  LogThrottle log_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PUSH_GUARD_H_

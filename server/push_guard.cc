#include "server/push_guard.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace downpour::server {
namespace {

// Norms below this (an all-zero block gradient) carry no vote: a bound from
// them would refuse the first real gradient.
constexpr double kMinNorm = 1e-12;

// The lower median of *values (reordered); REQUIRES: not empty.
double LowerMedian(std::vector<double>* values) {
  auto mid = values->begin() + (values->size() - 1) / 2;
  std::nth_element(values->begin(), mid, values->end());
  return *mid;
}

// One norm into a worker's moving average.
void Average(double norm, float* average) {
  *average += static_cast<float>(PushGuard::kNormWeight * (norm - *average));
}

LogThrottle::Options ThrottleOptions(Clock* clock) {
  LogThrottle::Options options;
  options.full_per_interval = 3;
  options.clock = clock;
  return options;
}

}  // namespace

struct PushGuard::BlockNorms {
  struct Slot {
    float mean = 0;      // moving average of the worker's applied norms
    float tried = 0;     // the same of all its norms, refused ones too
    uint32_t count = 0;  // its pushes recorded (saturating)
    uint32_t last = 0;   // `pushes` when it last pushed
    // Its `tried` as `counted` holds it; < 0 when it is not there.
    float counted_tried = -1;
  };
  std::vector<Slot> workers;
  uint32_t pushes = 0;  // recorded pushes to the block (wraps)
  uint32_t since_recompute = 0;
  // The `tried` of the workers that count, ascending, at the last Recompute.
  std::vector<float> counted;
  double clip_ref = 0;  // lower median of their `mean`; 0: warm-up
};

PushGuard::PushGuard(Options options)
    : options_(std::move(options)),
      clip_factor_(options_.robustness.norm_clip_factor),
      refuse_factor_(options_.robustness.norm_refuse_factor),
      rate_factor_(options_.robustness.rate_factor),
      window_(absl::Seconds(options_.robustness.rate_window_s)),
      blocks_(static_cast<size_t>(std::max<int64_t>(0, options_.num_blocks))),
      rates_(static_cast<size_t>(std::max(0, options_.num_workers))),
      log_(ThrottleOptions(options_.clock)) {
  scratch_.reserve(rates_.size());
}

PushGuard::~PushGuard() = default;

// --- Rates ------------------------------------------------------------------

double PushGuard::CountAt(const WorkerRate& rate, absl::Time now) const {
  if (rate.last == absl::InfinitePast()) return 0;
  const double age = absl::ToDoubleSeconds(now - rate.last);
  if (age <= 0) return rate.count;
  return rate.count * std::exp(-age / absl::ToDoubleSeconds(window_));
}

double PushGuard::RateBound(absl::Time now, double* median) {
  if (now - bound_time_ < window_ / 16 && now >= bound_time_) {
    *median = bound_median_;
    return bound_;
  }
  const double tau = absl::ToDoubleSeconds(window_);
  const absl::Time active_since = now - window_ / 4;
  scratch_.clear();
  for (const WorkerRate& rate : rates_) {
    if (rate.last < active_since) continue;
    // A worker active for less than the window has had less time to count
    // up: its count is scaled to what a full window would hold, so a worker
    // that just (re)started does not pull the median down (early on this
    // overestimates, which only loosens the bound).
    const double active =
        std::max(absl::ToDoubleSeconds(now - rate.since), 1e-3);
    scratch_.push_back(CountAt(rate, now) / (1 - std::exp(-active / tau)));
  }
  bound_time_ = now;
  bound_median_ = 0;
  bound_ = std::numeric_limits<double>::infinity();
  if (scratch_.size() >= 2) {
    bound_median_ = LowerMedian(&scratch_);
    bound_ = rate_factor_ * bound_median_ + kRateSlack;
  }
  *median = bound_median_;
  return bound_;
}

absl::Status PushGuard::CheckRate(int32_t worker, absl::Time now) {
  if (rate_factor_ <= 0 || worker < 0 ||
      worker >= static_cast<int32_t>(rates_.size())) {
    return absl::OkStatus();
  }
  const double count = CountAt(rates_[worker], now);
  double median = 0;
  const double bound = RateBound(now, &median);
  if (count + 1 <= bound) return absl::OkStatus();
  const std::string what = absl::StrFormat(
      "push: ps %d refuses worker %d's push: %.0f pushes in the last ~%s, "
      "over the bound %g x %.1f (the median worker's) + %g "
      "(robustness.rate_factor); retry later",
      options_.shard_index, worker, count, absl::FormatDuration(window_),
      rate_factor_, median, kRateSlack);
  Suspect(worker, &Stats::guard_refused_rate, &Stats::suspect_pushes, what);
  return absl::UnavailableError(what);
}

void PushGuard::RecordPush(int32_t worker, absl::Time now) {
  if (rate_factor_ <= 0 || worker < 0 ||
      worker >= static_cast<int32_t>(rates_.size())) {
    return;
  }
  WorkerRate& rate = rates_[worker];
  if (rate.last < now - window_ / 4) rate.since = now;  // (re)starts
  rate.count = CountAt(rate, now) + 1;
  rate.last = std::max(rate.last, now);
}

// --- Norms ------------------------------------------------------------------

PushGuard::BlockNorms* PushGuard::Norms(uint32_t block, int32_t worker) {
  if (block >= blocks_.size() || worker < 0 ||
      worker >= static_cast<int32_t>(rates_.size())) {
    return nullptr;
  }
  std::unique_ptr<BlockNorms>& norms = blocks_[block];
  if (norms == nullptr) {
    norms = std::make_unique<BlockNorms>();
    norms->workers.resize(rates_.size());
  }
  return norms.get();
}

void PushGuard::Recompute(BlockNorms* norms) {
  norms->since_recompute = 0;
  const uint32_t warmup =
      static_cast<uint32_t>(options_.robustness.warmup_pushes);
  std::vector<float>& counted = norms->counted;
  counted.clear();
  scratch_.clear();
  for (BlockNorms::Slot& slot : norms->workers) {
    slot.counted_tried = -1;
    if (slot.count < warmup || norms->pushes - slot.last > kForgetAfter) {
      continue;
    }
    slot.counted_tried = slot.tried;
    counted.push_back(slot.tried);
    scratch_.push_back(slot.mean);
  }
  std::sort(counted.begin(), counted.end());
  norms->clip_ref = scratch_.empty() ? 0 : LowerMedian(&scratch_);
}

double PushGuard::RefuseRef(const BlockNorms& norms, int32_t worker) const {
  const std::vector<float>& counted = norms.counted;
  const float own = norms.workers[worker].counted_tried;
  const size_t others = counted.size() - (own >= 0 ? 1 : 0);
  // One other worker is trusted over a newcomer only: of two established
  // workers neither can tell which one is wrong.
  if (others == 0 || (others == 1 && own >= 0)) return 0;
  // The upper median of the others' means.
  const size_t upper = others / 2;
  if (own >= 0 && own <= counted[upper]) return counted[upper + 1];
  return counted[upper];
}

absl::StatusOr<double> PushGuard::CheckNorm(uint32_t block, int32_t worker,
                                            double norm) {
  if (!wants_norms() || block >= blocks_.size() || blocks_[block] == nullptr ||
      worker < 0 || worker >= static_cast<int32_t>(rates_.size())) {
    return 0.0;
  }
  BlockNorms& norms = *blocks_[block];
  const double refuse_ref = refuse_factor_ > 0 ? RefuseRef(norms, worker) : 0;
  if (refuse_ref > 0 && norm > refuse_factor_ * refuse_ref) {
    // Raises the other workers' bounds, never its own (RefuseRef leaves it
    // out).
    if (std::isfinite(norm)) {
      BlockNorms::Slot& slot = norms.workers[worker];
      Average(std::min<double>(norm, FLT_MAX), &slot.tried);
      if (++norms.since_recompute >= kRecomputeEvery) Recompute(&norms);
    }
    const std::string what = absl::StrFormat(
        "push: block %u gradient norm %g of worker %d is beyond %g x %g, the "
        "norm typical of the other workers' pushes to this block "
        "(robustness.norm_refuse_factor); nothing was applied, and the "
        "worker goes on without this gradient",
        block, norm, worker, refuse_factor_, refuse_ref);
    Suspect(worker, &Stats::guard_refused_norm, &Stats::suspect_pushes, what);
    return absl::AbortedError(what);
  }
  if (clip_factor_ > 0 && norms.clip_ref > 0 &&
      norm > clip_factor_ * norms.clip_ref) {
    const double bound = clip_factor_ * norms.clip_ref;
    Suspect(worker, &Stats::guard_clipped_blocks, &Stats::clipped_blocks,
            absl::StrFormat("push: block %u gradient norm %g of worker %d "
                            "clipped to %g x %g (robustness.norm_clip_factor)",
                            block, norm, worker, clip_factor_, norms.clip_ref));
    return bound;
  }
  return 0.0;
}

void PushGuard::RecordNorm(uint32_t block, int32_t worker, double norm) {
  if (!wants_norms() || !(norm >= kMinNorm) || !std::isfinite(norm)) return;
  BlockNorms* norms = Norms(block, worker);
  if (norms == nullptr) return;
  BlockNorms::Slot& slot = norms->workers[worker];
  if (slot.count == 0 || norms->pushes - slot.last > kForgetAfter) {
    slot.mean = static_cast<float>(norm);
    slot.tried = slot.mean;
    slot.count = 0;
  } else {
    Average(norm, &slot.mean);
    Average(norm, &slot.tried);
  }
  if (slot.count < std::numeric_limits<uint32_t>::max()) ++slot.count;
  slot.last = norms->pushes++;
  const bool ready =
      slot.count == static_cast<uint32_t>(options_.robustness.warmup_pushes);
  if (++norms->since_recompute >= kRecomputeEvery || ready) Recompute(norms);
}

double PushGuard::TypicalNormForTest(uint32_t block) const {
  if (block >= blocks_.size() || blocks_[block] == nullptr) return 0;
  return blocks_[block]->clip_ref;
}

void PushGuard::Suspect(int32_t worker, CounterStat Stats::*counter,
                        WorkerCounterStat Stats::*per_worker,
                        const std::string& what) {
  if (options_.counters != nullptr) {
    Stats& stats = options_.counters->stats();
    (stats.*counter).Increment();
    (stats.*per_worker).Increment(worker);
  }
  log_.Log(Log(Logger::kServer), spdlog::level::warn,
           absl::StrCat("ps ", options_.shard_index, ": worker ", worker,
                        "'s pushes stand out"),
           what);
}

}  // namespace downpour::server

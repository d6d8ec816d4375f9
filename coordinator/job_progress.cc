// Whether the job is over, and why.
#include "coordinator/job_progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

// A worker's last test figure of `metric` (NaN when it reported none).
// Reports from workers that predate metrics carry only accuracy.
double TestValue(const proto::MemberReport& report, const std::string& metric) {
  const auto it = report.metrics().find(metric);
  return it != report.metrics().end() ? it->second
         : metric == "accuracy"       ? report.accuracy()
                                      : NAN;
}

}  // namespace

JobProgress::JobProgress(const Config& config, Clock* clock, absl::Time start)
    : target_(TargetOf(config)), clock_(clock), start_(start) {}

uint64_t JobProgress::StartClock(const std::vector<Member>& workers,
                                 int joining) {
  uint64_t start_clock = 0;
  bool found = false;
  for (const Member& w : workers) {
    if (w.index == joining || !w.alive || w.report.finished()) continue;
    if (!found || w.report.clock() < start_clock)
      start_clock = w.report.clock();
    found = true;
  }
  return start_clock;
}

bool JobProgress::PushesApplied(const Membership& members, const Member& w) {
  auto holds = [&](const Member& m) {
    if (!m.alive) return false;
    for (const proto::WorkerIncarnation& i : m.report.applied_from()) {
      if (i.worker() == w.index && i.incarnation() == w.incarnation) {
        return true;
      }
    }
    return false;
  };
  return std::any_of(members.ps().begin(), members.ps().end(), holds) ||
         std::any_of(members.standby().begin(), members.standby().end(), holds);
}

JobProgress::Scan JobProgress::ScanWorkers(const Membership& members,
                                           const DataPartTable& parts) {
  Scan scan;
  for (const Member& w : members.workers()) {
    const double value = TestValue(w.report, target_.metric);
    if (w.registered && w.alive && !w.report.finished()) ++scan.evaluating;
    if (target_reached_s_ < 0 && w.registered &&
        ReachedTarget(target_.metric, value, target_.value) &&
        PushesApplied(members, w)) {
      target_reached_s_ = absl::ToDoubleSeconds(clock_->Now() - start_);
      target_reached_by_ = w.index;
      target_reached_value_ = value;
    }
    // Claims of the target that count: the worker's last evaluation meets it
    // and a ps holds pushes of this process (it trained in this job).
    const bool claims_target =
        target_.stop && w.registered &&
        ReachedTarget(target_.metric, value, target_.value) &&
        PushesApplied(members, w);
    if (!claims_target) {
      first_claim_.erase(w.index);
    } else {
      scan.claims.push_back(&w);
      // The evaluation that first claimed it, per incarnation.
      auto [claim, fresh] = first_claim_.try_emplace(
          w.index, Claim{w.incarnation, w.report.evaluations()});
      if (!fresh && claim->second.incarnation != w.incarnation) {
        claim->second = Claim{w.incarnation, w.report.evaluations()};
      }
    }
    scan.any_finished = scan.any_finished || w.report.finished();
    // A dead worker whose parts went to others no longer holds the job up.
    const bool done =
        w.report.finished() || (!w.alive && parts.parts(w.index).empty());
    scan.all_done = scan.all_done && w.registered && done;
  }
  return scan;
}

void JobProgress::Confirm(const Scan& scan) {
  // One claim alone never ends the job: a second evaluation confirms it,
  // another worker's while another still evaluates, else the claimant's own
  // next one.
  const Member* confirmed = nullptr;
  const Member* by = nullptr;
  if (scan.claims.size() >= 2) {
    confirmed = scan.claims[0];
    by = scan.claims[1];
  } else if (scan.claims.size() == 1) {
    const Member& w = *scan.claims[0];
    const bool others_evaluate =
        scan.evaluating - (w.alive && !w.report.finished() ? 1 : 0) > 0;
    if (!others_evaluate &&
        w.report.evaluations() > first_claim_[w.index].evaluations) {
      confirmed = by = &w;
    }
  }
  if (confirmed == nullptr) return;
  const double value = TestValue(confirmed->report, target_.metric);
  stop_ = true;
  stop_reason_ = absl::StrFormat(
      "worker %d reached test %s %.4f %s target %.4f at step %d",
      confirmed->index, target_.metric, value,
      HigherIsBetter(target_.metric) ? ">=" : "<=", target_.value,
      confirmed->report.step());
  stop_reason_ += by == confirmed
                      ? " (confirmed by its next evaluation)"
                      : absl::StrFormat(" (confirmed by worker %d)", by->index);
}

bool JobProgress::MaybeStop(const Membership& members,
                            const DataPartTable& parts) {
  if (stop_) return false;
  const Scan scan = ScanWorkers(members, parts);
  Confirm(scan);
  if (!stop_ && scan.any_finished && scan.all_done) {
    stop_ = true;
    stop_reason_ = "every worker finished its steps";
  }
  if (stop_) SPDLOG_LOGGER_INFO(L(), "job done: {}", stop_reason_);
  return stop_;
}

void JobProgress::AddTo(proto::HeartbeatResponse* response) const {
  response->set_stop(stop_);
  response->set_stop_reason(stop_reason_);
}

void JobProgress::AddStatus(proto::ClusterStatusResponse* response) const {
  response->set_stop(stop_);
  response->set_stop_reason(stop_reason_);
  response->set_target_reached_seconds(target_reached_s_);
  response->set_target_reached_by(target_reached_by_);
  response->set_target_reached_value(target_reached_value_);
}

void JobProgress::SaveTo(proto::CoordinatorState* state) const {
  state->set_stop(stop_);
  state->set_stop_reason(stop_reason_);
}

void JobProgress::Restore(const proto::CoordinatorState& state) {
  stop_ = state.stop();
  stop_reason_ = state.stop_reason();
}

}  // namespace downpour::coordinator

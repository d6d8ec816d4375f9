// PushAdmission: worker identity, incarnations and exactly-once windows.
#include "server/push_admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/push_key.h"
#include "common/push_sequence.h"

namespace downpour::server {

PushAdmission::PushAdmission(const Options& options,
                             std::map<int32_t, SequenceWindow> windows)
    : options_(options), windows_(std::move(windows)) {}

void PushAdmission::LearnWorkerIncarnations(
    const std::vector<IssuedIncarnation>& incarnations) {
  incarnations_known_ = true;
  for (const IssuedIncarnation& i : incarnations) {
    if (i.worker < 0 || i.worker >= options_.num_workers ||
        i.incarnation == 0) {
      continue;
    }
    std::vector<Issued>& issued = incarnations_[i.worker];
    auto at = std::lower_bound(
        issued.begin(), issued.end(), i.incarnation,
        [](const Issued& a, uint64_t b) { return a.incarnation < b; });
    // The key learned first stays: the coordinator never changes one.
    if (at != issued.end() && at->incarnation == i.incarnation) continue;
    issued.insert(at, Issued{i.incarnation, i.push_key_digest});
    if (issued.size() > kIncarnationsKept) issued.erase(issued.begin());
  }
}

absl::StatusOr<PushAdmission::Verdict> PushAdmission::Admit(
    int32_t worker, uint64_t sequence, uint64_t push_key) const {
  if (absl::Status identity = CheckIdentity(worker, sequence, push_key);
      !identity.ok()) {
    return identity;
  }
  if (sequence == 0) return Verdict::kNew;  // untracked
  switch (WindowVerdict(worker, sequence)) {
    case SequenceWindow::Verdict::kNew:
      return Verdict::kNew;
    case SequenceWindow::Verdict::kDuplicate:
      return Verdict::kDuplicate;
    case SequenceWindow::Verdict::kStale:
      break;
  }
  // The message names no other incarnation: the caller may not be the
  // worker, and the current one is what a forged push would need.
  return absl::OutOfRangeError(absl::StrCat(
      "push: worker ", worker, " incarnation ", IncarnationOf(sequence),
      " was replaced: a newer incarnation of that worker has pushed since; "
      "stop this process"));
}

absl::Status PushAdmission::CheckIdentity(int32_t worker, uint64_t sequence,
                                          uint64_t push_key) const {
  const int workers = options_.num_workers;
  if (worker < 0 || worker >= workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: worker_id ", worker, " is not a configured worker (", workers,
        " worker slots in cluster.workers and cluster.max_workers: 0 to ",
        static_cast<int64_t>(workers) - 1, ")"));
  }
  if (sequence == 0) {
    if (!incarnations_known_) return absl::OkStatus();  // untracked
    // Untracked pushes pass no window: in a coordinated job they would let
    // anyone with the worker's id push without exactly-once or bounds.
    return absl::InvalidArgumentError(absl::StrCat(
        "push: worker ", worker,
        " sent sequence 0 (untracked): this ps serves a coordinated job, "
        "where every push carries its worker's sequence and push key "
        "(untracked pushes are for a ps without a coordinator: tests and "
        "benchmarks)"));
  }
  const uint64_t incarnation = IncarnationOf(sequence);
  const uint64_t n = CountOf(sequence);
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: worker ", worker, " sequence ", sequence,
        " has n = 0; sequences are (incarnation << 32) | n with n from 1"));
  }
  if (incarnations_known_) {
    if (absl::Status s = CheckIncarnation(worker, incarnation, push_key);
        !s.ok()) {
      return s;
    }
  }
  // The newest push of this incarnation applied here (0: none).
  uint64_t base_n = 0;
  auto window = windows_.find(worker);
  if (window != windows_.end() &&
      IncarnationOf(window->second.base()) == incarnation) {
    base_n = CountOf(window->second.base()) + window->second.newest_offset();
  }
  auto anchor = anchored_.find(worker);
  const bool anchored =
      anchor != anchored_.end() && anchor->second == incarnation;
  const uint64_t max_jump = anchored ? kMaxAnchoredJump : kMaxSequenceJump;
  if (n > base_n + max_jump) {
    // Names neither n nor how far it lies past the window: the distance
    // would tell the caller the worker's last applied sequence.
    return absl::InvalidArgumentError(absl::StrCat(
        "push: worker ", worker,
        "'s sequence lies too far past its last applied push (more than ",
        max_jump,
        anchored ? ", further than its pushes in flight ever lie" : "",
        "): refused, nothing recorded"));
  }
  return absl::OkStatus();
}

absl::Status PushAdmission::CheckIncarnation(int32_t worker,
                                             uint64_t incarnation,
                                             uint64_t push_key) const {
  auto it = incarnations_.find(worker);
  const std::vector<Issued> none;
  const std::vector<Issued>& issued =
      it == incarnations_.end() ? none : it->second;
  auto at = std::lower_bound(
      issued.begin(), issued.end(), incarnation,
      [](const Issued& a, uint64_t b) { return a.incarnation < b; });
  if (at != issued.end() && at->incarnation == incarnation) {
    if (at->push_key_digest == 0 ||
        PushKeyMatches(worker, incarnation, push_key, at->push_key_digest)) {
      return absl::OkStatus();
    }
    return absl::PermissionDeniedError(absl::StrCat(
        "push: worker ", worker,
        "'s push key does not match the one the coordinator issued with its "
        "registration (",
        push_key == 0 ? "none sent" : "a different one",
        "): refused, nothing recorded. Pushes come only from the registered "
        "worker process"));
  }
  // Incarnations come from one counter on the coordinator: one far beyond
  // every incarnation this ps has heard of was never issued (a forged 2^32-1
  // would otherwise be retried forever).
  uint64_t newest = 0;
  for (const auto& [w, known] : incarnations_) {
    if (!known.empty()) newest = std::max(newest, known.back().incarnation);
  }
  if (incarnation > newest + kIncarnationSlack) {
    return absl::InvalidArgumentError(
        absl::StrCat("push: worker ", worker, " incarnation ", incarnation,
                     " was never issued: refused, nothing recorded"));
  }
  if (issued.empty() || incarnation > issued.back().incarnation) {
    return absl::UnavailableError(absl::StrCat(
        "push: ps ", options_.shard_index, " has not heard of worker ", worker,
        "'s incarnation ", incarnation,
        " from the coordinator yet: retry after its next heartbeat"));
  }
  return absl::OutOfRangeError(absl::StrCat(
      "push: incarnation ", incarnation, " was not issued to worker ", worker,
      " or was replaced by a newer one (not named: only that worker's "
      "registration reply carries it); stop this process"));
}

bool PushAdmission::WithinWindow(int32_t worker, uint64_t sequence) const {
  if (sequence == 0) return false;
  const uint64_t incarnation = IncarnationOf(sequence);
  // A newer incarnation (or a first push) starts a fresh window.
  uint64_t base = MakeSequence(incarnation, 0);
  auto it = windows_.find(worker);
  if (it != windows_.end()) {
    const uint64_t held = IncarnationOf(it->second.base());
    if (held > incarnation) return false;
    if (held == incarnation) base = it->second.base();
  }
  return sequence > base && sequence - base <= SequenceWindow::kWidth;
}

SequenceWindow::Verdict PushAdmission::WindowVerdict(int32_t worker,
                                                     uint64_t sequence) const {
  auto it = windows_.find(worker);
  // No window yet: nothing of this worker applied, so any sequence is new.
  if (it == windows_.end()) return SequenceWindow::Verdict::kNew;
  return it->second.Check(sequence);
}

void PushAdmission::MarkApplied(int32_t worker, uint64_t sequence) {
  anchored_[worker] = IncarnationOf(sequence);
  const uint64_t skipped = windows_[worker].MarkApplied(sequence);
  if (skipped == 0) return;
  if (options_.counters != nullptr) {
    options_.counters->stats().sequence_window_skips.Increment(
        static_cast<double>(skipped));
  }
  SPDLOG_LOGGER_WARN(Log(Logger::kServer),
                     "ps {}: worker {}'s push {} lies past its window: {} "
                     "earlier sequences never arrived and are now refused "
                     "as duplicates (this shard restarted from an older "
                     "checkpoint?)",
                     options_.shard_index, worker, CountOf(sequence), skipped);
}

uint64_t PushAdmission::Holes() const {
  uint64_t holes = 0;
  for (const auto& [worker, window] : windows_) holes += window.holes();
  return holes;
}

std::vector<IssuedIncarnation> PushAdmission::AppliedFrom() const {
  std::vector<IssuedIncarnation> from;
  for (const auto& [worker, window] : windows_) {
    if (CountOf(window.base()) == 0 && window.mask() == 0) continue;
    from.push_back({worker, IncarnationOf(window.base())});
  }
  return from;
}

bool PushAdmission::IsNew(int32_t worker, uint64_t sequence) const {
  return WindowVerdict(worker, sequence) == SequenceWindow::Verdict::kNew;
}

bool PushAdmission::Applied(int32_t worker, uint64_t sequence) const {
  return WindowVerdict(worker, sequence) == SequenceWindow::Verdict::kDuplicate;
}

}  // namespace downpour::server

// PushAdmission: worker identity, incarnations and exactly-once windows.
#include "server/push_admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/push_sequence.h"

namespace downpour::server {

PushAdmission::PushAdmission(const Options& options,
                             std::map<int32_t, SequenceWindow> windows)
    : options_(options), windows_(std::move(windows)) {}

void PushAdmission::LearnWorkerIncarnations(
    const std::vector<std::pair<int32_t, uint64_t>>& incarnations) {
  incarnations_known_ = true;
  for (const auto& [worker, incarnation] : incarnations) {
    if (worker < 0 || worker >= options_.num_workers || incarnation == 0) {
      continue;
    }
    std::vector<uint64_t>& issued = incarnations_[worker];
    auto at = std::lower_bound(issued.begin(), issued.end(), incarnation);
    if (at != issued.end() && *at == incarnation) continue;
    issued.insert(at, incarnation);
    if (issued.size() > kIncarnationsKept) issued.erase(issued.begin());
  }
}

absl::StatusOr<PushAdmission::Verdict> PushAdmission::Admit(
    int32_t worker, uint64_t sequence) const {
  if (absl::Status identity = CheckIdentity(worker, sequence); !identity.ok()) {
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

absl::Status PushAdmission::CheckIdentity(int32_t worker,
                                          uint64_t sequence) const {
  const int workers = options_.num_workers;
  if (worker < 0 || worker >= workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: worker_id ", worker, " is not a configured worker (", workers,
        " in cluster.workers: 0 to ", static_cast<int64_t>(workers) - 1, ")"));
  }
  if (sequence == 0) return absl::OkStatus();  // untracked
  const uint64_t incarnation = IncarnationOf(sequence);
  const uint64_t n = CountOf(sequence);
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: worker ", worker, " sequence ", sequence,
        " has n = 0; sequences are (incarnation << 32) | n with n from 1"));
  }
  if (incarnations_known_) {
    if (absl::Status s = CheckIncarnation(worker, incarnation); !s.ok()) {
      return s;
    }
  }
  uint64_t base_n = 0;
  auto window = windows_.find(worker);
  if (window != windows_.end() &&
      IncarnationOf(window->second.base()) == incarnation) {
    base_n = CountOf(window->second.base());
  }
  if (n > base_n + kMaxSequenceJump) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: worker ", worker, " sequence n = ", n, " of incarnation ",
        incarnation, " lies ", n - base_n,
        " past its last applied push, more than ", kMaxSequenceJump,
        ": refused, nothing recorded"));
  }
  return absl::OkStatus();
}

absl::Status PushAdmission::CheckIncarnation(int32_t worker,
                                             uint64_t incarnation) const {
  auto it = incarnations_.find(worker);
  const std::vector<uint64_t> none;
  const std::vector<uint64_t>& issued =
      it == incarnations_.end() ? none : it->second;
  if (std::binary_search(issued.begin(), issued.end(), incarnation)) {
    return absl::OkStatus();
  }
  // Incarnations come from one counter on the coordinator: one far beyond
  // every incarnation this ps has heard of was never issued (a forged 2^32-1
  // would otherwise be retried forever).
  uint64_t newest = 0;
  for (const auto& [w, known] : incarnations_) {
    if (!known.empty()) newest = std::max(newest, known.back());
  }
  if (incarnation > newest + kIncarnationSlack) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: worker ", worker, " incarnation ", incarnation,
        " was never issued (the coordinator's newest this ps knows is ",
        newest, "): refused, nothing recorded"));
  }
  if (issued.empty() || incarnation > issued.back()) {
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

SequenceWindow::Verdict PushAdmission::WindowVerdict(int32_t worker,
                                                     uint64_t sequence) const {
  auto it = windows_.find(worker);
  // No window yet: nothing of this worker applied, so any sequence is new.
  if (it == windows_.end()) return SequenceWindow::Verdict::kNew;
  return it->second.Check(sequence);
}

void PushAdmission::MarkApplied(int32_t worker, uint64_t sequence) {
  const uint64_t skipped = windows_[worker].MarkApplied(sequence);
  if (skipped == 0) return;
  if (options_.counters != nullptr) {
    options_.counters->Add("sequence_window_skips",
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

bool PushAdmission::IsNew(int32_t worker, uint64_t sequence) const {
  return WindowVerdict(worker, sequence) == SequenceWindow::Verdict::kNew;
}

bool PushAdmission::Applied(int32_t worker, uint64_t sequence) const {
  return WindowVerdict(worker, sequence) ==
         SequenceWindow::Verdict::kDuplicate;
}

}  // namespace downpour::server

#include "worker/sparse_step_pipeline.h"

#include <utility>

#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace downpour::worker {

StepPrefetcher::StepPrefetcher(bool background, Prepare prepare)
    : prepare_(std::move(prepare)) {
  if (!background) return;
  {
    absl::MutexLock lock(&mu_);
    want_ = true;
  }
  thread_ = std::thread([this] { Loop(); });
}

StepPrefetcher::~StepPrefetcher() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void StepPrefetcher::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](StepPrefetcher* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->want_ || p->quit_;
          },
          this));
      if (quit_) return;
      want_ = false;
      busy_ = true;
    }
    absl::StatusOr<bool> result = prepare_(&next_);
    absl::MutexLock lock(&mu_);
    busy_ = false;
    ready_ = true;
    result_ = std::move(result);
    // After the last batch or an error nothing more is prepared.
    if (!result_.ok() || !*result_) return;
  }
}

absl::StatusOr<bool> StepPrefetcher::Take(SparseStepInput* input,
                                          absl::Duration* waited) {
  const absl::Time start = absl::Now();
  if (!thread_.joinable()) {
    absl::StatusOr<bool> more = prepare_(input);
    *waited = absl::Now() - start;
    return more;
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&ready_));
  *waited = absl::Now() - start;
  // The last batch or an error stays the answer (ready_ stays true).
  if (!result_.ok() || !*result_) return result_;
  ready_ = false;
  std::swap(*input, next_);
  want_ = true;
  return true;
}

StepPusher::StepPusher(bool background, int max_in_flight, Send send, Done done)
    : background_(background),
      max_in_flight_(max_in_flight),
      send_(std::move(send)),
      done_(std::move(done)) {
  if (!background_) return;
  for (int i = 0; i < max_in_flight_; ++i) {
    threads_.emplace_back([this] { Loop(); });
  }
}

StepPusher::~StepPusher() {
  Drain().IgnoreError();
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

absl::StatusOr<SparseStepPush*> StepPusher::Acquire() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(error_);
  if (free_.empty()) {
    all_.push_back(std::make_unique<SparseStepPush>());
    free_.push_back(all_.back().get());
  }
  SparseStepPush* push = free_.back();
  free_.pop_back();
  return push;
}

absl::Status StepPusher::Start(SparseStepPush* push, absl::Duration* waited) {
  const absl::Time start = absl::Now();
  if (!background_) {
    absl::Status status = SendOne(push);
    *waited = absl::Now() - start;
    absl::MutexLock lock(&mu_);
    free_.push_back(push);
    return status;
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](StepPusher* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
        return p->in_flight_ < p->max_in_flight_ || !p->error_.ok();
      },
      this));
  *waited = absl::Now() - start;
  if (!error_.ok()) {
    free_.push_back(push);
    return error_;
  }
  ++in_flight_;
  queued_.push_back(push);
  return absl::OkStatus();
}

absl::Status StepPusher::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](StepPusher* p)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->in_flight_ == 0; },
      this));
  return error_;
}

absl::Status StepPusher::SendOne(SparseStepPush* push) {
  PushReport report;
  absl::Status status = send_(push, &report);
  if (status.ok()) done_(*push, report);
  return status;
}

void StepPusher::Loop() {
  while (true) {
    SparseStepPush* push;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](StepPusher* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return !p->queued_.empty() || p->quit_;
          },
          this));
      if (queued_.empty()) return;  // quit_
      push = queued_.front();
      queued_.pop_front();
      // After an error nothing more is sent: a later push of the same
      // worker would land past a gap the ps refuses anyway.
      if (!error_.ok()) {
        --in_flight_;
        free_.push_back(push);
        continue;
      }
    }
    absl::Status status = SendOne(push);
    absl::MutexLock lock(&mu_);
    if (!status.ok() && error_.ok()) error_ = std::move(status);
    --in_flight_;
    free_.push_back(push);
  }
}

}  // namespace downpour::worker

// Pushes in flight: a map of the pushes begun and not yet waited for, and a
// thread per push sent at once.
#include "worker/push_pipeline.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace downpour::worker {

PushPipeline::PushPipeline(int max_in_flight, Send send)
    : max_in_flight_(max_in_flight), send_(std::move(send)) {}

PushPipeline::~PushPipeline() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* in_flight) { return *in_flight == 0; }, &in_flight_));
    stopping_ = true;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

absl::StatusOr<PushTicket> PushPipeline::Start(std::vector<float> grad,
                                               std::vector<uint64_t> versions) {
  absl::MutexLock lock(&mu_);
  // Backpressure. A failure the caller has not seen ends the wait too: the
  // caller learns it here instead of sending another push behind it.
  mu_.Await(absl::Condition(
      +[](PushPipeline* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return self->in_flight_ < self->max_in_flight_ ||
               self->unseen_failures_ > 0;
      },
      this));
  if (unseen_failures_ > 0) {
    for (const auto& [ticket, push] : pushes_) {
      if (push.done && !push.status.ok()) return push.status;
    }
  }
  ++in_flight_;
  const PushTicket ticket = ++last_ticket_;
  Push& push = pushes_[ticket];
  push.grad = std::move(grad);
  push.versions = std::move(versions);
  // A thread for every push not yet taken; at most max_in_flight_ in all.
  if (idle_threads_ < static_cast<int>(last_ticket_ - sent_)) {
    threads_.emplace_back([this] { SendThread(); });
    ++idle_threads_;
  }
  return ticket;
}

void PushPipeline::SendThread() {
  for (;;) {
    Push* push = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PushPipeline* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->sent_ < self->last_ticket_ || self->stopping_;
          },
          this));
      if (sent_ == last_ticket_) return;  // stopping
      push = &pushes_[++sent_];  // stays put (std::map) until waited for
      --idle_threads_;
    }
    // Only this thread touches *push until it is marked done.
    absl::Status status =
        send_(push->grad.data(), push->versions, &push->report);
    absl::MutexLock lock(&mu_);
    push->status = std::move(status);
    push->done = true;
    if (!push->status.ok()) ++unseen_failures_;
    --in_flight_;
    ++idle_threads_;
  }
}

absl::Status PushPipeline::Wait(PushTicket ticket, PushReport* report,
                                std::vector<float>* grad) {
  struct Args {
    PushPipeline* self;
    PushTicket ticket;
  } args{this, ticket};
  Push push;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          auto it = a->self->pushes_.find(a->ticket);
          return it == a->self->pushes_.end() || it->second.done;
        },
        &args));
    auto it = pushes_.find(ticket);
    if (it == pushes_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push ticket ", ticket, " is unknown or was waited for already"));
    }
    push = std::move(it->second);
    pushes_.erase(it);
    if (!push.status.ok()) --unseen_failures_;
  }
  if (push.status.ok() && report != nullptr) report->Merge(push.report);
  if (grad != nullptr) *grad = std::move(push.grad);
  return push.status;
}

bool PushPipeline::Done(PushTicket ticket) const {
  absl::MutexLock lock(&mu_);
  auto it = pushes_.find(ticket);
  return it != pushes_.end() && it->second.done;
}

absl::Status PushPipeline::Run(const float* grad,
                               const std::vector<uint64_t>& versions,
                               PushReport* report) {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](PushPipeline* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return self->in_flight_ < self->max_in_flight_;
        },
        this));
    ++in_flight_;
  }
  absl::Status status = send_(grad, versions, report);
  absl::MutexLock lock(&mu_);
  --in_flight_;
  return status;
}

int PushPipeline::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace downpour::worker

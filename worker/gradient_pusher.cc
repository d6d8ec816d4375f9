// GradientPusher: sum, StartPush, Wait; buffers recycled between pushes.
#include "worker/gradient_pusher.h"

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace downpour::worker {

GradientPusher::GradientPusher(PsClient* client, StepBuffers* buffers,
                               LoopStats* stats, FirstError* error)
    : client_(client), buffers_(buffers), stats_(stats), error_(error) {}

void GradientPusher::Start() { accum_.assign(buffers_->params.size(), 0.0f); }

void GradientPusher::Add() {
  std::vector<float>& grad = buffers_->grad;
  if (accum_steps_ == 0) {
    // The first step of a push: its gradient becomes the sum (no pass).
    accum_versions_ = buffers_->versions;
    std::swap(accum_, grad);
  } else {
    for (size_t i = 0; i < accum_.size(); ++i) accum_[i] += grad[i];
  }
  ++accum_steps_;
}

void GradientPusher::Collect(bool all) {
  while (!pushes_.empty() &&
         (all || client_->PushDone(pushes_.front().ticket))) {
    const PushInFlight push = pushes_.front();
    pushes_.pop_front();
    PushReport report;
    std::vector<float> buffer;
    const absl::Status status = client_->Wait(push.ticket, &report, &buffer);
    if (!buffer.empty()) spare_.push_back(std::move(buffer));
    if (!status.ok()) {
      error_->Set(status);
      continue;
    }
    stats_->CountPushed(report, push.steps, /*pulled=*/false);
  }
}

bool GradientPusher::HandOff() {
  const absl::Time begin = absl::Now();
  // Backpressure: with the pipeline full, StartPush waits for an ack rather
  // than the loop summing more steps into a later push.
  absl::StatusOr<PushTicket> ticket =
      client_->StartPush(std::move(accum_), accum_versions_);
  if (ticket.ok()) {
    pushes_.push_back({*ticket, accum_steps_});
  } else {
    error_->Set(ticket.status());
  }
  accum_steps_ = 0;
  Collect(/*all=*/false);  // the push that made room, and its buffer
  stats_->AddWaitPush(absl::Now() - begin);
  // A buffer for the next push (the next step's gradient is swapped into
  // it, so its values do not matter).
  if (spare_.empty()) {
    accum_.resize(
        buffers_->params.size());  // only until max_pushes_in_flight + 1
  } else {
    accum_ = std::move(spare_.back());
    spare_.pop_back();
  }
  return error_->get().ok();
}

void GradientPusher::Flush() {
  if (accum_steps_ > 0 && error_->get().ok()) HandOff();
  const absl::Time begin = absl::Now();
  Collect(/*all=*/true);
  stats_->AddWaitPush(absl::Now() - begin);
}

}  // namespace downpour::worker

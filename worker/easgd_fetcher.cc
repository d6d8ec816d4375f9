// EasgdFetcher: local steps with the optimizer's rule, and the elastic
// exchange with the center every easgd_tau steps.
#include "worker/easgd_fetcher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/lr_schedule.h"

namespace downpour::worker {

double EasgdAlpha(const TrainingSection& training, int num_workers) {
  if (training.easgd_alpha > 0) return training.easgd_alpha;
  return 0.9 / (num_workers > 0 ? num_workers : 1);
}

EasgdFetcher::EasgdFetcher(const FetchContext& context)
    : Fetcher(context),
      alpha_(EasgdAlpha(context.training, context.num_workers)) {
  absl::StatusOr<std::unique_ptr<server::Optimizer>> rule =
      server::Optimizer::Create(context.optimizer);
  if (rule.ok()) {
    rule_ = *std::move(rule);
  } else {
    error_.Set(absl::InvalidArgumentError(
        absl::StrCat("training.mode easgd: the worker's local rule: ",
                     rule.status().message())));
  }
}

void EasgdFetcher::Start() {
  const size_t n = ctx_.buffers->params.size();
  if (rule_ != nullptr) state_.assign(rule_->state_slots() * n, 0.0f);
  // The run's first pull: x starts at the center.
  center_ = ctx_.buffers->params;
  center_versions_ = ctx_.buffers->versions;
  push_.assign(n, 0.0f);
}

void EasgdFetcher::TakeGradient() {
  if (rule_ == nullptr) return;
  StepBuffers& b = *ctx_.buffers;
  server::ApplyContext context;
  context.t = static_cast<uint64_t>(local_steps_) + 1;
  context.lr_scale = server::LrScale(ctx_.optimizer, local_steps_);
  rule_->Apply(b.params.data(), b.grad.data(), state_.data(),
               static_cast<int64_t>(b.params.size()), context);
  ctx_.backend->ParamsChanged();
  ++local_steps_;
  ++unsent_steps_;
}

bool EasgdFetcher::PullCenter() {
  const absl::Time begin = absl::Now();
  const absl::Status status =
      ctx_.client->Pull(center_.data(), &center_versions_);
  ctx_.stats->AddWaitPull(absl::Now() - begin);
  if (!status.ok()) {
    error_.Set(status);
    return false;
  }
  return true;
}

bool EasgdFetcher::Exchange() {
  if (!PullCenter()) return false;
  std::vector<float>& x = ctx_.buffers->params;
  const float alpha = static_cast<float>(alpha_);
  for (size_t i = 0; i < x.size(); ++i) {
    const float d = alpha * (x[i] - center_[i]);
    x[i] -= d;
    push_[i] = -d;  // the ps's sgd at lr 1: c -= -d
  }
  ctx_.backend->ParamsChanged();
  const absl::Time begin = absl::Now();
  PushReport report;
  const absl::Status status =
      ctx_.client->Push(push_.data(), center_versions_, &report);
  ctx_.stats->AddWaitPush(absl::Now() - begin);
  if (!status.ok()) {
    error_.Set(status);
    return false;
  }
  // The exchange carried the local steps' work to the center.
  ctx_.stats->CountPushed(report, unsent_steps_, /*pulled=*/true);
  unsent_steps_ = 0;
  return true;
}

absl::Status EasgdFetcher::AwaitParams(int64_t step) {
  PullCenter();
  return error();
}

absl::Status EasgdFetcher::AfterStep(int64_t step, int64_t total) {
  if ((step + 1) % ctx_.training.easgd_tau == 0) Exchange();
  return error();
}

absl::Status EasgdFetcher::Flush() {
  if (unsent_steps_ > 0 && error().ok()) Exchange();
  return error();
}

}  // namespace downpour::worker

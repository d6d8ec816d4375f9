// AfterPushFetcher: the pull waits for the pushes, on the compute thread.
#include "worker/fetcher_after_push.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace downpour::worker {

AfterPushFetcher::AfterPushFetcher(const FetchContext& context)
    : Fetcher(context),
      pusher_(context.client, context.buffers, context.stats, &error_) {}

void AfterPushFetcher::Start() { pusher_.Start(); }

absl::Status AfterPushFetcher::BeforeStep(int64_t step) {
  pusher_.Collect(/*all=*/false);  // acks counted, failures seen
  return error();
}

void AfterPushFetcher::TakeGradient() { pusher_.Add(); }

absl::Status AfterPushFetcher::AfterStep(int64_t step, int64_t total) {
  const TrainingSection& t = ctx_.training;
  // The last step needs no pull: Run pulls the final parameters after the
  // flush.
  const bool pull = (step + 1) % t.n_fetch == 0 && step + 1 < total;
  if (((step + 1) % t.n_push == 0 && !pusher_.HandOff()) ||
      (pull && !SyncAfterPush())) {
    return error();
  }
  return absl::OkStatus();
}

bool AfterPushFetcher::SyncAfterPush() {
  const absl::Time begin = absl::Now();
  pusher_.Collect(/*all=*/true);
  if (!error().ok()) return false;
  const absl::Time pulled = absl::Now();
  ctx_.stats->AddWaitPush(pulled - begin);
  StepBuffers& b = *ctx_.buffers;
  const absl::Status status = ctx_.client->Pull(b.params.data(), &b.versions);
  ctx_.backend->ParamsChanged();
  ctx_.stats->AddWaitPull(absl::Now() - pulled);
  if (!status.ok()) {
    error_.Set(status);
    return false;
  }
  ctx_.stats->CountPull();
  return true;
}

absl::Status AfterPushFetcher::Flush() {
  pusher_.Flush();
  return error();
}

}  // namespace downpour::worker

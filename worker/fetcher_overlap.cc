// OverlapFetcher: the fetch thread pulls into the back buffer while the
// compute thread computes on the front one.
#include "worker/fetcher_overlap.h"

#include <utility>

namespace downpour::worker {

OverlapFetcher::OverlapFetcher(const FetchContext& context)
    : Fetcher(context),
      pusher_(context.client, context.buffers, context.stats, &error_) {}

OverlapFetcher::~OverlapFetcher() { StopThread(); }

void OverlapFetcher::Start() {
  pusher_.Start();
  {
    absl::MutexLock lock(&mu_);
    back_.resize(ctx_.spec->num_params());
  }
  thread_ = std::thread([this] { FetchThread(); });
}

void OverlapFetcher::FetchThread() {
  std::vector<float> buffer(ctx_.spec->num_params());
  std::vector<uint64_t> versions;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto wanted = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return fetch_wanted_ || done_;
      };
      mu_.Await(absl::Condition(&wanted));
      if (done_) return;
    }
    absl::Status status = ctx_.client->Pull(buffer.data(), &versions);
    if (!status.ok()) {
      error_.Set(status);
      return;
    }
    absl::MutexLock lock(&mu_);
    std::swap(buffer, back_);
    back_versions_ = versions;
    if (buffer.size() != back_.size()) buffer.resize(back_.size());
    fetched_ = true;
    fetch_wanted_ = false;
  }
}

absl::Status OverlapFetcher::BeforeStep(int64_t step) {
  pusher_.Collect(/*all=*/false);  // acks counted, failures seen
  absl::Status status = error();
  if (status.ok()) MaybeSwapParams();
  if (!status.ok()) return status;
  if (step > 0 && step % ctx_.training.n_fetch == 0) {
    absl::MutexLock lock(&mu_);
    fetch_wanted_ = true;
  }
  return absl::OkStatus();
}

void OverlapFetcher::MaybeSwapParams() {
  {
    absl::MutexLock lock(&mu_);
    if (!fetched_) return;
    StepBuffers& b = *ctx_.buffers;
    std::swap(b.params, back_);
    ctx_.backend->ParamsChanged();  // only counts; the backend re-uploads at
                                    // its next step
    b.versions = back_versions_;
    fetched_ = false;
  }
  ctx_.stats->CountPull();
}

void OverlapFetcher::TakeGradient() { pusher_.Add(); }

absl::Status OverlapFetcher::AfterStep(int64_t step, int64_t total) {
  if ((step + 1) % ctx_.training.n_push == 0 && !pusher_.HandOff())
    return error();
  return absl::OkStatus();
}

absl::Status OverlapFetcher::Flush() {
  // Send what is owed, wait until every push has ended, then stop the fetch
  // thread.
  pusher_.Flush();
  StopThread();
  return error();
}

void OverlapFetcher::StopThread() {
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace downpour::worker

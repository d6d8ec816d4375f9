// LayerwiseFetcher: the step's hooks on the compute thread, the groups'
// pushes and pulls on the send threads.
#include "worker/fetcher_layerwise.h"

#include <utility>

#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/model_spec.h"
#include "worker/compute_backend.h"

namespace downpour::worker {
namespace {

spdlog::logger* L() { return Log(Logger::kWorker); }

}  // namespace

LayerwiseFetcher::LayerwiseFetcher(const FetchContext& context)
    : Fetcher(context) {}

LayerwiseFetcher::~LayerwiseFetcher() { StopThreads(); }

void LayerwiseFetcher::Start() {
  const std::vector<BlockSpec>& blocks = ctx_.spec->blocks();
  const int n = static_cast<int>(blocks.size());
  block_ends_.resize(n);
  for (int b = 0; b < n; ++b)
    block_ends_[b] = blocks[b].offset + blocks[b].length;
  block_left_.resize(n);
  {
    absl::MutexLock lock(&mu_);
    fresh_for_.assign(n, 0);  // Run's first pull is step 0's
    queue_.clear();
    sending_ = 0;
    step_ = -1;  // no step handed off yet
    step_groups_ = step_finished_ = 0;
    step_closed_ = false;
    step_report_ = PushReport();
    failed_ = false;
    stopping_ = false;
  }
  // As many send threads as groups a step may have, up to 4: the groups of
  // one step go at once, each on its own connection's stream.
  const int64_t num_params = ctx_.spec->num_params();
  group_floats_ = ctx_.layer_group_floats > 0 ? ctx_.layer_group_floats
                                              : (num_params + 1) / 2;
  const int64_t group = group_floats_;
  const int64_t groups = (num_params + group - 1) / group;
  const int threads = static_cast<int>(std::clamp<int64_t>(groups, 1, 4));
  for (int t = 0; t < threads; ++t) {
    threads_.emplace_back([this] { SendThread(); });
  }
  SPDLOG_LOGGER_INFO(L(),
                     "worker {}: training.fetch layerwise: {} blocks sent in "
                     "groups of about {} floats as backprop finishes them, "
                     "{} send threads",
                     ctx_.worker_index, n, group, threads);
}

void LayerwiseFetcher::SendThread() {
  StepBuffers& b = *ctx_.buffers;
  for (;;) {
    Group group;
    {
      absl::MutexLock lock(&mu_);
      auto wanted = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&wanted));
      if (queue_.empty()) return;  // stopping
      if (failed_) {
        // Nothing is sent behind a failed push (as PsClient::StartPush).
        queue_.clear();
        continue;
      }
      group = std::move(queue_.front());
      queue_.pop_front();
      ++sending_;
    }
    // Only this thread touches grad and params in the group's blocks, and
    // versions at its ids, until it marks them fresh.
    PushReport report;
    const absl::Status status =
        ctx_.client->PushPullBlocks(b.grad.data(), b.versions, group.ids,
                                    &report, b.params.data(), &b.versions);
    if (!status.ok()) error_.Set(status);
    absl::MutexLock lock(&mu_);
    --sending_;
    if (!status.ok()) {
      failed_ = true;
      continue;
    }
    for (uint32_t id : group.ids) fresh_for_[id] = group.step + 1;
    step_report_.Merge(report);
    ++step_finished_;
    MaybeCountStep();
  }
}

void LayerwiseFetcher::MaybeCountStep() {
  if (!step_closed_ || step_finished_ < step_groups_) return;
  step_closed_ = false;  // counted once
  ctx_.stats->CountPushed(step_report_, 1, /*pulled=*/true);
  step_report_ = PushReport();
}

void LayerwiseFetcher::HandOffGroup(int64_t step, bool last) {
  absl::MutexLock lock(&mu_);
  if (step_ != step) {
    // A new step: the last one's groups all finished (its forward pass
    // awaited every block).
    step_ = step;
    step_groups_ = step_finished_ = 0;
    step_closed_ = false;
  }
  if (!open_group_.empty()) {
    queue_.push_back({step, std::move(open_group_)});
    ++step_groups_;
  }
  open_group_.clear();
  open_floats_ = 0;
  if (last) {
    step_closed_ = true;
    MaybeCountStep();
  }
}

absl::Status LayerwiseFetcher::AwaitBlocks(int64_t step, int64_t begin,
                                           int64_t end) {
  const absl::Time start = absl::Now();
  const size_t first = FirstBlockEndingAfter(begin);
  const std::vector<BlockSpec>& blocks = ctx_.spec->blocks();
  bool failed = false;
  {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (failed_) return true;
      for (size_t b = first; b < blocks.size() && blocks[b].offset < end; ++b) {
        if (fresh_for_[b] < step) return false;
      }
      return true;
    };
    while (!mu_.AwaitWithTimeout(absl::Condition(&ready),
                                 absl::Milliseconds(100))) {
      if (ctx_.stop->load()) return absl::CancelledError("stopped");
    }
    failed = failed_;
  }
  wait_ += absl::Now() - start;
  return failed ? error() : absl::OkStatus();
}

absl::Duration LayerwiseFetcher::TakeParamsWait() {
  const absl::Duration waited = wait_;
  wait_ = absl::ZeroDuration();
  return waited;
}

void LayerwiseFetcher::GradientReady(int64_t step, int64_t begin, int64_t end) {
  if (!bad_.empty()) return;  // nothing more of this step leaves
  const std::vector<BlockSpec>& blocks = ctx_.spec->blocks();
  for (size_t b = FirstBlockEndingAfter(begin);
       b < blocks.size() && blocks[b].offset < end; ++b) {
    const int64_t from = std::max(begin, blocks[b].offset);
    const int64_t to = std::min(end, block_ends_[b]);
    block_left_[b] -= to - from;
    if (block_left_[b] > 0) continue;
    bad_ = CheckGradient(blocks[b].offset, block_ends_[b]);
    if (!bad_.empty()) return;
    open_group_.push_back(static_cast<uint32_t>(b));
    open_floats_ += blocks[b].length;
    if (open_floats_ >= group_floats_) HandOffGroup(step, false);
  }
}

absl::StatusOr<float> LayerwiseFetcher::LossAndGradient(
    int64_t step, const float* x, const float* y, int batch, std::string* bad) {
  ctx_.backend
      ->ParamsChanged();  // the groups' pulls wrote params since the last step
  const std::vector<BlockSpec>& blocks = ctx_.spec->blocks();
  for (size_t b = 0; b < blocks.size(); ++b) block_left_[b] = blocks[b].length;
  bad_.clear();
  StageHooks hooks;
  hooks.num_params = ctx_.spec->num_params();
  for (const BlockSpec& block : blocks) hooks.cuts.push_back(block.offset);
  hooks.await_params = [this, step](int64_t begin, int64_t end) {
    return AwaitBlocks(step, begin, end);
  };
  hooks.gradient_ready = [this, step](int64_t begin, int64_t end) {
    GradientReady(step, begin, end);
  };
  StepBuffers& b = *ctx_.buffers;
  absl::StatusOr<float> staged = ctx_.backend->LossAndGradientInStages(
      b.params.data(), x, y, batch, b.grad.data(), hooks);
  // The step's last group. A step that failed or went bad is never
  // counted (what it handed off is still sent and settled).
  if (staged.ok() && bad_.empty()) HandOffGroup(step, /*last=*/true);
  if (staged.ok()) *bad = bad_;
  return staged;
}

absl::Status LayerwiseFetcher::Flush() {
  const absl::Time begin = absl::Now();
  StopThreads();
  ctx_.stats->AddWaitPush(absl::Now() - begin);
  return error();
}

void LayerwiseFetcher::StopThreads() {
  {
    absl::MutexLock lock(&mu_);
    auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return failed_ || (queue_.empty() && sending_ == 0);
    };
    mu_.Await(absl::Condition(&settled));
    stopping_ = true;
    queue_.clear();  // after a failure: nothing more is sent
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace downpour::worker

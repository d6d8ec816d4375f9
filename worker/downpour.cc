// Downpour loop: compute on the caller's thread, fetch on its own, pushes on
// the client's (PsClient::StartPush).
#include "worker/downpour.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/divergence_advice.h"
#include "common/float_check.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "model/metrics.h"
#include "worker/mlp_math.h"

namespace downpour::worker {
namespace {

spdlog::logger* L() { return Log(Logger::kWorker); }

// Deterministic per (seed, epoch) shuffle of 0..n-1.
std::vector<int> EpochOrder(int n, uint64_t seed) {
  return SeededPermutation(n, seed);
}

}  // namespace

DownpourLoop::DownpourLoop(const ModelSpec& spec, ComputeBackend* backend,
                           PsClient* client, const Dataset* train,
                           const Dataset* test, Options options)
    : DownpourLoop(spec, backend, client,
                   std::shared_ptr<const Dataset>(train, [](const Dataset*) {}),
                   test, std::move(options)) {}

DownpourLoop::DownpourLoop(const ModelSpec& spec, ComputeBackend* backend,
                           PsClient* client,
                           std::shared_ptr<const Dataset> train,
                           const Dataset* test, Options options)
    : spec_(spec), backend_(backend), client_(client),
      train_(std::move(train)), test_(test), options_(std::move(options)) {}

void DownpourLoop::ReplaceTrainingData(std::shared_ptr<const Dataset> data) {
  absl::MutexLock lock(&data_mu_);
  next_train_ = std::move(data);
  has_next_train_.store(true);
}

DownpourLoop::~DownpourLoop() = default;

WorkerStats DownpourLoop::stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

StalenessHistogram DownpourLoop::staleness() const {
  absl::MutexLock lock(&stats_mu_);
  return staleness_;
}

void DownpourLoop::SetError(const absl::Status& status) {
  absl::MutexLock lock(&comm_mu_);
  if (error_.ok()) error_ = status;
}

absl::Status DownpourLoop::error() const {
  absl::MutexLock lock(&comm_mu_);
  return error_;
}

int64_t DownpourLoop::TotalSteps(const EpochBudget& budget) const {
  const TrainingSection& t = options_.training;
  return t.steps > 0 ? t.steps : budget.total_steps();
}

void DownpourLoop::FetchThread() {
  std::vector<float> buffer(spec_.num_params());
  std::vector<uint64_t> versions;
  while (true) {
    {
      absl::MutexLock lock(&comm_mu_);
      comm_mu_.Await(absl::Condition(
          +[](DownpourLoop* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->fetch_wanted_ || self->comm_done_;
          },
          this));
      if (comm_done_) return;
    }
    absl::Status status = client_->Pull(buffer.data(), &versions);
    if (!status.ok()) {
      SetError(status);
      return;
    }
    absl::MutexLock lock(&comm_mu_);
    std::swap(buffer, back_);
    back_versions_ = versions;
    if (buffer.size() != back_.size()) buffer.resize(back_.size());
    fetched_ = true;
    fetch_wanted_ = false;
  }
}

void DownpourLoop::StartLayerwise() {
  const std::vector<BlockSpec>& blocks = spec_.blocks();
  const int n = static_cast<int>(blocks.size());
  block_ends_.resize(n);
  for (int b = 0; b < n; ++b) block_ends_[b] = blocks[b].offset + blocks[b].length;
  block_left_.resize(n);
  {
    absl::MutexLock lock(&layer_mu_);
    fresh_for_.assign(n, 0);  // Run's first pull is step 0's
    queue_.clear();
    sending_ = 0;
    layer_step_ = -1;  // no step handed off yet
    step_groups_ = step_finished_ = 0;
    step_closed_ = false;
    step_report_ = PushReport();
    layer_failed_ = false;
    layer_stop_ = false;
  }
  // As many send threads as groups a step may have, up to 4: the groups of
  // one step go at once, each on its own connection's stream.
  layer_group_floats_ = options_.layer_group_floats > 0
                            ? options_.layer_group_floats
                            : (spec_.num_params() + 1) / 2;
  const int64_t group = layer_group_floats_;
  const int64_t groups = (spec_.num_params() + group - 1) / group;
  const int threads = static_cast<int>(std::clamp<int64_t>(groups, 1, 4));
  for (int t = 0; t < threads; ++t) {
    layer_threads_.emplace_back([this] { LayerThread(); });
  }
  SPDLOG_LOGGER_INFO(L(),
                     "worker {}: training.fetch layerwise: {} blocks sent in "
                     "groups of about {} floats as backprop finishes them, "
                     "{} send threads",
                     options_.worker_index, n, group, threads);
}

void DownpourLoop::LayerThread() {
  for (;;) {
    Group group;
    {
      absl::MutexLock lock(&layer_mu_);
      auto wanted = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(layer_mu_) {
        return !queue_.empty() || layer_stop_;
      };
      layer_mu_.Await(absl::Condition(&wanted));
      if (queue_.empty()) return;  // stopping
      if (layer_failed_) {
        // Nothing is sent behind a failed push (as PsClient::StartPush).
        queue_.clear();
        continue;
      }
      group = std::move(queue_.front());
      queue_.pop_front();
      ++sending_;
    }
    // Only this thread touches grad_ and params_ in the group's blocks, and
    // versions_ at its ids, until it marks them fresh.
    PushReport report;
    const absl::Status status =
        client_->PushPullBlocks(grad_.data(), versions_, group.ids,
                                &report, params_.data(), &versions_);
    if (!status.ok()) SetError(status);
    absl::MutexLock lock(&layer_mu_);
    --sending_;
    if (!status.ok()) {
      layer_failed_ = true;
      continue;
    }
    for (uint32_t id : group.ids) fresh_for_[id] = group.step + 1;
    step_report_.Merge(report);
    ++step_finished_;
    MaybeCountStep();
  }
}

void DownpourLoop::MaybeCountStep() {
  if (!step_closed_ || step_finished_ < step_groups_) return;
  step_closed_ = false;  // counted once
  absl::MutexLock stats(&stats_mu_);
  CountPushed(step_report_, 1, /*pulled=*/true);
  step_report_ = PushReport();
}

void DownpourLoop::CountPushed(const PushReport& report, int64_t steps,
                               bool pulled) {
  if (pulled) ++stats_.pulls;
  if (report.refused > 0) {
    // Answered, not applied (on at least one shard): no examples counted.
    stats_.refused_steps += steps;
    for (const std::string& line : refusal_log_.Record(
             "refused", absl::StrCat("worker ", options_.worker_index,
                                     ": a push of ", steps,
                                     " steps was refused and dropped (its "
                                     "examples are not counted): ",
                                     report.refused_why))) {
      SPDLOG_LOGGER_WARN(L(), "{}", line);
    }
  } else {
    ++stats_.pushes;
    stats_.pushed_steps += steps;
    stats_.examples += steps * options_.training.batch_size;
  }
  staleness_.Merge(report.staleness);
  const StalenessSummary summary = staleness_.Summary();
  stats_.mean_staleness = summary.mean;
  stats_.staleness_p50 = summary.p50;
  stats_.staleness_p99 = summary.p99;
  stats_.staleness_max = summary.max;
}

void DownpourLoop::HandOffGroup(int64_t step, bool last) {
  absl::MutexLock lock(&layer_mu_);
  if (layer_step_ != step) {
    // A new step: the last one's groups all finished (its forward pass
    // awaited every block).
    layer_step_ = step;
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

absl::Status DownpourLoop::AwaitBlocks(int64_t step, int64_t begin,
                                       int64_t end) {
  const absl::Time start = absl::Now();
  const size_t first = FirstBlockEndingAfter(begin);
  const std::vector<BlockSpec>& blocks = spec_.blocks();
  bool failed = false;
  {
    absl::MutexLock lock(&layer_mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(layer_mu_) {
      if (layer_failed_) return true;
      for (size_t b = first; b < blocks.size() && blocks[b].offset < end; ++b) {
        if (fresh_for_[b] < step) return false;
      }
      return true;
    };
    while (!layer_mu_.AwaitWithTimeout(absl::Condition(&ready),
                                       absl::Milliseconds(100))) {
      if (stop_.load()) return absl::CancelledError("stopped");
    }
    failed = layer_failed_;
  }
  layer_wait_ += absl::Now() - start;
  return failed ? error() : absl::OkStatus();
}

std::string DownpourLoop::CheckGradient(int64_t begin, int64_t end) const {
  const double max_value = options_.optimizer.max_gradient_value;
  const float bound = max_value > 0 ? static_cast<float>(max_value)
                                    : std::numeric_limits<float>::max();
  const int64_t at = begin + FirstOutside(grad_.data() + begin, end - begin, bound);
  if (at == end) return "";
  const float g = grad_[at];
  return std::isfinite(g)
             ? absl::StrCat("gradient holds ", g,
                            ", beyond optimizer.max_gradient_value ", max_value)
             : absl::StrCat("gradient holds ", g);
}

void DownpourLoop::GradientReady(int64_t step, int64_t begin, int64_t end) {
  if (!layer_bad_.empty()) return;  // nothing more of this step leaves
  const std::vector<BlockSpec>& blocks = spec_.blocks();
  for (size_t b = FirstBlockEndingAfter(begin);
       b < blocks.size() && blocks[b].offset < end; ++b) {
    const int64_t from = std::max(begin, blocks[b].offset);
    const int64_t to = std::min(end, block_ends_[b]);
    block_left_[b] -= to - from;
    if (block_left_[b] > 0) continue;
    layer_bad_ = CheckGradient(blocks[b].offset, block_ends_[b]);
    if (!layer_bad_.empty()) return;
    open_group_.push_back(static_cast<uint32_t>(b));
    open_floats_ += blocks[b].length;
    if (open_floats_ >= layer_group_floats_) HandOffGroup(step, false);
  }
}

void DownpourLoop::StopLayerwise() {
  {
    absl::MutexLock lock(&layer_mu_);
    auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(layer_mu_) {
      return layer_failed_ || (queue_.empty() && sending_ == 0);
    };
    layer_mu_.Await(absl::Condition(&settled));
    layer_stop_ = true;
    queue_.clear();  // after a failure: nothing more is sent
  }
  for (std::thread& t : layer_threads_) t.join();
  layer_threads_.clear();
}

void DownpourLoop::CollectPushes(bool all) {
  while (!pushes_.empty() &&
         (all || client_->PushDone(pushes_.front().ticket))) {
    const PushInFlight push = pushes_.front();
    pushes_.pop_front();
    PushReport report;
    std::vector<float> buffer;
    const absl::Status status = client_->Wait(push.ticket, &report, &buffer);
    if (!buffer.empty()) spare_.push_back(std::move(buffer));
    if (!status.ok()) {
      SetError(status);
      continue;
    }
    absl::MutexLock lock(&stats_mu_);
    CountPushed(report, push.steps, /*pulled=*/false);
  }
}

void DownpourLoop::MaybeSwapParams() {
  absl::MutexLock lock(&comm_mu_);
  if (!fetched_) return;
  std::swap(params_, back_);
  ParamsChanged();  // only counts; the backend re-uploads at its next step
  versions_ = back_versions_;
  fetched_ = false;
  absl::MutexLock stats(&stats_mu_);
  ++stats_.pulls;
}

bool DownpourLoop::HandOffGradient() {
  const absl::Time begin = absl::Now();
  // Backpressure: with the pipeline full, StartPush waits for an ack rather
  // than the loop summing more steps into a later push.
  absl::StatusOr<PushTicket> ticket =
      client_->StartPush(std::move(accum_), accum_versions_);
  if (ticket.ok()) {
    pushes_.push_back({*ticket, accum_steps_});
  } else {
    SetError(ticket.status());
  }
  accum_steps_ = 0;
  CollectPushes(/*all=*/false);  // the push that made room, and its buffer
  {
    absl::MutexLock lock(&stats_mu_);
    wait_push_time_ += absl::Now() - begin;
  }
  // A buffer for the next push (the next step's gradient is swapped into
  // it, so its values do not matter).
  if (spare_.empty()) {
    accum_.resize(params_.size());  // only until max_pushes_in_flight + 1
  } else {
    accum_ = std::move(spare_.back());
    spare_.pop_back();
  }
  return error().ok();
}

bool DownpourLoop::SyncAfterPush() {
  absl::Time begin = absl::Now();
  CollectPushes(/*all=*/true);
  if (!error().ok()) return false;
  absl::Time pulled = absl::Now();
  {
    absl::MutexLock lock(&stats_mu_);
    wait_push_time_ += pulled - begin;
  }
  absl::Status status = client_->Pull(params_.data(), &versions_);
  ParamsChanged();
  absl::MutexLock lock(&stats_mu_);
  wait_pull_time_ += absl::Now() - pulled;
  if (!status.ok()) {
    SetError(status);
    return false;
  }
  ++stats_.pulls;
  return true;
}

absl::Status DownpourLoop::WaitForWarmstart() {
  const TrainingSection& t = options_.training;
  if (options_.worker_index == 0 || t.warmstart_steps <= 0 ||
      options_.no_communication) {
    return absl::OkStatus();
  }
  // Each push of worker 0 bumps every block's version by one.
  const uint64_t needed = static_cast<uint64_t>(t.warmstart_steps / t.n_push);
  const absl::Time begin = absl::Now();
  absl::Time advanced = begin, logged = begin;
  uint64_t best = 0;
  SPDLOG_LOGGER_INFO(L(),
                     "worker {}: warmstart: waiting for worker 0 to train {} "
                     "steps alone (global step {})",
                     options_.worker_index, t.warmstart_steps, needed);
  while (!stop_.load()) {
    RETURN_IF_ERROR(client_->Pull(params_.data(), &versions_));
    uint64_t global = versions_.empty() ? 0 : versions_[0];
    for (uint64_t v : versions_) global = std::min(global, v);
    const absl::Time now = absl::Now();
    if (global >= needed) {
      SPDLOG_LOGGER_INFO(L(), "worker {}: warmstart done after {:.1f} s",
                         options_.worker_index,
                         absl::ToDoubleSeconds(now - begin));
      return absl::OkStatus();
    }
    if (global > best) {
      best = global;
      advanced = now;
    }
    if (now - advanced >= options_.warmstart_patience) {
      SPDLOG_LOGGER_WARN(
          L(),
          "worker {}: worker 0's warmstart made no progress for {:.0f} s (at "
          "global step {} of {}): is worker 0 running? starting anyway",
          options_.worker_index,
          absl::ToDoubleSeconds(options_.warmstart_patience), global, needed);
      return absl::OkStatus();
    }
    if (now - logged >= absl::Seconds(5)) {
      logged = now;
      SPDLOG_LOGGER_INFO(L(),
                         "worker {}: warmstart: worker 0 is at global step {} "
                         "of {}",
                         options_.worker_index, global, needed);
    }
    absl::SleepFor(options_.warmstart_poll);
  }
  return absl::OkStatus();
}

void DownpourLoop::UpdateRates() {
  absl::MutexLock lock(&stats_mu_);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  if (seconds <= 0) return;
  stats_.examples_per_sec = stats_.examples / seconds;
  stats_.share_compute = absl::ToDoubleSeconds(compute_time_) / seconds;
  stats_.share_wait_pull = absl::ToDoubleSeconds(wait_pull_time_) / seconds;
  stats_.share_wait_push = absl::ToDoubleSeconds(wait_push_time_) / seconds;
}

void DownpourLoop::FillBatch(const std::vector<int>& order, int64_t cursor, float* x,
                             float* y) const {
  const int dim = train_->dim;
  for (int i = 0; i < options_.training.batch_size; ++i) {
    const int example = order[(cursor + i) % order.size()];
    std::memcpy(&x[i * dim], &train_->x[example * dim], dim * sizeof(float));
    y[i] = train_->y[example];
  }
}

absl::Status DownpourLoop::Step(int64_t step, const std::vector<int>& order,
                                int64_t* cursor) {
  const int batch = options_.training.batch_size;
  if (next_cursor_ == *cursor) {  // prefetched during the last step
    std::swap(batch_x_, next_x_);
    std::swap(batch_y_, next_y_);
  } else {
    FillBatch(order, *cursor, batch_x_.data(), batch_y_.data());
  }
  *cursor += batch;
  // The next step's batch, so that its copy to a GPU overlaps this step.
  FillBatch(order, *cursor, next_x_.data(), next_y_.data());
  next_cursor_ = *cursor;
  backend_->Prefetch(next_x_.data(), next_y_.data(), batch);
  float loss = 0;
  // A non-finite loss or gradient, or one past optimizer.max_gradient_value,
  // is never pushed: it would ruin the shared parameters for every worker
  // (the ps refuses it anyway). Layerwise, a block is checked before its
  // group leaves, and nothing more of the step leaves after a bad one.
  std::string bad;
  if (layerwise()) {
    ParamsChanged();  // the groups' pulls wrote params_ since the last step
    const std::vector<BlockSpec>& blocks = spec_.blocks();
    for (size_t b = 0; b < blocks.size(); ++b) block_left_[b] = blocks[b].length;
    layer_bad_.clear();
    StageHooks hooks;
    hooks.num_params = spec_.num_params();
    for (const BlockSpec& block : blocks) hooks.cuts.push_back(block.offset);
    hooks.await_params = [this, step](int64_t begin, int64_t end) {
      return AwaitBlocks(step, begin, end);
    };
    hooks.gradient_ready = [this, step](int64_t begin, int64_t end) {
      GradientReady(step, begin, end);
    };
    absl::StatusOr<float> staged = backend_->LossAndGradientInStages(
        params_.data(), batch_x_.data(), batch_y_.data(), batch, grad_.data(),
        hooks);
    // The step's last group. A step that failed or went bad is never
    // counted (what it handed off is still sent and settled).
    if (staged.ok() && layer_bad_.empty()) HandOffGroup(step, /*last=*/true);
    if (!staged.ok()) return staged.status();
    loss = *staged;
    bad = layer_bad_;
  } else {
    ASSIGN_OR_RETURN(loss, backend_->LossAndGradient(
                               params_.data(), batch_x_.data(),
                               batch_y_.data(), batch, grad_.data()));
    bad = CheckGradient(0, spec_.num_params());
  }
  if (!std::isfinite(loss)) bad = absl::StrCat("loss is ", loss);
  if (!bad.empty()) {
    absl::Status diverged = Diverged(step, bad);
    absl::MutexLock lock(&stats_mu_);
    stats_.diverged = std::string(diverged.message());
    return diverged;
  }
  if (layerwise()) {
    // Handed to the groups' threads as backprop went.
  } else if (options_.no_communication) {
    const float lr = static_cast<float>(options_.local_learning_rate);
    for (size_t i = 0; i < params_.size(); ++i) params_[i] -= lr * grad_[i];
    ParamsChanged();
  } else {
    if (accum_steps_ == 0) {
      // The first step of a push: its gradient becomes the sum (no pass).
      accum_versions_ = versions_;
      std::swap(accum_, grad_);
    } else {
      for (size_t i = 0; i < accum_.size(); ++i) accum_[i] += grad_[i];
    }
    ++accum_steps_;
  }
  absl::MutexLock lock(&stats_mu_);
  stats_.step = step + 1;
  // Communication off: the step's gradient was applied right here.
  if (options_.no_communication) stats_.examples += batch;
  stats_.loss = std::isnan(stats_.loss) ? loss : 0.95 * stats_.loss + 0.05 * loss;
  return absl::OkStatus();
}

absl::Status DownpourLoop::Diverged(int64_t step,
                                    const std::string& what) const {
  DivergenceAdvice advice =
      AdviseOnDivergence(options_.optimizer, options_.num_workers);
  advice.knobs[0] = 'L';  // the knobs start a sentence here
  return absl::InvalidArgumentError(absl::StrCat(
      "worker ", options_.worker_index, ": training diverged at step ", step,
      ": ", what, ". Likely causes: ", advice.causes, ". ", advice.knobs,
      layerwise() ? "; of this step only the blocks before the bad one were "
                    "pushed (training.fetch layerwise)"
                  : "; nothing of this step was pushed"));
}

absl::Status DownpourLoop::Evaluate(const float* params) {
  if (test_ == nullptr || test_->size() == 0) return absl::OkStatus();
  const int k = spec_.outputs();
  RETURN_IF_ERROR(
      CheckTargets(spec_.task(), test_->y.data(), test_->size(), k));
  test_outputs_.resize(static_cast<size_t>(test_->size()) * k);
  RETURN_IF_ERROR(backend_->Predict(params, test_->x.data(), test_->size(),
                                    test_outputs_.data()));
  const model::Metrics m =
      model::ComputeMetrics(spec_.task(), test_outputs_.data(),
                            test_->y.data(), test_->size(), k);
  absl::MutexLock lock(&stats_mu_);
  stats_.accuracy = m.accuracy;
  ++stats_.evaluations;
  stats_.test_loss = m.loss;
  stats_.metrics = m.Named(spec_.task());
  return absl::OkStatus();
}

absl::Status DownpourLoop::Flush() {
  if (options_.no_communication) return absl::OkStatus();
  if (layerwise()) {
    const absl::Time begin = absl::Now();
    StopLayerwise();
    absl::MutexLock lock(&stats_mu_);
    wait_push_time_ += absl::Now() - begin;
  }
  // Send what is owed, wait until every push has ended, then stop the fetch
  // thread.
  if (accum_steps_ > 0 && error().ok()) HandOffGradient();
  const absl::Time begin = absl::Now();
  CollectPushes(/*all=*/true);
  absl::Status status;
  {
    absl::MutexLock lock(&comm_mu_);
    comm_done_ = true;
    status = error_;
  }
  absl::MutexLock lock(&stats_mu_);
  wait_push_time_ += absl::Now() - begin;
  return status;
}

absl::Status DownpourLoop::Run() {
  const TrainingSection& t = options_.training;
  const int64_t n = spec_.num_params();
  params_.resize(n);
  grad_.resize(n);
  accum_.assign(n, 0.0f);
  batch_x_.resize(static_cast<size_t>(t.batch_size) * train_->dim);
  batch_y_.resize(t.batch_size);
  next_x_.resize(batch_x_.size());
  next_y_.resize(batch_y_.size());
  next_cursor_ = -1;
  if (train_->size() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", options_.worker_index, " has no training examples in its partition"));
  }
  absl::Time begin = absl::Now();
  {
    absl::MutexLock lock(&stats_mu_);
    start_ = begin;
  }
  RETURN_IF_ERROR(WaitForWarmstart());
  RETURN_IF_ERROR(client_->Pull(params_.data(), &versions_));
  ParamsChanged();
  {
    absl::MutexLock lock(&stats_mu_);
    wait_pull_time_ += absl::Now() - begin;
  }
  {
    absl::MutexLock lock(&comm_mu_);
    back_.resize(n);
  }
  std::thread fetcher;
  if (layerwise()) {
    StartLayerwise();
  } else if (!options_.no_communication) {
    fetcher = std::thread([this] { FetchThread(); });
  }
  // training.epochs: the epochs follow the data parts as they move (steps
  // taken on each set count as that set's share of an epoch).
  EpochBudget budget(t.epochs, t.batch_size, train_->size());
  int64_t total = TotalSteps(budget);
  SPDLOG_LOGGER_INFO(
      L(),
      "training {} steps of {} examples on {} ({} train / {} test examples)",
      total, t.batch_size, backend_->device(), train_->size(),
      test_ == nullptr ? 0 : test_->size());
  absl::Status status;
  int64_t cursor = 0;
  std::vector<int> order;
  int64_t epoch = 0, next_epoch_step = 0;
  int64_t step = 0;
  for (; step < total && !stop_.load(); ++step) {
    if (has_next_train_.load()) {
      absl::MutexLock lock(&data_mu_);
      if (next_train_ != nullptr && next_train_->size() > 0) {
        // The epochs left are run over the new set, so adopted parts get
        // trained on as much as the worker's own, and a part given back
        // takes its share of the budget with it.
        budget.SetExamples(next_train_->size());
        total = TotalSteps(budget);
        SPDLOG_LOGGER_INFO(L(), "step {}: now training on {} examples (was {}), {} steps in all",
                           step, next_train_->size(), train_->size(), total);
        train_ = std::move(next_train_);
        next_epoch_step = step;  // start an epoch over the new data
      }
      next_train_.reset();
      has_next_train_.store(false);
    }
    if (step == next_epoch_step) {
      order = EpochOrder(train_->size(), t.seed + 1000003ULL * options_.worker_index +
                                              static_cast<uint64_t>(epoch++));
      cursor = 0;
      next_epoch_step = step + (train_->size() + t.batch_size - 1) / t.batch_size;
    }
    if (layerwise()) {
      if (!(status = error()).ok()) break;
    } else if (!options_.no_communication) {
      CollectPushes(/*all=*/false);  // acks counted, failures seen
      if ((status = error()).ok()) MaybeSwapParams();
      if (!status.ok()) break;
      // fetch after_push (and bsp) pulls at the end of a step instead
      // (SyncAfterPush).
      if (!fetch_after_push() && step > 0 && step % t.n_fetch == 0) {
        absl::MutexLock lock(&comm_mu_);
        fetch_wanted_ = true;
      }
    }
    begin = absl::Now();
    layer_wait_ = absl::ZeroDuration();
    status = Step(step, order, &cursor);
    if (status.ok() && t.eval_every_steps > 0 &&
        (step + 1) % t.eval_every_steps == 0) {
      // Layerwise, the groups' pulls still write params_: wait for all.
      if (layerwise()) status = AwaitBlocks(step + 1, 0, spec_.num_params());
      if (status.ok()) status = Evaluate(params_.data());
    }
    {
      absl::MutexLock lock(&stats_mu_);
      compute_time_ += absl::Now() - begin - layer_wait_;
      wait_pull_time_ += layer_wait_;
    }
    // Stop() while a step waited for its parameters: nothing of it left.
    if (layerwise() && absl::IsCancelled(status) && stop_.load()) {
      status = absl::OkStatus();
      break;
    }
    if (!status.ok()) break;
    budget.StepTaken();
    if (!options_.no_communication && !layerwise()) {
      // The last step needs no pull: Run pulls the final parameters after
      // the flush.
      const bool pull = fetch_after_push() && (step + 1) % t.n_fetch == 0 &&
                        step + 1 < total;
      if (((step + 1) % t.n_push == 0 && !HandOffGradient()) ||
          (pull && !SyncAfterPush())) {
        status = error();
        break;
      }
    }
    UpdateRates();
  }
  absl::Status flushed = Flush();
  if (fetcher.joinable()) fetcher.join();
  if (status.ok()) status = flushed;
  if (status.ok()) status = error();
  if (!status.ok()) return status;
  if (!options_.no_communication) {
    begin = absl::Now();
    RETURN_IF_ERROR(client_->Pull(params_.data(), &versions_));
    ParamsChanged();
    absl::MutexLock lock(&stats_mu_);
    wait_pull_time_ += absl::Now() - begin;
  }
  RETURN_IF_ERROR(Evaluate(params_.data()));
  UpdateRates();
  absl::MutexLock lock(&stats_mu_);
  stats_.finished = true;
  SPDLOG_LOGGER_INFO(
      L(),
      "finished after {} steps ({} pushes applied, {} steps refused by a "
      "ps's push guard, {} fresh parameter sets): test "
      "accuracy {:.4f}, {:.0f} applied examples/s; time computing {:.0f}%, "
      "waiting for pulls {:.0f}%, for pushes {:.0f}%; staleness p50 {:.0f}, "
      "p99 {:.0f}, max {:.0f}, mean {:.2f}",
      stats_.step, stats_.pushes, stats_.refused_steps, stats_.pulls,
      stats_.accuracy,
      stats_.examples_per_sec, 100 * stats_.share_compute,
      100 * stats_.share_wait_pull, 100 * stats_.share_wait_push,
      stats_.staleness_p50, stats_.staleness_p99, stats_.staleness_max,
      stats_.mean_staleness);
  return absl::OkStatus();
}

}  // namespace downpour::worker

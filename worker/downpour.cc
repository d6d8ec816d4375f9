// Downpour loop: compute on the caller's thread, fetch and push on their own.
#include "worker/downpour.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"

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
    : spec_(spec), backend_(backend), client_(client),
      train_(train, [](const Dataset*) {}), test_(test),
      options_(std::move(options)) {}

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

void DownpourLoop::SetError(const absl::Status& status) {
  absl::MutexLock lock(&comm_mu_);
  if (error_.ok()) error_ = status;
}

absl::Status DownpourLoop::error() const {
  absl::MutexLock lock(&comm_mu_);
  return error_;
}

int64_t DownpourLoop::TotalSteps() const {
  const TrainingSection& t = options_.training;
  if (t.steps > 0) return t.steps;
  const int64_t per_epoch = (train_->size() + t.batch_size - 1) / t.batch_size;
  return std::max<int64_t>(1, per_epoch) * t.epochs;
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

void DownpourLoop::PushThread() {
  std::vector<float> buffer(spec_.num_params());
  std::vector<uint64_t> versions;
  while (true) {
    {
      absl::MutexLock lock(&comm_mu_);
      comm_mu_.Await(absl::Condition(
          +[](DownpourLoop* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->push_pending_ || self->comm_done_;
          },
          this));
      if (!push_pending_) return;  // done and nothing owed
      std::swap(buffer, outbox_);
      versions = outbox_versions_;
    }
    absl::Status status = client_->Push(buffer.data(), versions);
    absl::MutexLock lock(&comm_mu_);
    std::swap(buffer, outbox_);  // give the buffer back for reuse
    push_pending_ = false;
    if (!status.ok()) {
      if (error_.ok()) error_ = status;
      return;
    }
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

void DownpourLoop::ScaleLaggingGradient() {
  const int n_push = options_.training.n_push;
  if (accum_steps_ <= n_push) return;
  // The network lagged and this gradient sums more steps than n_push, all
  // computed on parameters that are older for it. Scale it to n_push steps'
  // worth (staleness-aware scaling, as in Zhang et al., IJCAI 2016): summing
  // them in full made async training diverge in our runs.
  const float scale = static_cast<float>(n_push) / accum_steps_;
  for (float& g : accum_) g *= scale;
}

void DownpourLoop::HandOffGradient() {
  {
    absl::MutexLock lock(&comm_mu_);
    if (push_pending_) return;  // still sending the last one: keep accumulating
    ScaleLaggingGradient();
    if (outbox_.size() != accum_.size()) outbox_.resize(accum_.size());
    std::swap(accum_, outbox_);
    outbox_versions_ = accum_versions_;
    push_pending_ = true;
  }
  std::fill(accum_.begin(), accum_.end(), 0.0f);
  absl::MutexLock stats(&stats_mu_);
  ++stats_.pushes;
  stats_.pushed_steps += accum_steps_;
  accum_steps_ = 0;
}

void DownpourLoop::FillBatch(const std::vector<int>& order, int64_t cursor, float* x,
                             int* y) const {
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
  ASSIGN_OR_RETURN(float loss, backend_->LossAndGradient(params_.data(), batch_x_.data(),
                                                         batch_y_.data(), batch,
                                                         grad_.data()));
  if (!std::isfinite(loss)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", options_.worker_index, ": training loss is ", loss, " at step ",
        step, ": the model diverged; lower optimizer.learning_rate"));
  }
  if (options_.no_communication) {
    const float lr = static_cast<float>(options_.local_learning_rate);
    for (size_t i = 0; i < params_.size(); ++i) params_[i] -= lr * grad_[i];
    ParamsChanged();
  } else {
    if (accum_steps_ == 0) accum_versions_ = versions_;
    for (size_t i = 0; i < accum_.size(); ++i) accum_[i] += grad_[i];
    ++accum_steps_;
  }
  absl::MutexLock lock(&stats_mu_);
  stats_.step = step + 1;
  stats_.examples += batch;
  stats_.loss = std::isnan(stats_.loss) ? loss : 0.95 * stats_.loss + 0.05 * loss;
  return absl::OkStatus();
}

absl::Status DownpourLoop::Evaluate(const float* params) {
  if (test_ == nullptr || test_->size() == 0) return absl::OkStatus();
  double loss_sum = 0;
  int64_t correct = 0;
  RETURN_IF_ERROR(backend_->Evaluate(params, test_->x.data(), test_->y.data(),
                                     test_->size(), &loss_sum, &correct));
  absl::MutexLock lock(&stats_mu_);
  stats_.accuracy = static_cast<double>(correct) / test_->size();
  stats_.test_loss = loss_sum / test_->size();
  return absl::OkStatus();
}

absl::Status DownpourLoop::Flush() {
  if (options_.no_communication) return absl::OkStatus();
  // Wait for the push in flight, then send what is left, then stop the threads.
  absl::MutexLock lock(&comm_mu_);
  comm_mu_.Await(absl::Condition(
      +[](DownpourLoop* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !self->push_pending_ || !self->error_.ok();
      },
      this));
  if (accum_steps_ > 0 && error_.ok()) {
    ScaleLaggingGradient();
    std::swap(accum_, outbox_);
    outbox_versions_ = accum_versions_;
    push_pending_ = true;
    absl::MutexLock stats(&stats_mu_);
    ++stats_.pushes;
    stats_.pushed_steps += accum_steps_;
    accum_steps_ = 0;
  }
  comm_done_ = true;
  return error_;
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
  RETURN_IF_ERROR(client_->Pull(params_.data(), &versions_));
  ParamsChanged();
  {
    absl::MutexLock lock(&comm_mu_);
    back_.resize(n);
  }
  std::thread fetcher, pusher;
  if (!options_.no_communication) {
    fetcher = std::thread([this] { FetchThread(); });
    pusher = std::thread([this] { PushThread(); });
  }
  int64_t total = TotalSteps();
  SPDLOG_LOGGER_INFO(L(), "training {} steps of {} examples on {} ({} train / {} test examples)",
                     total, t.batch_size, backend_->device(), train_->size(),
                     test_ == nullptr ? 0 : test_->size());
  const absl::Time start = absl::Now();
  absl::Status status;
  int64_t cursor = 0;
  std::vector<int> order;
  int64_t epoch = 0, next_epoch_step = 0;
  int64_t step = 0;
  for (; step < total && !stop_.load(); ++step) {
    if (has_next_train_.load()) {
      absl::MutexLock lock(&data_mu_);
      if (next_train_ != nullptr && next_train_->size() > 0) {
        if (t.steps == 0) {
          // Epoch budgets follow the data: the epochs left are run over the new
          // set, so adopted parts get trained on as much as the worker's own.
          const double old_per_epoch =
              std::ceil(static_cast<double>(train_->size()) / t.batch_size);
          const double new_per_epoch =
              std::ceil(static_cast<double>(next_train_->size()) / t.batch_size);
          const double left = std::max(0.0, t.epochs - step / old_per_epoch);
          total = step + static_cast<int64_t>(std::ceil(left * new_per_epoch));
        }
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
    if (!options_.no_communication) {
      if ((status = error()).ok()) MaybeSwapParams();
      if (!status.ok()) break;
      if (step > 0 && step % t.n_fetch == 0) {
        absl::MutexLock lock(&comm_mu_);
        fetch_wanted_ = true;
      }
    }
    if (!(status = Step(step, order, &cursor)).ok()) break;
    if (!options_.no_communication && (step + 1) % t.n_push == 0) HandOffGradient();
    if (t.eval_every_steps > 0 && (step + 1) % t.eval_every_steps == 0) {
      if (!(status = Evaluate(params_.data())).ok()) break;
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    absl::MutexLock lock(&stats_mu_);
    stats_.examples_per_sec = seconds > 0 ? stats_.examples / seconds : 0;
  }
  absl::Status flushed = Flush();
  if (fetcher.joinable()) fetcher.join();
  if (pusher.joinable()) pusher.join();
  if (status.ok()) status = flushed;
  if (status.ok()) status = error();
  if (!status.ok()) return status;
  if (!options_.no_communication) {
    RETURN_IF_ERROR(client_->Pull(params_.data(), &versions_));
    ParamsChanged();
  }
  RETURN_IF_ERROR(Evaluate(params_.data()));
  absl::MutexLock lock(&stats_mu_);
  stats_.finished = true;
  SPDLOG_LOGGER_INFO(L(), "finished after {} steps ({} pushes, {} fresh parameter sets): test accuracy {:.4f}, {:.0f} examples/s",
                     stats_.step, stats_.pushes, stats_.pulls, stats_.accuracy, stats_.examples_per_sec);
  return absl::OkStatus();
}

}  // namespace downpour::worker

// Downpour loop: the order of a step on the caller's thread; fetches and
// pushes in the mode's Fetcher (worker/fetcher.h) and on the client's threads
// (PsClient::StartPush).
#include "worker/downpour.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/divergence_advice.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "model/metrics.h"
#include "worker/fetcher_factory.h"
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
    : spec_(spec),
      backend_(backend),
      client_(client),
      train_(std::move(train)),
      test_(test),
      options_(std::move(options)),
      stats_(options_.worker_index, options_.training.batch_size),
      fetcher_(MakeFetcher(FetchContextOf(), options_.no_communication)) {}

FetchContext DownpourLoop::FetchContextOf() {
  FetchContext context;
  context.spec = &spec_;
  context.backend = backend_;
  context.client = client_;
  context.buffers = &buffers_;
  context.stats = &stats_;
  context.stop = &stop_;
  context.training = options_.training;
  context.max_gradient_value = options_.optimizer.max_gradient_value;
  context.worker_index = options_.worker_index;
  context.local_learning_rate = options_.local_learning_rate;
  context.layer_group_floats = options_.layer_group_floats;
  context.optimizer = options_.optimizer;
  context.num_workers = options_.num_workers;
  return context;
}

void DownpourLoop::ReplaceTrainingData(std::shared_ptr<const Dataset> data) {
  absl::MutexLock lock(&data_mu_);
  next_train_ = std::move(data);
  has_next_train_.store(true);
}

DownpourLoop::~DownpourLoop() = default;

int64_t DownpourLoop::TotalSteps(const EpochBudget& budget) const {
  const TrainingSection& t = options_.training;
  return t.steps > 0 ? t.steps : budget.total_steps();
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
    RETURN_IF_ERROR(client_->Pull(buffers_.params.data(), &buffers_.versions));
    uint64_t global = buffers_.versions.empty() ? 0 : buffers_.versions[0];
    for (uint64_t v : buffers_.versions) global = std::min(global, v);
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

void DownpourLoop::FillBatch(const std::vector<int>& order, int64_t cursor,
                             float* x, float* y) const {
  const int dim = train_->dim;
  for (int i = 0; i < options_.training.batch_size; ++i) {
    const int example = order[(cursor + i) % order.size()];
    std::memcpy(&x[i * dim], &train_->x[example * dim], dim * sizeof(float));
    y[i] = train_->y[example];
  }
}

void DownpourLoop::NextBatch(const std::vector<int>& order, int64_t* cursor) {
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
}

absl::Status DownpourLoop::Step(int64_t step, const std::vector<int>& order,
                                int64_t* cursor) {
  NextBatch(order, cursor);
  // A non-finite loss or gradient, or one past optimizer.max_gradient_value,
  // is never pushed: it would ruin the shared parameters for every worker
  // (the ps refuses it anyway). Layerwise, a block is checked before its
  // group leaves, and nothing more of the step leaves after a bad one.
  std::string bad;
  ASSIGN_OR_RETURN(const float loss, fetcher_->LossAndGradient(
                                         step, batch_x_.data(), batch_y_.data(),
                                         options_.training.batch_size, &bad));
  if (!std::isfinite(loss)) bad = absl::StrCat("loss is ", loss);
  if (!bad.empty()) {
    absl::Status diverged = Diverged(step, bad);
    stats_.SetDiverged(std::string(diverged.message()));
    return diverged;
  }
  fetcher_->TakeGradient();
  stats_.StepDone(step + 1, loss);
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
      fetcher_->DivergedNote()));
}

absl::Status DownpourLoop::Evaluate(const float* params) {
  if (test_ == nullptr || test_->size() == 0) return absl::OkStatus();
  const int k = spec_.outputs();
  RETURN_IF_ERROR(
      CheckTargets(spec_.task(), test_->y.data(), test_->size(), k));
  test_outputs_.resize(static_cast<size_t>(test_->size()) * k);
  RETURN_IF_ERROR(backend_->Predict(params, test_->x.data(), test_->size(),
                                    test_outputs_.data()));
  const model::Metrics m = model::ComputeMetrics(
      spec_.task(), test_outputs_.data(), test_->y.data(), test_->size(), k);
  stats_.Evaluated(m.accuracy, m.loss, m.Reported(spec_.task()));
  return absl::OkStatus();
}

void DownpourLoop::AdoptNextTrainingData(int64_t step, EpochBudget* budget,
                                         int64_t* total,
                                         int64_t* next_epoch_step) {
  if (!has_next_train_.load()) return;
  absl::MutexLock lock(&data_mu_);
  if (next_train_ != nullptr && next_train_->size() > 0) {
    // The epochs left are run over the new set, so adopted parts get
    // trained on as much as the worker's own, and a part given back
    // takes its share of the budget with it.
    budget->SetExamples(next_train_->size());
    *total = TotalSteps(*budget);
    stats_.SetPlannedSteps(*total);
    SPDLOG_LOGGER_INFO(
        L(), "step {}: now training on {} examples (was {}), {} steps in all",
        step, next_train_->size(), train_->size(), *total);
    train_ = std::move(next_train_);
    *next_epoch_step = step;  // start an epoch over the new data
  }
  next_train_.reset();
  has_next_train_.store(false);
}

absl::Status DownpourLoop::Prepare() {
  const TrainingSection& t = options_.training;
  const int64_t n = spec_.num_params();
  buffers_.params.resize(n);
  buffers_.grad.resize(n);
  batch_x_.resize(static_cast<size_t>(t.batch_size) * train_->dim);
  batch_y_.resize(t.batch_size);
  next_x_.resize(batch_x_.size());
  next_y_.resize(batch_y_.size());
  next_cursor_ = -1;
  if (train_->size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", options_.worker_index,
                     " has no training examples in its partition"));
  }
  const absl::Time begin = absl::Now();
  stats_.Start(begin);
  RETURN_IF_ERROR(WaitForWarmstart());
  RETURN_IF_ERROR(client_->Pull(buffers_.params.data(), &buffers_.versions));
  backend_->ParamsChanged();
  stats_.AddWaitPull(absl::Now() - begin);
  return absl::OkStatus();
}

absl::Status DownpourLoop::RunSteps() {
  const TrainingSection& t = options_.training;
  // training.epochs: the epochs follow the data parts as they move (steps
  // taken on each set count as that set's share of an epoch).
  EpochBudget budget(t.epochs, t.batch_size, train_->size());
  int64_t total = TotalSteps(budget);
  stats_.SetPlannedSteps(total);
  SPDLOG_LOGGER_INFO(
      L(),
      "training {} steps of {} examples on {} ({} train / {} test examples)",
      total, t.batch_size, backend_->device(), train_->size(),
      test_ == nullptr ? 0 : test_->size());
  absl::Status status;
  int64_t cursor = 0;
  std::vector<int> order;
  int64_t epoch = 0, next_epoch_step = 0;
  for (int64_t step = 0; step < total && !stop_.load(); ++step) {
    AdoptNextTrainingData(step, &budget, &total, &next_epoch_step);
    if (step == next_epoch_step) {
      order = EpochOrder(train_->size(),
                         t.seed + 1000003ULL * options_.worker_index +
                             static_cast<uint64_t>(epoch++));
      cursor = 0;
      next_epoch_step =
          step + (train_->size() + t.batch_size - 1) / t.batch_size;
    }
    if (!(status = fetcher_->BeforeStep(step)).ok()) break;
    const absl::Time begin = absl::Now();
    status = Step(step, order, &cursor);
    if (status.ok() && t.eval_every_steps > 0 &&
        (step + 1) % t.eval_every_steps == 0) {
      // Layerwise, the groups' pulls still write params: wait for all.
      status = fetcher_->AwaitParams(step + 1);
      if (status.ok()) status = Evaluate(fetcher_->EvalParams());
    }
    const absl::Duration waited = fetcher_->TakeParamsWait();
    stats_.AddStepTime(absl::Now() - begin - waited, waited);
    // Stop() while a step waited for its parameters: nothing of it left.
    if (absl::IsCancelled(status) && stop_.load()) return absl::OkStatus();
    if (!status.ok()) break;
    budget.StepTaken();
    if (!(status = fetcher_->AfterStep(step, total)).ok()) break;
    stats_.UpdateRates();
  }
  return status;
}

absl::Status DownpourLoop::Finish() {
  if (!options_.no_communication) {
    const absl::Time begin = absl::Now();
    RETURN_IF_ERROR(client_->Pull(buffers_.params.data(), &buffers_.versions));
    backend_->ParamsChanged();
    stats_.AddWaitPull(absl::Now() - begin);
  }
  RETURN_IF_ERROR(Evaluate(buffers_.params.data()));
  stats_.UpdateRates();
  const WorkerStats s = stats_.Finish();
  SPDLOG_LOGGER_INFO(
      L(),
      "finished after {} steps ({} pushes applied, {} steps refused by a "
      "ps's push guard, {} fresh parameter sets): test "
      "accuracy {:.4f}, {:.0f} applied examples/s; time computing {:.0f}%, "
      "waiting for pulls {:.0f}%, for pushes {:.0f}%; staleness p50 {:.0f}, "
      "p99 {:.0f}, max {:.0f}, mean {:.2f}",
      s.step, s.pushes, s.refused_steps, s.pulls, s.accuracy,
      s.examples_per_sec, 100 * s.share_compute, 100 * s.share_wait_pull,
      100 * s.share_wait_push, s.staleness_p50, s.staleness_p99,
      s.staleness_max, s.mean_staleness);
  return absl::OkStatus();
}

absl::Status DownpourLoop::Run() {
  RETURN_IF_ERROR(Prepare());
  fetcher_->Start();
  absl::Status status = RunSteps();
  // Send what is owed, wait until every push has ended, stop the fetcher's
  // threads.
  const absl::Status flushed = fetcher_->Flush();
  if (status.ok()) status = flushed;
  RETURN_IF_ERROR(status);
  return Finish();
}

}  // namespace downpour::worker

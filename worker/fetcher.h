// The interface behind which the Downpour loop keeps its parameters fresh and
// hands its gradients over: one class per training.fetch mode, chosen once by
// MakeFetcher (worker/fetcher_factory.h) as MakeBackend chooses the compute.
//
//   after_push (and bsp)  worker/fetcher_after_push.h: waits for the pushes,
//                         then pulls on the compute thread.
//   overlap               worker/fetcher_overlap.h: a fetch thread fills a
//                         back buffer, swapped in at a step boundary.
//   layerwise             worker/fetcher_layerwise.h: send threads push and
//                         pull each group of blocks as backprop finishes it.
//   communication off     worker/fetcher_factory.cc: applies the gradient
//                         locally.
//   training.mode easgd   worker/easgd_fetcher.h: local steps, an elastic
//                         exchange with the center every easgd_tau steps.
//
// The loop runs a step as a list of calls (DownpourLoop::Run):
//   fetcher->BeforeStep(step);            // fetch-if-due, errors seen
//   fetcher->LossAndGradient(step, ...);  // compute
//   fetcher->TakeGradient();              // into the next push
//   fetcher->AfterStep(step, total);      // push-if-due (pull-if-due)
// and ends the run with fetcher->Flush().
#ifndef DOWNPOUR_WORKER_FETCHER_H_
#define DOWNPOUR_WORKER_FETCHER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "worker/compute_backend.h"
#include "worker/loop_stats.h"
#include "worker/ps_client.h"

namespace downpour::worker {

// The compute thread's parameters and gradient, owned by the loop. Only the
// compute thread touches them, except where a fetcher says which of its
// threads may (layerwise: a send thread, in the blocks of its group).
struct StepBuffers {
  std::vector<float> params;       // the front buffer compute reads
  std::vector<uint64_t> versions;  // block versions of params
  std::vector<float> grad;         // this step's gradient
};

// What a fetcher works with, borrowed from the loop: everything pointed to
// outlives the fetcher.
struct FetchContext {
  const ModelSpec* spec = nullptr;
  ComputeBackend* backend = nullptr;
  PsClient* client = nullptr;
  StepBuffers* buffers = nullptr;
  LoopStats* stats = nullptr;
  const std::atomic<bool>* stop = nullptr;  // set by DownpourLoop::Stop()
  TrainingSection training;
  // optimizer.max_gradient_value: a larger gradient value is never pushed.
  double max_gradient_value = 1e6;
  int worker_index = 0;  // for logs
  // Communication off: the rate of the worker's local update.
  double local_learning_rate = 0.05;
  // training.fetch layerwise: floats per group (0: half the model).
  int64_t layer_group_floats = 0;
  // training.mode easgd: the rule of the worker's local steps, and the
  // workers in the job (easgd_alpha 0 is 0.9 / num_workers).
  OptimizerSection optimizer;
  int num_workers = 1;
};

// The first error of a fetcher's paths (fetch, pushes, send threads), kept
// for the compute thread. Thread-safe.
class FirstError {
 public:
  // Keeps `status` unless an error is kept already.
  void Set(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = status;
  }
  absl::Status get() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return error_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// Called on the compute thread only; an implementation may run threads of its
// own, which it starts in Start() and stops in Flush() (or its destructor).
class Fetcher {
 public:
  explicit Fetcher(const FetchContext& context) : ctx_(context) {}
  virtual ~Fetcher();
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  // The run's first pull filled the buffers (params, versions, grad sized):
  // starts the fetcher's threads. Called once, before the first step.
  virtual void Start() {}

  // Before step `step` computes: counts the acknowledgements in, swaps in
  // parameters that arrived, asks for a fetch that is due. A non-OK status
  // (the first error of a fetch or push) ends the run with it.
  virtual absl::Status BeforeStep(int64_t step) = 0;

  // The step's loss, and its gradient into buffers->grad on buffers->params
  // and this batch (ComputeBackend::LossAndGradient's arguments). *bad: "" or
  // what is wrong with the gradient (CheckGradient); a bad step is never
  // pushed. A non-OK status ends the run (Cancelled once Stop() is called
  // while the step waits for its parameters). The default: the backend's
  // LossAndGradient over the whole vector.
  virtual absl::StatusOr<float> LossAndGradient(int64_t step, const float* x,
                                                const float* y, int batch,
                                                std::string* bad);

  // The good step's gradient is final: summed into the next push, or applied.
  virtual void TakeGradient() = 0;

  // Blocks until buffers->params hold the values step `step` computes on (the
  // loop evaluates them). Cancelled once Stop() is called, or the first error.
  virtual absl::Status AwaitParams(int64_t step) { return absl::OkStatus(); }

  // The parameters an evaluation reads once AwaitParams returned OK: the
  // front buffer, or (easgd) the center.
  virtual const float* EvalParams() const {
    return ctx_.buffers->params.data();
  }

  // The time the compute thread waited for parameters since the last call,
  // inside LossAndGradient and AwaitParams: counted as waiting for pulls.
  virtual absl::Duration TakeParamsWait() { return absl::ZeroDuration(); }

  // After step `step` of `total` was taken: hands off the push that is due
  // (training.n_push) and pulls when due. Non-OK: the first error.
  virtual absl::Status AfterStep(int64_t step, int64_t total) = 0;

  // Sends what is owed, waits until every push has ended and stops the
  // fetcher's threads. Returns the first error of the run's fetches and
  // pushes.
  virtual absl::Status Flush() = 0;

  // What a diverged step's error says was pushed of it.
  virtual const char* DivergedNote() const {
    return "; nothing of this step was pushed";
  }

 protected:
  // "" if every value of buffers->grad[begin, end) is finite and within
  // max_gradient_value, else what is wrong.
  std::string CheckGradient(int64_t begin, int64_t end) const;
  absl::Status error() const { return error_.get(); }

  const FetchContext ctx_;
  FirstError error_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_FETCHER_H_

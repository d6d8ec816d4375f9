// training.mode easgd: elastic averaging SGD (Zhang, Choromanska and LeCun,
// "Deep learning with Elastic Averaging SGD", 2015), asynchronous form.
//
// The worker keeps its own copy x of the parameters (StepBuffers::params)
// and steps it locally with optimizer.type (server/optimizer.h, the same
// rule and hyper-parameters the ps would apply; the lr schedule and warmup
// run over the worker's own steps). Every training.easgd_tau steps it
// exchanges with the center c, the ps's parameters:
//
//   pull c;  d = alpha * (x - c);  x -= d;  push -d   (the ps: c += d)
//
// The ps applies an easgd push with plain SGD at learning rate 1 and no
// other factor (DenseOptimizer), so c -= 1 * (-d) adds the elastic
// difference as it is, through the ordinary push path: sequence numbers,
// exactly-once application, replication and checkpoints are Downpour's.
// Evaluations read the center (pulled for them), never the local copy.
#ifndef DOWNPOUR_WORKER_EASGD_FETCHER_H_
#define DOWNPOUR_WORKER_EASGD_FETCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "server/optimizer.h"
#include "worker/fetcher.h"

namespace downpour::worker {

// alpha of an exchange: training.easgd_alpha, or 0.9 / num_workers when it
// is 0 (the paper's beta = 0.9 shared by the workers).
double EasgdAlpha(const TrainingSection& training, int num_workers);

// Single-threaded: the compute thread's; the exchange is waited for there.
class EasgdFetcher : public Fetcher {
 public:
  explicit EasgdFetcher(const FetchContext& context);

  // The local rule's state, sized to the first pull's parameters.
  void Start() override;
  absl::Status BeforeStep(int64_t step) override { return error(); }
  // x -= the local rule's step on this gradient; nothing is pushed.
  void TakeGradient() override;
  // Pulls the center into the evaluation buffer.
  absl::Status AwaitParams(int64_t step) override;
  const float* EvalParams() const override { return center_.data(); }
  // Exchanges with the center every easgd_tau steps.
  absl::Status AfterStep(int64_t step, int64_t total) override;
  // Exchanges the steps since the last exchange, if any.
  absl::Status Flush() override;
  const char* DivergedNote() const override {
    return "; the local copy diverged, and only what earlier exchanges moved "
           "reached the center";
  }

 private:
  // Pulls the center into center_; false on error (kept in error_).
  bool PullCenter();
  // One exchange: pull c, x -= alpha (x - c), push the negated difference.
  bool Exchange();

  const double alpha_;
  std::unique_ptr<server::Optimizer> rule_;  // null: Create failed (error_)
  std::vector<float> state_;                 // the local rule's state
  std::vector<float> center_;                // the center as last pulled
  std::vector<uint64_t> center_versions_;
  std::vector<float> push_;   // -alpha (x - c), the exchange's push
  int64_t local_steps_ = 0;   // steps applied to x (the local rule's t)
  int64_t unsent_steps_ = 0;  // steps since the last exchange
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_EASGD_FETCHER_H_

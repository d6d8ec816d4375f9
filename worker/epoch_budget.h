// How many steps a worker trains for when training.epochs sets its budget and
// the coordinator moves data parts to it or away from it during the run.
//
//   EpochBudget budget(/*epochs=*/10, /*batch_size=*/64, train.size());
//   for (int64_t step = 0; step < budget.total_steps(); ++step) {
//     if (parts changed) budget.SetExamples(new_train.size());
//     ... compute the step ...
//     budget.StepTaken();
//   }
#ifndef DOWNPOUR_WORKER_EPOCH_BUDGET_H_
#define DOWNPOUR_WORKER_EPOCH_BUDGET_H_

#include <cstdint>

namespace downpour::worker {

// Each step taken counts 1 / (steps per epoch of the set it ran on) of an
// epoch, so the epochs done stay right across any number of changes, whether
// parts are adopted or given back; the steps left are the epochs left over
// the current set. Without a change the total is ceil(examples / batch_size)
// * epochs, as before. Not thread-safe: the compute thread owns it.
class EpochBudget {
 public:
  // `epochs` passes over a set of `examples` examples, `batch_size` a step.
  // REQUIRES: epochs >= 0, batch_size >= 1, examples >= 0.
  EpochBudget(int epochs, int batch_size, int64_t examples);

  // A step was taken on the current set.
  void StepTaken();
  // From the next step on, the worker trains on a set of `examples` examples
  // (its data parts changed). The epochs done so far stay done.
  void SetExamples(int64_t examples);

  // Steps taken so far plus the steps left: where the run ends.
  int64_t total_steps() const;
  int64_t steps_taken() const { return steps_taken_; }
  // Epochs done, fractions of an epoch included.
  double epochs_done() const;

 private:
  int64_t StepsPerEpoch(int64_t examples) const;

  const int epochs_;
  const int batch_size_;
  int64_t steps_per_epoch_;       // of the current set
  int64_t steps_taken_ = 0;       // on every set
  int64_t steps_on_set_ = 0;      // on the current set
  double epochs_before_set_ = 0;  // done on earlier sets
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_EPOCH_BUDGET_H_

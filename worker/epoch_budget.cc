// A worker's step budget in epochs, across changes of its data parts.
#include "worker/epoch_budget.h"

#include <algorithm>
#include <cmath>

namespace downpour::worker {

EpochBudget::EpochBudget(int epochs, int batch_size, int64_t examples)
    : epochs_(epochs),
      batch_size_(std::max(1, batch_size)),
      steps_per_epoch_(StepsPerEpoch(examples)) {}

int64_t EpochBudget::StepsPerEpoch(int64_t examples) const {
  // A set smaller than a batch still takes a step an epoch.
  return std::max<int64_t>(1, (examples + batch_size_ - 1) / batch_size_);
}

void EpochBudget::StepTaken() {
  ++steps_taken_;
  ++steps_on_set_;
}

void EpochBudget::SetExamples(int64_t examples) {
  epochs_before_set_ += static_cast<double>(steps_on_set_) /
                        static_cast<double>(steps_per_epoch_);
  steps_on_set_ = 0;
  steps_per_epoch_ = StepsPerEpoch(examples);
}

double EpochBudget::epochs_done() const {
  return epochs_before_set_ + static_cast<double>(steps_on_set_) /
                                  static_cast<double>(steps_per_epoch_);
}

int64_t EpochBudget::total_steps() const {
  // In steps of the current set; exact integers while the set never changed.
  // The small slack keeps a whole number of steps that rounding pushed a hair
  // above an integer from costing one more step.
  const double left =
      (epochs_ - epochs_before_set_) * static_cast<double>(steps_per_epoch_) -
      static_cast<double>(steps_on_set_);
  const int64_t steps_left =
      left <= 0 ? 0 : static_cast<int64_t>(std::ceil(left - 1e-6));
  return steps_taken_ + steps_left;
}

}  // namespace downpour::worker

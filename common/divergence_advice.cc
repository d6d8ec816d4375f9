// Likely causes of a diverged run, and the knobs that help.
#include "common/divergence_advice.h"

#include "absl/strings/str_cat.h"

namespace downpour {

DivergenceAdvice AdviseOnDivergence(const OptimizerSection& optimizer,
                                    int num_workers) {
  DivergenceAdvice advice;
  advice.causes = absl::StrCat("optimizer.learning_rate too high (now ",
                               optimizer.learning_rate, ")");
  advice.knobs = absl::StrCat("lower optimizer.learning_rate (e.g. to ",
                              optimizer.learning_rate / 10, ")");
  if (optimizer.type == OptimizerType::kMomentum) {
    absl::StrAppend(&advice.causes, ", optimizer.momentum too high for ",
                    num_workers, " worker(s) (now ", optimizer.momentum,
                    "; asynchrony adds momentum of its own)");
    absl::StrAppend(&advice.knobs, ", lower optimizer.momentum");
  }
  if (num_workers > 1) {
    absl::StrAppend(&advice.causes, ", or stale gradients from ", num_workers,
                    " asynchronous workers");
    absl::StrAppend(&advice.knobs, ", or use fewer workers");
  }
  return advice;
}

}  // namespace downpour

// What to tell a user whose training diverged or collapsed to chance: the
// likely causes and the config knobs to turn, from the job's optimizer and
// number of workers. Shared by the worker (NaN/Inf at a step) and the
// launcher (chance-level final accuracy), so both name the same knobs.
#ifndef DOWNPOUR_COMMON_DIVERGENCE_ADVICE_H_
#define DOWNPOUR_COMMON_DIVERGENCE_ADVICE_H_

#include <string>

#include "common/config.h"

namespace downpour {

struct DivergenceAdvice {
  // "optimizer.learning_rate too high (now 0.01), optimizer.momentum too high
  // for 4 worker(s) (now 0.9; ...), or stale gradients from 4 asynchronous
  // workers": the momentum part only for type momentum, the staleness part
  // only with more than one worker.
  std::string causes;
  // "lower optimizer.learning_rate (e.g. to 0.001), lower optimizer.momentum,
  // or use fewer workers", with the same conditions; lower case.
  std::string knobs;
};

DivergenceAdvice AdviseOnDivergence(const OptimizerSection& optimizer,
                                    int num_workers);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_DIVERGENCE_ADVICE_H_

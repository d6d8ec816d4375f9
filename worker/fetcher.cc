// Fetcher: the whole-vector step and the gradient check every mode shares.
#include "worker/fetcher.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/float_check.h"

namespace downpour::worker {

Fetcher::~Fetcher() = default;

absl::StatusOr<float> Fetcher::LossAndGradient(int64_t step, const float* x,
                                               const float* y, int batch,
                                               std::string* bad) {
  StepBuffers& b = *ctx_.buffers;
  absl::StatusOr<float> loss = ctx_.backend->LossAndGradient(
      b.params.data(), x, y, batch, b.grad.data());
  if (loss.ok()) *bad = CheckGradient(0, ctx_.spec->num_params());
  return loss;
}

std::string Fetcher::CheckGradient(int64_t begin, int64_t end) const {
  const std::vector<float>& grad = ctx_.buffers->grad;
  const double max_value = ctx_.max_gradient_value;
  const float bound = max_value > 0 ? static_cast<float>(max_value)
                                    : std::numeric_limits<float>::max();
  const int64_t at =
      begin + FirstOutside(grad.data() + begin, end - begin, bound);
  if (at == end) return "";
  const float g = grad[at];
  return std::isfinite(g)
             ? absl::StrCat("gradient holds ", g,
                            ", beyond optimizer.max_gradient_value ", max_value)
             : absl::StrCat("gradient holds ", g);
}

}  // namespace downpour::worker

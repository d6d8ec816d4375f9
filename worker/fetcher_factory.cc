// MakeFetcher, and the fetcher of a run with communication off.
#include "worker/fetcher_factory.h"

#include <cstdint>
#include <vector>

#include "common/config.h"
#include "worker/easgd_fetcher.h"
#include "worker/fetcher_after_push.h"
#include "worker/fetcher_layerwise.h"
#include "worker/fetcher_overlap.h"

namespace downpour::worker {
namespace {

// Communication off: the worker applies its own gradient, never fetches.
// Single-threaded.
class LocalFetcher : public Fetcher {
 public:
  explicit LocalFetcher(const FetchContext& context) : Fetcher(context) {}

  absl::Status BeforeStep(int64_t step) override { return absl::OkStatus(); }
  void TakeGradient() override {
    std::vector<float>& params = ctx_.buffers->params;
    const std::vector<float>& grad = ctx_.buffers->grad;
    const float lr = static_cast<float>(ctx_.local_learning_rate);
    for (size_t i = 0; i < params.size(); ++i) params[i] -= lr * grad[i];
    ctx_.backend->ParamsChanged();
    // The step's gradient was applied right here.
    ctx_.stats->CountLocalExamples(ctx_.training.batch_size);
  }
  absl::Status AfterStep(int64_t step, int64_t total) override {
    return absl::OkStatus();
  }
  absl::Status Flush() override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<Fetcher> MakeFetcher(const FetchContext& context,
                                     bool no_communication) {
  if (no_communication) return std::make_unique<LocalFetcher>(context);
  if (context.training.mode == TrainingMode::kEasgd) {
    return std::make_unique<EasgdFetcher>(context);
  }
  if (context.training.consistency == ConsistencyMode::kBsp) {
    return std::make_unique<AfterPushFetcher>(context);
  }
  switch (context.training.fetch) {
    case FetchMode::kAfterPush:
      return std::make_unique<AfterPushFetcher>(context);
    case FetchMode::kOverlap:
      return std::make_unique<OverlapFetcher>(context);
    case FetchMode::kLayerwise:
      return std::make_unique<LayerwiseFetcher>(context);
  }
  return std::make_unique<OverlapFetcher>(context);  // not reached
}

}  // namespace downpour::worker

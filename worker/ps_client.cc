// PsClient's default for the block-wise push of training.fetch layerwise.
#include "worker/ps_client.h"

namespace downpour::worker {

absl::Status PsClient::PushPullBlocks(const float* grad,
                                      const std::vector<uint64_t>& versions,
                                      const std::vector<uint32_t>& ids,
                                      PushReport* report, float* params,
                                      std::vector<uint64_t>* fresh) {
  return absl::UnimplementedError(
      "this ps client cannot push and pull some blocks alone (training.fetch "
      "layerwise); use training.fetch after_push");
}

}  // namespace downpour::worker

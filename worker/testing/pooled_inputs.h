// A PooledBatch (worker/compute_backend.h) with its arrays owned, for the
// tests of the backends' pooled step.
#ifndef DOWNPOUR_WORKER_TESTING_POOLED_INPUTS_H_
#define DOWNPOUR_WORKER_TESTING_POOLED_INPUTS_H_

#include <cstdint>
#include <vector>

#include "worker/compute_backend.h"

namespace downpour::worker {

struct PooledInputs {
  std::vector<int64_t> offsets;
  std::vector<uint32_t> slot;
  std::vector<float> value;
  std::vector<uint16_t> field;
  std::vector<float> embeddings;
  int64_t embedding_rows = 0;
  int fields = 0;
  int dim = 0;

  // Points into the vectors above: valid while they are not resized.
  PooledBatch batch() const {
    PooledBatch b;
    b.offsets = offsets.data();
    b.slot = slot.data();
    b.value = value.data();
    b.field = field.data();
    b.embeddings = embeddings.data();
    b.embedding_rows = embedding_rows;
    b.fields = fields;
    b.dim = dim;
    return b;
  }
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_TESTING_POOLED_INPUTS_H_

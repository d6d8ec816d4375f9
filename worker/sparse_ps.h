// What a sparse model's worker loop needs from the ps: the dense blocks (a
// sparse_linear model's bias), rows of a sparse table by shard, and a push of
// both at once. GrpcPsClient implements it over gRPC; tests implement it over
// in-process shards.
#ifndef DOWNPOUR_WORKER_SPARSE_PS_H_
#define DOWNPOUR_WORKER_SPARSE_PS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/push_view.h"
#include "worker/push_pipeline.h"

namespace downpour::worker {

class SparsePs {
 public:
  virtual ~SparsePs() = default;

  // The dense blocks, as PsClient::Pull.
  virtual absl::Status Pull(float* params, std::vector<uint64_t>* versions) = 0;

  // The values of keys[s] (ps s's keys of table `table`, sorted and unique)
  // into (*values)[s]: keys[s].size() * dim floats. Creates no row.
  virtual absl::Status PullRows(uint32_t table, int dim,
                                const std::vector<std::vector<uint64_t>>& keys,
                                std::vector<std::vector<float>>* values) = 0;

  // The dense gradient `grad` at `versions` and rows[s], the sparse rows of
  // ps s, applied once; waited for.
  virtual absl::Status PushWithRows(
      const float* grad, const std::vector<uint64_t>& versions,
      const std::vector<std::vector<wire::SparseRef>>& rows,
      StalenessHistogram* staleness) = 0;

  // The placement map's ps of each hash bucket (entry b: bucket b's ps, -1
  // for none), or null when the placement names no buckets: then bucket b
  // is ps b % shards, the coordinator's rule (common/sparse_keys.h).
  virtual std::shared_ptr<const std::vector<int>> BucketOwners() const {
    return nullptr;
  }
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_SPARSE_PS_H_

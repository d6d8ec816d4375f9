// What a sparse model's worker loop needs from the ps: the dense blocks (a
// sparse_linear model's bias), rows of a sparse table by shard, and a push of
// both at once. GrpcPsClient implements it over gRPC; tests implement it over
// in-process shards.
#ifndef DOWNPOUR_WORKER_SPARSE_PS_H_
#define DOWNPOUR_WORKER_SPARSE_PS_H_

#include <cstdint>
#include <memory>
#include <utility>
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

  // A sparse table to pull and its row width.
  struct TableRows {
    uint32_t table = 0;
    int dim = 1;
  };

  // The values of keys[s] (ps s's keys, sorted and unique) in each of
  // `tables` into (*values)[t][s]: keys[s].size() * tables[t].dim floats,
  // every table in one request per ps (fm's weights and embeddings in one
  // round trip). Creates no row.
  virtual absl::Status PullTables(
      const std::vector<TableRows>& tables,
      const std::vector<std::vector<uint64_t>>& keys,
      std::vector<std::vector<std::vector<float>>>* values) = 0;

  // PullTables of one table: (*values)[s] for ps s.
  absl::Status PullRows(uint32_t table, int dim,
                        const std::vector<std::vector<uint64_t>>& keys,
                        std::vector<std::vector<float>>* values) {
    std::vector<std::vector<std::vector<float>>> all;
    absl::Status status = PullTables({{table, dim}}, keys, &all);
    if (status.ok()) *values = std::move(all[0]);
    return status;
  }

  // The dense gradient `grad` at `versions` and rows[s], the sparse rows of
  // ps s, applied once; waited for.
  virtual absl::Status PushWithRows(
      const float* grad, const std::vector<uint64_t>& versions,
      const std::vector<std::vector<wire::SparseRef>>& rows,
      PushReport* report) = 0;

  // PushWithRows, and the dense blocks' values and versions right after it
  // was applied into params and *fresh (spec.blocks().size() entries): the
  // pull a step would make next, answered with the push in one round trip
  // (PushRequest.reply_values; a retried duplicate: the values as the shard
  // holds them then). `fresh` must not be &versions. The default pushes,
  // then pulls.
  virtual absl::Status PushWithRowsAndPull(
      const float* grad, const std::vector<uint64_t>& versions,
      const std::vector<std::vector<wire::SparseRef>>& rows, PushReport* report,
      float* params, std::vector<uint64_t>* fresh) {
    absl::Status pushed = PushWithRows(grad, versions, rows, report);
    if (!pushed.ok()) return pushed;
    return Pull(params, fresh);
  }

  // The placement map's ps of each hash bucket (entry b: bucket b's ps, -1
  // for none), or null when the placement names no buckets: then bucket b
  // is ps b % shards, the coordinator's rule (common/sparse_keys.h).
  virtual std::shared_ptr<const std::vector<int>> BucketOwners() const {
    return nullptr;
  }
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_SPARSE_PS_H_

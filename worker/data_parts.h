// Which parts of the training split a worker trains on, and the training set
// they make. The coordinator hands a worker its own part at registration and,
// in later RegisterWorker and Heartbeat responses, the parts of dead workers it
// adopts (or takes them back when their owner returns).
#ifndef DOWNPOUR_WORKER_DATA_PARTS_H_
#define DOWNPOUR_WORKER_DATA_PARTS_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/dataset.h"

namespace downpour::worker {

// Thread-safe.
class DataParts {
 public:
  // Trains on `parts` of `num_parts` of `all` (see PartitionParts). `all` is
  // borrowed and must outlive this object and the sets it returns.
  DataParts(const Dataset* all, std::vector<int> parts, int num_parts);

  DataParts(const DataParts&) = delete;
  DataParts& operator=(const DataParts&) = delete;

  // Adopts `parts` of `num_parts`. Returns the training set they make when
  // they differ from the current parts; nullptr when they are the same, or
  // empty (a response that carries no partition), in which case nothing
  // changes.
  std::shared_ptr<const Dataset> Update(const std::vector<int>& parts,
                                        int num_parts) ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<int> parts() const ABSL_LOCKS_EXCLUDED(mu_);
  // The training set of the current parts.
  std::shared_ptr<const Dataset> train() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const Dataset* const all_;

  mutable absl::Mutex mu_;
  std::vector<int> parts_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Dataset> train_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_DATA_PARTS_H_

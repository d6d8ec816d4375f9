// A worker's data parts: cut the training set again only when they change.
#include "worker/data_parts.h"

#include <utility>

namespace downpour::worker {

DataParts::DataParts(const Dataset* all, std::vector<int> parts, int num_parts)
    : all_(all),
      parts_(std::move(parts)),
      train_(std::make_shared<const Dataset>(
          PartitionParts(*all_, parts_, num_parts))) {}

std::shared_ptr<const Dataset> DataParts::Update(const std::vector<int>& parts,
                                                 int num_parts) {
  absl::MutexLock lock(&mu_);
  if (parts.empty() || parts == parts_) return nullptr;
  parts_ = parts;
  train_ =
      std::make_shared<const Dataset>(PartitionParts(*all_, parts_, num_parts));
  return train_;
}

std::vector<int> DataParts::parts() const {
  absl::MutexLock lock(&mu_);
  return parts_;
}

std::shared_ptr<const Dataset> DataParts::train() const {
  absl::MutexLock lock(&mu_);
  return train_;
}

}  // namespace downpour::worker

// ReplicaLog: the generation, the changed blocks and the kept updates of a
// primary's next replica cut.
#include "server/replication/replica_log.h"

#include <algorithm>

#include "common/wire_encoding.h"

namespace downpour::server {

std::vector<ReplicaCut::Check> ChecksOf(const BlockStore& store) {
  std::vector<ReplicaCut::Check> checks;
  for (uint32_t id : store.block_ids()) {
    ReplicaCut::Check check{id, 0, 0};
    check.crc32c = store.BlockCrc32c(id, &check.version);
    checks.push_back(check);
  }
  return checks;
}

ReplicaLog::ReplicaLog(size_t num_blocks, int state_slots)
    : state_slots_(state_slots),
      is_dirty_(num_blocks, 0),
      is_logged_(num_blocks, 0) {}

void ReplicaLog::SetLogging(bool on) {
  logging_ = on;
  if (!logging_) DropLog();
}

void ReplicaLog::Log(const BlockStore::Replayed& update, int64_t length,
                     const void* data) {
  ++generation_;  // as Changed
  const uint32_t id = update.id;
  const int64_t bytes =
      length * static_cast<int64_t>(BytesPerElement(update.encoding));
  const int64_t block_bytes =
      length * static_cast<int64_t>(sizeof(float)) * (1 + state_slots_);
  const int64_t more_block_bytes = is_logged_[id] ? 0 : block_bytes;
  if (log_bytes_ + bytes >= logged_block_bytes_ + more_block_bytes) {
    // The blocks themselves are no more bytes than their updates.
    DropLog();
    MarkDirty(id);
    return;
  }
  ReplicaUpdate logged;
  logged.update = update;
  logged.update.data = nullptr;
  logged.update.bytes = 0;
  logged.gradient.assign(static_cast<const char*>(data),
                         static_cast<size_t>(bytes));
  log_.push_back(std::move(logged));
  log_bytes_ += bytes;
  if (!is_logged_[id]) {
    is_logged_[id] = 1;
    logged_block_bytes_ += block_bytes;
  }
}

void ReplicaLog::DropLog() {
  for (const ReplicaUpdate& logged : log_) MarkDirty(logged.update.id);
  ClearLog();
}

void ReplicaLog::ClearLog() {
  for (const ReplicaUpdate& logged : log_) is_logged_[logged.update.id] = 0;
  log_.clear();
  log_bytes_ = 0;
  logged_block_bytes_ = 0;
}

void ReplicaLog::Changed(int64_t block) {
  ++generation_;
  if (block < 0 || block >= static_cast<int64_t>(is_dirty_.size())) return;
  MarkDirty(static_cast<uint32_t>(block));
}

void ReplicaLog::MarkDirty(uint32_t block) {
  if (!is_dirty_[block]) {
    is_dirty_[block] = 1;
    dirty_.push_back(block);
  }
}

const std::vector<uint32_t>& ReplicaLog::SortedDirty() {
  std::sort(dirty_.begin(), dirty_.end());
  return dirty_;
}

std::vector<ReplicaUpdate> ReplicaLog::TakeUpdates(bool full) {
  std::vector<ReplicaUpdate> updates;
  if (!full) {
    updates.reserve(log_.size());
    for (ReplicaUpdate& logged : log_) {
      if (!is_dirty_[logged.update.id]) updates.push_back(std::move(logged));
    }
  }
  ClearLog();
  return updates;
}

void ReplicaLog::ClearDirty() {
  for (uint32_t id : dirty_) is_dirty_[id] = 0;
  dirty_.clear();
}

}  // namespace downpour::server

// MovedBlocks: the blocks a shard handed on, kept for the last pass.
#include "server/moved_blocks.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sparse_keys.h"
#include "server/sparse_rows_proto.h"

namespace downpour::server {

void MovedBlocks::Park(BlockStore::BlockSnapshot block) {
  const uint32_t id = block.id;
  blocks_[id] = std::make_unique<BlockStore::BlockSnapshot>(std::move(block));
}

absl::Status MovedBlocks::Check(const char* op, uint32_t id) const {
  if (blocks_.count(id) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      kBucketMovedMessage, ": ", op, ": block ", id,
      " moved to another ps; ps ", index_,
      " no longer holds it: re-read the placement and send it there"));
}

absl::Status MovedBlocks::Copy(const std::vector<uint32_t>& ids,
                               int64_t max_bytes,
                               proto::CopyBlocksResponse* response) const {
  int64_t bytes = 0;
  for (uint32_t id : ids) {
    auto it = blocks_.find(id);
    if (it == blocks_.end() || it->second == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "copy blocks: ps ", index_, " holds no moved copy of block ", id,
          it == blocks_.end()
              ? " (the placement did not move it away from this ps)"
              : " (released: no move holds it any more)"));
    }
    const BlockStore::BlockSnapshot& block = *it->second;
    const int64_t size = static_cast<int64_t>(
        (block.values.size() + block.state.size()) * sizeof(float));
    if (response->blocks_size() > 0 && bytes + size > max_bytes) break;
    FromBlock(block, response->add_blocks());
    bytes += size;
  }
  return absl::OkStatus();
}

int MovedBlocks::Release(const std::set<uint32_t>& keep) {
  int released = 0;
  for (auto& [id, block] : blocks_) {
    if (block == nullptr || keep.count(id) > 0) continue;
    block.reset();
    ++released;
  }
  return released;
}

}  // namespace downpour::server

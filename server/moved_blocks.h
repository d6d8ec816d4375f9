// The dense blocks a shard handed to another ps in a live move
// (docs/OPERATIONS.md, "Growing and shrinking the ps set"). When the
// placement moves a block away, the shard keeps it as it stood then: the
// destination's last pass copies it (CopyBlocks), and no push changes it any
// more. Pulls and pushes that name it are refused "bucket moved" (nothing
// applied, the sequence not used up), so the worker re-reads the placement
// and sends the block to its new owner. Once no move holds a block its copy
// is released; the refusal stays until the placement gives the block back.
// Plain; its owner (Shard) locks.
//
//   MovedBlocks moved(1);
//   moved.Park(std::move(*store.Remove(3)));  // placement moved block 3
//   RETURN_IF_ERROR(moved.Check("push", 3));  // "bucket moved: push: ..."
//   moved.Release({});                         // the move ended
#ifndef DOWNPOUR_SERVER_MOVED_BLOCKS_H_
#define DOWNPOUR_SERVER_MOVED_BLOCKS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "proto/ps.pb.h"
#include "server/block_store.h"

namespace downpour::server {

class MovedBlocks {
 public:
  // `index` names the shard in messages.
  explicit MovedBlocks(int index) : index_(index) {}

  bool empty() const { return blocks_.empty(); }
  // Block `block.id` moved away, as it stands in `block`.
  void Park(BlockStore::BlockSnapshot block);
  // The placement gives block `id` to this shard again.
  void Returned(uint32_t id) { blocks_.erase(id); }
  // FailedPrecondition, starting with kBucketMovedMessage, when block `id`
  // moved away; `op` ("pull", "push") begins the rest of the message.
  absl::Status Check(const char* op, uint32_t id) const;
  // Blocks `ids` as they stood when they moved, into `response`, in that
  // order, as many as fit `max_bytes` (at least one; the caller asks again
  // for the rest): FailedPrecondition naming the first that this shard
  // holds no copy of.
  absl::Status Copy(const std::vector<uint32_t>& ids, int64_t max_bytes,
                    proto::CopyBlocksResponse* response) const;
  // The copies of blocks not in `keep` are released (their refusal stays).
  // Returns how many.
  int Release(const std::set<uint32_t>& keep);

 private:
  const int index_;
  // By id; null once released.
  std::map<uint32_t, std::unique_ptr<BlockStore::BlockSnapshot>> blocks_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_MOVED_BLOCKS_H_

// The ps protocol's bulk messages (PushRequest, PullResponse of
// proto/ps.proto) written and read as gRPC byte buffers directly, so block
// payloads are not copied through protobuf strings. The views they are read
// into (PushView, BlockRef) are plain: common/push_view.h.
//
// The bytes are exactly protobuf's wire format for those messages, so any
// protobuf client or server (psctl, a Python client generated from ps.proto)
// talks to these paths unchanged; tests check that both ways.
//
// Copies per payload byte (ByteBuffer = gRPC's message; the kernel's socket
// copies are not counted):
//   push, worker: 0 for float32 (slices point into the caller's gradient,
//     which must stay unchanged until SendPins::WaitReleased returns); the
//     encoding pass for bf16/fp16.
//   push, ps: 0 when a block's bytes arrived inside one received slice at a
//     4-byte-aligned address, else 1 (into the parse's arena). ParsePush
//     counts both.
//   pull, ps: 1 (block values straight into the reply's one slice).
//   pull, worker: 1 (from the received slices straight into the parameters).
#ifndef DOWNPOUR_RPC_WIRE_FORMAT_H_
#define DOWNPOUR_RPC_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/push_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace downpour::wire {

// Counts the data slices of pushes in flight and waits until gRPC has let go
// of all of them, so the memory they point into may change again.
// Thread-safe.
class SendPins {
 public:
  SendPins() = default;
  SendPins(const SendPins&) = delete;
  SendPins& operator=(const SendPins&) = delete;
  ~SendPins();  // waits for release

  // A slice over `size` bytes at `data`, not copied; pinned until released.
  grpc::Slice Pin(const char* data, size_t size) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until every slice Pin made has been released by gRPC.
  void WaitReleased() ABSL_LOCKS_EXCLUDED(mu_);
  // The same for at most `timeout`; false when slices are still held.
  bool WaitReleased(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Slices not released yet.
  int64_t pinned() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  static void Release(void* self);

  absl::Mutex mu_;
  int64_t pinned_ ABSL_GUARDED_BY(mu_) = 0;
};

// Serializes `push` as a PushRequest. With `pins`, float32 payloads are
// referenced in place (see SendPins); without, they are copied.
grpc::ByteBuffer SerializePush(const PushView& push, SendPins* pins);

// Where ParsePush keeps payloads it had to copy (4-byte aligned).
struct Arena {
  std::vector<std::unique_ptr<float[]>> chunks;
  char* Allocate(size_t bytes);
};

// Parses a PushRequest. Payloads point into `buffer`'s slices (which `buffer`
// keeps alive) or into `arena`. InvalidArgument for bytes that are not a
// PushRequest. Adds the payload bytes used in place / copied to the counters
// when given.
absl::Status ParsePush(const grpc::ByteBuffer& buffer, Arena* arena,
                       PushView* push, int64_t* bytes_in_place = nullptr,
                       int64_t* bytes_copied = nullptr);

// Builds a PullResponse in one slice: the caller states each block's size,
// then writes its payload where AddBlock points.
class PullReplyBuilder {
 public:
  // `payload_bytes`: an upper bound of the reply's payload bytes. `field`:
  // the blocks' field number (PullResponse.blocks; PushResponse.blocks is
  // 3, for a push answered with values).
  PullReplyBuilder(size_t num_blocks, size_t payload_bytes, uint32_t field = 1);
  // Room for block `id`'s `size` payload bytes; write them before Finish.
  char* AddBlock(uint32_t id, uint64_t version, int32_t encoding, size_t size);
  grpc::ByteBuffer Finish();
  // Bytes of the message so far.
  size_t size() const { return used_; }

 private:
  grpc::Slice slice_;
  char* base_;
  size_t capacity_;
  uint32_t field_;
  size_t used_ = 0;
};

// The bytes for a message of `payload_bytes` payload in `num_blocks` blocks,
// at most (for checks before allocating).
size_t PullReplyBound(size_t num_blocks, size_t payload_bytes);

// Reads a PullResponse: calls `block` for each block with its header and a
// function that copies its payload (`size` bytes) into `out`, straight from
// the received slices. An error from `block` ends the parse and is returned;
// InvalidArgument for bytes that are not a PullResponse.
using CopyPayload = std::function<void(char* out)>;
using BlockFn = std::function<absl::Status(const BlockRef& header,
                                           const CopyPayload& copy)>;
absl::Status ParsePullReply(const grpc::ByteBuffer& buffer,
                            const BlockFn& block);

// A PushResponse's small fields.
struct PushAck {
  std::vector<uint64_t> versions;
  bool duplicate = false;
  std::string refused;  // why the ps's push guard refused it; "" applied
};
// Reads a PushResponse: its versions, duplicate and refused into *ack, and each
// of its blocks (PushRequest.reply_values) through `block`, as ParsePullReply.
// InvalidArgument for bytes that are not a PushResponse.
absl::Status ParsePushReply(const grpc::ByteBuffer& buffer, PushAck* ack,
                            const BlockFn& block);

}  // namespace downpour::wire

#endif  // DOWNPOUR_RPC_WIRE_FORMAT_H_

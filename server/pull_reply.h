// The ParameterServer's pull reply as gRPC bytes: ps.proto's PullResponse
// written by common/wire_format's PullReplyBuilder over Shard::VisitBlocks,
// each block's values copied once, from the store into the reply's one slice.
//
// The gRPC side of a pull, kept out of the (plain) Shard; server/ps_service.cc
// answers Pull with it and tools/fuzz/ps_fuzzer.cc drives it.
#ifndef DOWNPOUR_SERVER_PULL_REPLY_H_
#define DOWNPOUR_SERVER_PULL_REPLY_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "common/push_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/ps.pb.h"
#include "rpc/server_util.h"
#include "server/shard.h"

namespace downpour::server {

// The reply to `request` from `shard`. The errors of Shard::VisitBlocks, and
// ResourceExhausted for a reply that could exceed `max_bytes` ("pull: a reply
// with 3 blocks would be 201326640 bytes, over the 67108864-byte message
// limit: ask for fewer blocks per request"), checked before anything is
// allocated or locked.
absl::StatusOr<grpc::ByteBuffer> BuildPullReply(
    const Shard& shard, const proto::PullRequest& request,
    size_t max_bytes = kMaxMessageBytes);

// The answer to a push with reply_values: `response` (versions, duplicate)
// followed by the pushed blocks' values as PushResponse.blocks, read from
// `shard` now, in the encoding of the push's first block. The errors of
// BuildPullReply.
absl::StatusOr<grpc::ByteBuffer> BuildPushReplyWithValues(
    const Shard& shard, const wire::PushView& push,
    const proto::PushResponse& response, size_t max_bytes = kMaxMessageBytes);

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PULL_REPLY_H_

// BuildPullReply: the reply sized from the model, then filled under the
// shard's lock.
#include "server/pull_reply.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "rpc/wire_format.h"

namespace downpour::server {

namespace {

// BuildPullReply's blocks under field `field`.
absl::StatusOr<grpc::ByteBuffer> BuildBlocks(const Shard& shard,
                                             const proto::PullRequest& request,
                                             size_t max_bytes, uint32_t field) {
  std::optional<wire::PullReplyBuilder> reply;
  RETURN_IF_ERROR(shard.VisitBlocks(
      request,
      [&](size_t num_blocks, size_t payload_bytes) {
        const size_t bound = wire::PullReplyBound(num_blocks, payload_bytes);
        if (bound > max_bytes) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "pull: a reply with ", num_blocks, " blocks would be ", bound,
              " bytes, over the ", max_bytes,
              "-byte message limit: ask for fewer blocks per request"));
        }
        reply.emplace(num_blocks, payload_bytes, field);
        return absl::OkStatus();
      },
      [&](const Shard::PulledBlock& block) {
        return reply->AddBlock(block.id, block.version, block.encoding,
                               block.bytes);
      }));
  return reply->Finish();
}

}  // namespace

absl::StatusOr<grpc::ByteBuffer> BuildPushReplyWithValues(
    const Shard& shard, const wire::PushView& push,
    const proto::PushResponse& response, size_t max_bytes) {
  proto::PullRequest pull;
  pull.set_placement_epoch(push.placement_epoch);
  pull.set_worker_id(push.worker_id);
  if (!push.blocks.empty()) {
    pull.set_encoding(static_cast<proto::Encoding>(push.blocks[0].encoding));
  }
  for (const wire::BlockRef& block : push.blocks) pull.add_block_ids(block.id);
  ASSIGN_OR_RETURN(grpc::ByteBuffer values,
                   BuildBlocks(shard, pull, max_bytes, /*field=*/3));
  // The small fields, then the values: one message (fields concatenate).
  std::vector<grpc::Slice> slices;
  slices.emplace_back(response.SerializeAsString());
  std::vector<grpc::Slice> value_slices;
  if (!values.Dump(&value_slices).ok()) {
    return absl::InternalError("push: could not read back its values reply");
  }
  for (grpc::Slice& s : value_slices) slices.push_back(std::move(s));
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::StatusOr<grpc::ByteBuffer> BuildPullReply(
    const Shard& shard, const proto::PullRequest& request, size_t max_bytes) {
  if (request.sparse_size() > 0) {
    // Sparse rows: a plain message of byte arrays (keys in, values out).
    int64_t keys = 0;
    for (const proto::SparseRows& rows : request.sparse()) {
      keys += static_cast<int64_t>(rows.keys().size() / sizeof(uint64_t));
    }
    proto::PullResponse response;
    RETURN_IF_ERROR(shard.PullSparse(request, &response));
    const size_t bytes = response.ByteSizeLong();
    if (bytes > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("pull: a reply with ", keys, " sparse keys would be ",
                       bytes, " bytes, over the ", max_bytes,
                       "-byte message limit: ask for fewer keys per request"));
    }
    grpc::ByteBuffer buffer;
    bool own = false;
    grpc::Status serialized =
        grpc::SerializationTraits<proto::PullResponse>::Serialize(
            response, &buffer, &own);
    if (!serialized.ok()) {
      return absl::InternalError(absl::StrCat("pull: serializing the reply: ",
                                              serialized.error_message()));
    }
    return buffer;
  }
  return BuildBlocks(shard, request, max_bytes, /*field=*/1);
}

}  // namespace downpour::server

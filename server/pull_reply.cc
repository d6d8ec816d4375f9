// BuildPullReply: the reply sized from the model, then filled under the
// shard's lock.
#include "server/pull_reply.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "rpc/wire_format.h"

namespace downpour::server {

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
      return absl::ResourceExhaustedError(absl::StrCat(
          "pull: a reply with ", keys, " sparse keys would be ", bytes,
          " bytes, over the ", max_bytes,
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
        reply.emplace(num_blocks, payload_bytes);
        return absl::OkStatus();
      },
      [&](const Shard::PulledBlock& block) {
        return reply->AddBlock(block.id, block.version, block.encoding,
                               block.bytes);
      }));
  return reply->Finish();
}

}  // namespace downpour::server

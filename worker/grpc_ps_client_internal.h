// GrpcPsClient's parts shared by its two files (grpc_ps_client.cc: pulls,
// pushes and their retries; grpc_ps_client_moves.cc: requests split after a
// bucket moved). Not for other users.
#ifndef DOWNPOUR_WORKER_GRPC_PS_CLIENT_INTERNAL_H_
#define DOWNPOUR_WORKER_GRPC_PS_CLIENT_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/push_view.h"
#include "common/sparse_keys.h"
#include "grpcpp/generic/generic_stub.h"
#include "rpc/server_util.h"
#include "rpc/wire_format.h"
#include "worker/bucket_split.h"
#include "worker/grpc_ps_client.h"
#include "worker/push_pipeline.h"

namespace downpour::worker {

inline constexpr char kPullMethod[] = "/downpour.proto.ParameterServer/Pull";
inline constexpr char kPushMethod[] = "/downpour.proto.ParameterServer/Push";

// Answers of "bucket moved" (common/sparse_keys.h) for keys the placement
// still gives the ps that refused them, before a request fails: the
// coordinator and the ps disagree (each try re-reads the placement).
inline constexpr int kMovedTries = 5;
// Hops a pull follows when the keys' buckets move again meanwhile.
inline constexpr int kMaxMoveHops = 8;
// At most one INFO line about re-split requests per this much time.
inline constexpr absl::Duration kMovedLogEvery = absl::Seconds(10);

// A ps's answer for keys of a bucket it handed to another ps: nothing was
// applied, and a push's sequence is not used up.
inline bool IsBucketMoved(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         absl::StrContains(status.message(), kBucketMovedMessage);
}

struct GrpcPsClient::ShardLink {
  int index = 0;
  std::string address;
  std::unique_ptr<grpc::GenericStub> stub;
  std::vector<std::vector<uint32_t>> chunks;  // block ids per request

  // A unary call of raw bytes, waited for.
  grpc::Status Call(const char* method, double deadline_s,
                    const grpc::ByteBuffer& request,
                    grpc::ByteBuffer* reply) const {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(deadline_s));
    grpc::Status result;
    absl::Notification done;
    stub->UnaryCall(&context, method, grpc::StubOptions(), &request, reply,
                    [&](grpc::Status status) {
                      result = std::move(status);
                      done.Notify();
                    });
    done.WaitForNotification();
    return result;
  }
};

// One request of a Push: fixed block ids and sequence for all its tries.
struct PushRequestState {
  int shard = 0;
  std::vector<uint32_t> ids;
  std::vector<uint64_t> bases;  // versions[ids[i]] when the push began
  // Sparse rows for this shard (the caller's arrays, read until the push
  // returns, or owned_rows' after a bucket move split them).
  std::vector<wire::SparseRef> sparse;
  std::shared_ptr<const SplitRows> owned_rows;
  // A piece split off a request for a bucket that moved: never sent yet, so
  // its first try is made by RetryFailedPushes.
  bool fresh = false;
  uint64_t sequence = 0;
  grpc::ClientContext context;
  grpc::ByteBuffer request, reply;
  std::string encoded;  // payloads in a 16-bit encoding (pinned)
  grpc::Status status;  // of the asynchronous first try
  absl::Status copied;  // of the values answered (reply_values)
  bool failed = false;
  bool done = false;
};

struct GrpcPsClient::PushCall {
  const float* grad;
  const std::vector<uint64_t>* versions;
  const Values* values = nullptr;  // PushPullBlocks's destination
  uint64_t clock = 0;
  uint64_t epoch = 0;
  std::vector<std::shared_ptr<const ShardLink>> shards;
  std::vector<std::unique_ptr<PushRequestState>> requests;
  std::vector<PushReport> reports;  // per shard
  std::unique_ptr<wire::SendPins> pins = std::make_unique<wire::SendPins>();
  // Guarded by the client's mu_.
  int outstanding = 0;
  int failures = 0;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_GRPC_PS_CLIENT_INTERNAL_H_

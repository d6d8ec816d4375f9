// The byte requests GrpcPsClient sends to a ps, built without gRPC calls so
// that they read on their own: a pull of blocks, a pull of sparse rows and
// the reading of its reply, and a push's view of the gradient (encoded when
// the wire encoding is not float32; rpc/wire_format.h writes it).
#ifndef DOWNPOUR_WORKER_PS_REQUESTS_H_
#define DOWNPOUR_WORKER_PS_REQUESTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/model_spec.h"
#include "common/push_view.h"
#include "common/wire_encoding.h"
#include "grpcpp/support/byte_buffer.h"
#include "worker/sparse_ps.h"

namespace downpour::worker {

// A PullRequest for blocks `ids`, serialized.
grpc::ByteBuffer PullRequestBytes(uint64_t epoch, int worker_id,
                                  const std::vector<uint32_t>& ids,
                                  WireEncoding encoding);

// PullTables's request to one shard for its `keys` of every table.
grpc::ByteBuffer PullRowsRequest(const std::vector<SparsePs::TableRows>& tables,
                                 const std::vector<uint64_t>& keys,
                                 int worker_id, uint64_t epoch);

// The values in shard `s`'s reply to PullRowsRequest into (*values)[t][s];
// DataLoss when the reply does not hold every table's rows.
absl::Status CopyPulledRows(
    size_t s, const std::vector<SparsePs::TableRows>& tables,
    const std::vector<uint64_t>& keys, grpc::ByteBuffer* reply,
    std::vector<std::vector<std::vector<float>>>* values);

// A push of blocks `ids` of `grad`. With an encoding other than float32 the
// payloads are encoded into *encoded, which the caller keeps until the
// request is released (the view points into it).
wire::PushView MakePushView(const ModelSpec& spec, const float* grad,
                            const std::vector<uint64_t>& versions,
                            const std::vector<uint32_t>& ids, uint64_t epoch,
                            int worker_id, uint64_t sequence, uint64_t clock,
                            uint64_t push_key, WireEncoding encoding,
                            std::string* encoded);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_PS_REQUESTS_H_

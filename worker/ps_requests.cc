// The byte requests GrpcPsClient sends to a ps (worker/ps_requests.h).
#include "worker/ps_requests.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "proto/ps.pb.h"

namespace downpour::worker {

grpc::ByteBuffer PullRequestBytes(uint64_t epoch, int worker_id,
                                  const std::vector<uint32_t>& ids,
                                  WireEncoding encoding) {
  proto::PullRequest request;
  request.set_encoding(static_cast<proto::Encoding>(encoding));
  request.set_placement_epoch(epoch);
  request.set_worker_id(worker_id);
  for (uint32_t id : ids) request.add_block_ids(id);
  grpc::ByteBuffer bytes;
  bool own = false;
  (void)grpc::SerializationTraits<proto::PullRequest>::Serialize(request,
                                                                 &bytes, &own);
  return bytes;
}

grpc::ByteBuffer PullRowsRequest(const std::vector<SparsePs::TableRows>& tables,
                                 const std::vector<uint64_t>& keys,
                                 int worker_id, uint64_t epoch) {
  proto::PullRequest request;
  request.set_placement_epoch(epoch);
  request.set_worker_id(worker_id);
  for (const SparsePs::TableRows& t : tables) {
    proto::SparseRows* wanted = request.add_sparse();
    wanted->set_table(t.table);
    wanted->set_keys(keys.data(), keys.size() * sizeof(uint64_t));
  }
  grpc::ByteBuffer bytes;
  bool own = false;
  (void)grpc::SerializationTraits<proto::PullRequest>::Serialize(request,
                                                                 &bytes, &own);
  return bytes;
}

absl::Status CopyPulledRows(
    size_t s, const std::vector<SparsePs::TableRows>& tables,
    const std::vector<uint64_t>& keys, grpc::ByteBuffer* reply,
    std::vector<std::vector<std::vector<float>>>* values) {
  proto::PullResponse response;
  if (!grpc::SerializationTraits<proto::PullResponse>::Deserialize(reply,
                                                                   &response)
           .ok() ||
      response.sparse_size() != static_cast<int>(tables.size())) {
    return absl::DataLossError(absl::StrCat("pull rows from ps ", s,
                                            ": the reply does not hold ",
                                            tables.size(), " tables"));
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    const int dim = tables[t].dim;
    const std::string& bytes = response.sparse(t).values();
    if (bytes.size() != keys.size() * dim * sizeof(float)) {
      return absl::DataLossError(absl::StrCat(
          "pull rows from ps ", s, ": the reply does not hold ", keys.size(),
          " rows of dim ", dim, " of table ", tables[t].table));
    }
    (*values)[t][s].resize(keys.size() * dim);
    std::memcpy((*values)[t][s].data(), bytes.data(), bytes.size());
  }
  return absl::OkStatus();
}

wire::PushView MakePushView(const ModelSpec& spec, const float* grad,
                            const std::vector<uint64_t>& versions,
                            const std::vector<uint32_t>& ids, uint64_t epoch,
                            int worker_id, uint64_t sequence, uint64_t clock,
                            uint64_t push_key, WireEncoding encoding,
                            std::string* encoded) {
  wire::PushView view;
  view.placement_epoch = epoch;
  view.worker_id = worker_id;
  view.sequence = sequence;
  view.clock = clock;
  view.push_key = push_key;
  if (encoding == WireEncoding::kFloat32) {
    for (uint32_t id : ids) {
      const BlockSpec& block = spec.blocks()[id];
      view.blocks.push_back({id, versions[id], 0,
                             reinterpret_cast<const char*>(grad + block.offset),
                             static_cast<size_t>(block.length) * 4});
    }
    return view;
  }
  const size_t width = BytesPerElement(encoding);
  size_t total = 0;
  for (uint32_t id : ids) total += spec.blocks()[id].length * width;
  encoded->resize(total);  // encoded once per request, reused by its retries
  size_t at = 0;
  for (uint32_t id : ids) {
    const BlockSpec& block = spec.blocks()[id];
    EncodeFloats(grad + block.offset, block.length, encoding,
                 encoded->data() + at);
    view.blocks.push_back({id, versions[id], static_cast<int32_t>(encoding),
                           encoded->data() + at, block.length * width});
    at += block.length * width;
  }
  return view;
}

}  // namespace downpour::worker

// Blocking stubs with deadlines; AllMemberStatus fans out on one thread each.
#include "tools/member_probe.h"

#include <future>

#include "absl/strings/str_cat.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "proto/status.grpc.pb.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"

namespace downpour::tools {
namespace {

template <typename Stub, typename Request, typename Response, typename Method>
absl::StatusOr<Response> Call(Stub& stub, Method method, const Request& request,
                              double timeout_s, const std::string& what) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(timeout_s));
  // Through a connection attempt that fails (a loaded peer slow to send its
  // first frame) until the deadline, rather than failing at the first.
  context.set_wait_for_ready(true);
  Response response;
  grpc::Status status = (stub.*method)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, what);
  return response;
}

}  // namespace

MemberProbe::MemberProbe(double timeout_s) : timeout_s_(timeout_s) {}

std::shared_ptr<grpc::Channel> MemberProbe::Channel(
    const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  if (channel == nullptr) channel = MakeChannel(address);
  return channel;
}

absl::StatusOr<proto::GetStatusResponse> MemberProbe::MemberStatus(
    const std::string& address) {
  auto stub = proto::Status::NewStub(Channel(address));
  return Call<proto::Status::Stub, proto::GetStatusRequest,
              proto::GetStatusResponse>(*stub, &proto::Status::Stub::GetStatus,
                                        {}, timeout_s_, "status of " + address);
}

absl::StatusOr<proto::ChecksumResponse> MemberProbe::BlockVersions(
    const std::string& address) {
  auto stub = proto::ParameterServer::NewStub(Channel(address));
  return Call<proto::ParameterServer::Stub, proto::ChecksumRequest,
              proto::ChecksumResponse>(
      *stub, &proto::ParameterServer::Stub::Checksums, {}, timeout_s_,
      "block versions of ps at " + address);
}

absl::StatusOr<proto::PullResponse> MemberProbe::Pull(
    const std::string& address, uint64_t epoch,
    const std::vector<uint32_t>& block_ids) {
  auto stub = proto::ParameterServer::NewStub(Channel(address));
  proto::PullRequest request;
  request.set_placement_epoch(epoch);
  request.set_worker_id(-1);
  request.set_encoding(proto::FLOAT32);
  for (uint32_t id : block_ids) request.add_block_ids(id);
  return Call<proto::ParameterServer::Stub, proto::PullRequest,
              proto::PullResponse>(*stub, &proto::ParameterServer::Stub::Pull,
                                   request, timeout_s_,
                                   "parameters of ps at " + address);
}

absl::StatusOr<std::string> MemberProbe::Health(const std::string& address,
                                                const std::string& service) {
  using grpc::health::v1::HealthCheckResponse;
  auto stub = grpc::health::v1::Health::NewStub(Channel(address));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  absl::StatusOr<HealthCheckResponse> response =
      Call<grpc::health::v1::Health::Stub, grpc::health::v1::HealthCheckRequest,
           HealthCheckResponse>(*stub, &grpc::health::v1::Health::Stub::Check,
                                request, timeout_s_, "health of " + address);
  if (!response.ok()) return response.status();
  return HealthCheckResponse::ServingStatus_Name(response->status());
}

std::vector<absl::StatusOr<proto::GetStatusResponse>>
MemberProbe::AllMemberStatus(const proto::ClusterStatusResponse& status) {
  std::vector<std::future<absl::StatusOr<proto::GetStatusResponse>>> pending;
  for (const proto::MemberStatus& m : status.members()) {
    if (!m.registered() || m.address().empty()) {
      pending.push_back(std::async(std::launch::deferred, [] {
        return absl::StatusOr<proto::GetStatusResponse>(
            absl::UnavailableError("never registered"));
      }));
      continue;
    }
    pending.push_back(std::async(
        std::launch::async,
        [this, address = m.address()] { return MemberStatus(address); }));
  }
  std::vector<absl::StatusOr<proto::GetStatusResponse>> out;
  for (auto& p : pending) out.push_back(p.get());
  return out;
}

}  // namespace downpour::tools

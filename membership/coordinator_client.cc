// Coordinator client: plain blocking stubs with deadlines, retried by RetryFor.
#include "membership/coordinator_client.h"

#include "absl/strings/str_cat.h"
#include "common/retry.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"

namespace downpour::membership {

CoordinatorClient::CoordinatorClient(std::string address, const RpcSection& rpc,
                                     std::string who, bool fresh_connection)
    : address_(std::move(address)),
      rpc_(rpc),
      who_(std::move(who)),
      stub_(proto::Coordinator::NewStub(
          MakeChannel(address_, fresh_connection))) {}

namespace {

template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> Call(proto::Coordinator::Stub* stub, Method method,
                              const Request& request, double deadline_s,
                              const std::string& what) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(deadline_s));
  Response response;
  grpc::Status status = (stub->*method)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, what);
  return response;
}

}  // namespace

absl::StatusOr<proto::RegisterServerResponse> CoordinatorClient::RegisterServer(
    int index, const std::string& address, bool standby,
    uint64_t applied_total) {
  proto::RegisterServerRequest request;
  request.set_applied_total(applied_total);
  request.set_index(index);
  request.set_address(address);
  request.set_standby(standby);
  return RegisterServer(std::move(request));
}

absl::StatusOr<proto::RegisterServerResponse> CoordinatorClient::RegisterServer(
    proto::RegisterServerRequest request) {
  request.set_member_key(member_key());
  absl::StatusOr<proto::RegisterServerResponse> response;
  absl::Status status = RetryFor(
      who_, absl::StrCat("the coordinator at ", address_),
      absl::Seconds(rpc_.connect_timeout_s), [&] {
        response =
            Call<proto::RegisterServerRequest, proto::RegisterServerResponse>(
                stub_.get(), &proto::Coordinator::Stub::RegisterServer, request,
                rpc_.deadline_s, "register with coordinator at " + address_);
        return response.status();
      });
  if (!status.ok()) return status;
  set_member_key(response->member_key());
  return response;
}

absl::StatusOr<proto::RegisterWorkerResponse> CoordinatorClient::RegisterWorker(
    int index, const std::string& address, bool join) {
  proto::RegisterWorkerRequest request;
  request.set_index(join ? -1 : index);
  request.set_join(join);
  request.set_address(address);
  request.set_member_key(member_key());
  absl::StatusOr<proto::RegisterWorkerResponse> response;
  absl::Status status = RetryFor(
      who_, absl::StrCat("the coordinator at ", address_),
      absl::Seconds(rpc_.connect_timeout_s), [&] {
        response =
            Call<proto::RegisterWorkerRequest, proto::RegisterWorkerResponse>(
                stub_.get(), &proto::Coordinator::Stub::RegisterWorker, request,
                rpc_.deadline_s, "register with coordinator at " + address_);
        return response.status();
      });
  if (!status.ok()) return status;
  set_member_key(response->member_key());
  return response;
}

absl::StatusOr<proto::GetPlacementResponse> CoordinatorClient::WaitForPlacement(
    uint64_t min_epoch, const std::function<bool()>& should_stop) {
  absl::StatusOr<proto::GetPlacementResponse> response;
  std::string waiting_for = "the placement map";
  absl::Status status = RetryFor(
      who_, "the placement map from the coordinator at " + address_,
      absl::Seconds(rpc_.connect_timeout_s),
      [&]() -> absl::Status {
        response = GetPlacement();
        if (!response.ok()) return response.status();
        if (response->epoch() < std::max<uint64_t>(min_epoch, 1)) {
          return absl::UnavailableError(absl::StrCat(
              "placement not ready: coordinator waits for ",
              response->waiting_for().empty() ? "a newer epoch"
                                              : response->waiting_for()));
        }
        return absl::OkStatus();
      },
      should_stop);
  if (!status.ok()) return status;
  return response;
}

std::string CoordinatorClient::member_key() const {
  absl::MutexLock lock(&key_mu_);
  return member_key_;
}

void CoordinatorClient::set_member_key(const std::string& key) {
  absl::MutexLock lock(&key_mu_);
  member_key_ = key;
}

absl::StatusOr<proto::HeartbeatResponse> CoordinatorClient::Heartbeat(
    proto::HeartbeatRequest request) {
  if (request.member_key().empty()) request.set_member_key(member_key());
  return Call<proto::HeartbeatRequest, proto::HeartbeatResponse>(
      stub_.get(), &proto::Coordinator::Stub::Heartbeat, request,
      rpc_.deadline_s, "heartbeat to coordinator at " + address_);
}

absl::StatusOr<proto::GetPlacementResponse> CoordinatorClient::GetPlacement() {
  return Call<proto::GetPlacementRequest, proto::GetPlacementResponse>(
      stub_.get(), &proto::Coordinator::Stub::GetPlacement,
      proto::GetPlacementRequest(), rpc_.deadline_s,
      "cannot read the placement from the coordinator at " + address_);
}

absl::StatusOr<proto::ClusterStatusResponse>
CoordinatorClient::ClusterStatus() {
  return Call<proto::ClusterStatusRequest, proto::ClusterStatusResponse>(
      stub_.get(), &proto::Coordinator::Stub::ClusterStatus,
      proto::ClusterStatusRequest(), rpc_.deadline_s,
      "cannot reach the coordinator at " + address_);
}

absl::StatusOr<proto::GetHistoryResponse> CoordinatorClient::History(
    double since_seconds) {
  proto::GetHistoryRequest request;
  request.set_since_seconds(since_seconds);
  return Call<proto::GetHistoryRequest, proto::GetHistoryResponse>(
      stub_.get(), &proto::Coordinator::Stub::GetHistory, request,
      rpc_.deadline_s,
      "cannot read the history from the coordinator at " + address_);
}

absl::StatusOr<proto::DescribeModelResponse>
CoordinatorClient::DescribeModel() {
  return Call<proto::DescribeModelRequest, proto::DescribeModelResponse>(
      stub_.get(), &proto::Coordinator::Stub::DescribeModel,
      proto::DescribeModelRequest(), rpc_.deadline_s,
      "cannot read the model from the coordinator at " + address_);
}

absl::StatusOr<proto::MoveBucketsResponse> CoordinatorClient::MoveBuckets(
    const proto::MoveBucketsRequest& request) {
  return Call<proto::MoveBucketsRequest, proto::MoveBucketsResponse>(
      stub_.get(), &proto::Coordinator::Stub::MoveBuckets, request,
      rpc_.deadline_s,
      "cannot start the bucket moves at the coordinator at " + address_);
}

absl::StatusOr<proto::DrainWorkerResponse> CoordinatorClient::DrainWorker(
    const proto::DrainWorkerRequest& request) {
  return Call<proto::DrainWorkerRequest, proto::DrainWorkerResponse>(
      stub_.get(), &proto::Coordinator::Stub::DrainWorker, request,
      rpc_.deadline_s,
      "cannot drain the worker at the coordinator at " + address_);
}

}  // namespace downpour::membership

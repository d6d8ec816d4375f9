// Status service adapter.
#include "common/status_service.h"

namespace downpour {

StatusService::StatusService(std::string role, int index,
                             const Counters* counters, Filler filler)
    : role_(std::move(role)), index_(index), counters_(counters),
      filler_(std::move(filler)) {}

grpc::ServerUnaryReactor* StatusService::GetStatus(
    grpc::CallbackServerContext* context, const proto::GetStatusRequest*,
    proto::GetStatusResponse* response) {
  response->set_role(role_);
  response->set_index(index_);
  response->set_version(kDownpourVersion);
  response->set_address(address_);
  response->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
  for (const auto& [name, value] : counters_->Snapshot()) {
    (*response->mutable_counters())[name] = value;
  }
  for (uint64_t n : counters_->StalenessHistogram()) {
    response->add_staleness_histogram(n);
  }
  if (filler_) filler_(response);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace downpour

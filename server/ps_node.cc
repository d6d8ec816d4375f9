// ps / standby life cycle.
#include "server/ps_node.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

}  // namespace

absl::StatusOr<std::unique_ptr<PsNode>> PsNode::Create(Options options) {
  std::unique_ptr<PsNode> node(new PsNode(options));
  if (!options.standby) {
    ASSIGN_OR_RETURN(std::unique_ptr<Shard> shard,
                     Shard::Create(options.config, options.index, options.counters));
    absl::MutexLock lock(&node->mu_);
    node->shard_ = std::move(shard);
    node->shard_index_ = options.index;
    node->service_.set_shard(node->shard_.get());
  }
  return node;
}

std::string PsNode::name() const {
  absl::MutexLock lock(&mu_);
  if (shard_index_ >= 0) return absl::StrCat("ps ", shard_index_);
  return absl::StrCat("standby ", options_.index);
}

uint64_t PsNode::epoch() const {
  absl::MutexLock lock(&mu_);
  return shard_ ? shard_->epoch() : 0;
}

size_t PsNode::num_blocks() const {
  absl::MutexLock lock(&mu_);
  return shard_ ? shard_->num_blocks() : 0;
}

absl::Status PsNode::Register(coordinator::CoordinatorClient* client,
                              const std::string& address) {
  int index;
  bool standby;
  {
    absl::MutexLock lock(&mu_);
    standby = shard_index_ < 0;
    index = standby ? options_.index : shard_index_;
  }
  auto response = standby ? client->RegisterServer(index, address, /*standby=*/true)
                          : client->RegisterServer(index, address);
  if (!response.ok()) return response.status();
  if (!standby && response->placement_epoch() > epoch()) {
    return ApplyPlacement(client, response->placement_epoch());
  }
  return absl::OkStatus();
}

absl::Status PsNode::ApplyPlacement(coordinator::CoordinatorClient* client,
                                    uint64_t epoch) {
  ASSIGN_OR_RETURN(proto::GetPlacementResponse placement,
                   client->WaitForPlacement(epoch));
  absl::MutexLock lock(&mu_);
  std::vector<uint32_t> ids;
  for (const proto::ShardInfo& info : placement.shards()) {
    if (info.index() == shard_index_) {
      ids.assign(info.block_ids().begin(), info.block_ids().end());
    }
  }
  return shard_->Assign(placement.epoch(), ids);
}

absl::Status PsNode::TakeOver(coordinator::CoordinatorClient* client,
                              int shard_index, uint64_t epoch) {
  SPDLOG_LOGGER_WARN(L(), "standby {}: taking over shard {} at placement epoch {}",
                     options_.index, shard_index, epoch);
  // Reads that shard's latest checkpoint (the checkpoint folder is shared).
  ASSIGN_OR_RETURN(std::unique_ptr<Shard> shard,
                   Shard::Create(options_.config, shard_index, options_.counters));
  {
    absl::MutexLock lock(&mu_);
    shard_ = std::move(shard);
    shard_index_ = shard_index;
  }
  RETURN_IF_ERROR(ApplyPlacement(client, epoch));
  absl::MutexLock lock(&mu_);
  service_.set_shard(shard_.get());
  options_.counters->Add("takeovers", 1);
  return absl::OkStatus();
}

std::pair<std::string, int> PsNode::OnHeartbeat(
    coordinator::CoordinatorClient* client, const proto::HeartbeatResponse& response) {
  if (response.replaced() && !replaced_.HasBeenNotified()) {
    SPDLOG_LOGGER_WARN(L(), "{}: another daemon serves this shard now (placement "
                            "epoch {}); standing down without writing a checkpoint",
                       name(), response.placement_epoch());
    service_.set_shard(nullptr);
    replaced_.Notify();
  }
  int shard_index;
  {
    absl::MutexLock lock(&mu_);
    shard_index = shard_index_;
  }
  if (shard_index < 0 && response.take_over_index() >= 0) {
    absl::Status taken =
        TakeOver(client, response.take_over_index(), response.placement_epoch());
    if (!taken.ok()) {
      SPDLOG_LOGGER_ERROR(L(), "standby {}: cannot take over shard {}: {}",
                          options_.index, response.take_over_index(),
                          std::string(taken.message()));
    }
  } else if (shard_index >= 0 && !replaced_.HasBeenNotified() &&
             response.placement_epoch() > epoch()) {
    absl::Status applied = ApplyPlacement(client, response.placement_epoch());
    if (!applied.ok()) {
      SPDLOG_LOGGER_WARN(L(), "{}: {}", name(), std::string(applied.message()));
    }
  }
  absl::MutexLock lock(&mu_);
  if (shard_index_ >= 0) return {"ps", shard_index_};
  return {"standby", options_.index};
}

absl::Status PsNode::Checkpoint() {
  if (replaced_.HasBeenNotified()) return absl::OkStatus();
  Shard* shard;
  {
    // The shard, once set, lives as long as the node; write without the lock.
    absl::MutexLock lock(&mu_);
    shard = shard_.get();
  }
  if (shard == nullptr || shard->epoch() == 0) return absl::OkStatus();
  return shard->WriteCheckpoint();
}

}  // namespace downpour::server

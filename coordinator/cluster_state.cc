// Membership and placement. Placement is computed once every ps of the config has
// registered; its epoch rises whenever a shard's address changes, so clients holding
// an old map get FAILED_PRECONDITION from the ps and re-read it.
#include "coordinator/cluster_state.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log("coordinator"); }

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterState>> ClusterState::Create(
    Options options) {
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(options.config.model);
  if (!spec.ok()) return spec.status();
  return std::unique_ptr<ClusterState>(
      new ClusterState(std::move(options), *std::move(spec)));
}

ClusterState::ClusterState(Options options, ModelSpec spec)
    : options_(std::move(options)), spec_(std::move(spec)),
      start_(options_.clock()) {
  const auto& cluster = options_.config.cluster;
  for (size_t i = 0; i < cluster.ps.size(); ++i) {
    ps_.push_back({"ps", static_cast<int>(i), cluster.ps[i]});
  }
  for (size_t i = 0; i < cluster.workers.size(); ++i) {
    workers_.push_back({"worker", static_cast<int>(i), cluster.workers[i]});
  }
}

ClusterState::Member* ClusterState::Find(const std::string& role, int index) {
  std::vector<Member>* members =
      role == "ps" ? &ps_ : role == "worker" ? &workers_ : nullptr;
  if (members == nullptr || index < 0 ||
      index >= static_cast<int>(members->size())) {
    return nullptr;
  }
  return &(*members)[index];
}

absl::StatusOr<proto::RegisterServerResponse> ClusterState::RegisterServer(
    const proto::RegisterServerRequest& request) {
  absl::MutexLock lock(&mu_);
  Member* m = Find("ps", request.index());
  if (m == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "register: ps index ", request.index(), " is not in the config (",
        ps_.size(), " ps: indices 0-", ps_.size() - 1, ")"));
  }
  const bool moved = m->registered && m->address != request.address();
  m->address = request.address();
  m->registered = true;
  m->alive = true;
  m->last_heartbeat = options_.clock();
  SPDLOG_LOGGER_INFO(L(), "ps {} registered from {}", m->index, m->address);
  if (moved && epoch_ > 0) {
    ++epoch_;
    SPDLOG_LOGGER_INFO(L(), "ps {} moved to {}: placement epoch {}", m->index,
                       m->address, epoch_);
  }
  MaybePlace();
  proto::RegisterServerResponse response;
  response.set_placement_epoch(epoch_);
  return response;
}

absl::StatusOr<proto::RegisterWorkerResponse> ClusterState::RegisterWorker(
    const proto::RegisterWorkerRequest& request) {
  absl::MutexLock lock(&mu_);
  Member* m = Find("worker", request.index());
  if (m == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "register: worker index ", request.index(),
        " is not in the config (", workers_.size(), " workers: indices 0-",
        workers_.size() - 1, ")"));
  }
  m->address = request.address();
  m->registered = true;
  m->alive = true;
  m->last_heartbeat = options_.clock();
  m->report.set_finished(false);
  SPDLOG_LOGGER_INFO(L(), "worker {} registered from {}", m->index, m->address);
  proto::RegisterWorkerResponse response;
  *response.mutable_partition() = PartitionOf(m->index);
  return response;
}

proto::Partition ClusterState::PartitionOf(int worker) const {
  proto::Partition partition;
  partition.set_part(worker);
  partition.set_num_parts(static_cast<int>(options_.config.cluster.workers.size()));
  return partition;
}

void ClusterState::MaybePlace() {
  if (epoch_ > 0) return;
  for (const Member& m : ps_) {
    if (!m.registered) return;
  }
  placement_ = PlaceBlocks(spec_, static_cast<int>(ps_.size()));
  epoch_ = 1;
  std::vector<std::string> shards;
  for (size_t s = 0; s < placement_.size(); ++s) {
    int64_t floats = 0;
    for (uint32_t id : placement_[s]) floats += spec_.blocks()[id].length;
    shards.push_back(absl::StrFormat("ps %d: %d blocks, %.2f MB", s,
                                     placement_[s].size(), floats * 4 / 1e6));
  }
  SPDLOG_LOGGER_INFO(L(), "placement epoch 1: {} blocks over {} shards ({})",
                     spec_.blocks().size(), ps_.size(),
                     absl::StrJoin(shards, "; "));
}

absl::StatusOr<proto::HeartbeatResponse> ClusterState::Heartbeat(
    const proto::HeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  if (request.role() != "ps" && request.role() != "worker") {
    return absl::InvalidArgumentError(absl::StrCat(
        "heartbeat: role must be ps or worker, got '", request.role(), "'"));
  }
  Member* m = Find(request.role(), request.index());
  if (m == nullptr || !m->registered) {
    return absl::FailedPreconditionError(absl::StrCat(
        "heartbeat: ", request.role(), " ", request.index(),
        " is not registered with this coordinator; register first"));
  }
  if (!m->alive) {
    SPDLOG_LOGGER_INFO(L(), "{} {} is alive again", m->role, m->index);
  }
  m->alive = true;
  m->last_heartbeat = options_.clock();
  m->report = request.report();
  MaybeStop();
  proto::HeartbeatResponse response;
  response.set_placement_epoch(epoch_);
  response.set_stop(stop_);
  response.set_stop_reason(stop_reason_);
  if (request.role() == "worker") {
    *response.mutable_partition() = PartitionOf(m->index);
  }
  return response;
}

void ClusterState::MaybeStop() {
  if (stop_) return;
  const double target = options_.config.training.target_accuracy;
  bool all_finished = true;
  for (const Member& w : workers_) {
    const double acc = w.report.accuracy();
    if (target > 0 && w.registered && !std::isnan(acc) && acc >= target) {
      stop_ = true;
      stop_reason_ = absl::StrFormat(
          "worker %d reached test accuracy %.4f >= target %.4f at step %d",
          w.index, acc, target, w.report.step());
      break;
    }
    all_finished = all_finished && w.registered && w.report.finished();
  }
  if (!stop_ && all_finished) {
    stop_ = true;
    stop_reason_ = "every worker finished its steps";
  }
  if (stop_) SPDLOG_LOGGER_INFO(L(), "job done: {}", stop_reason_);
}

proto::GetPlacementResponse ClusterState::Placement() const {
  absl::MutexLock lock(&mu_);
  proto::GetPlacementResponse response;
  response.set_epoch(epoch_);
  if (epoch_ == 0) {
    std::vector<std::string> missing;
    for (const Member& m : ps_) {
      if (!m.registered) missing.push_back(absl::StrCat("ps ", m.index, " (", m.address, ")"));
    }
    response.set_waiting_for(absl::StrCat("registration of ",
                                          absl::StrJoin(missing, ", ")));
    return response;
  }
  for (size_t s = 0; s < ps_.size(); ++s) {
    proto::ShardInfo* shard = response.add_shards();
    shard->set_index(static_cast<int>(s));
    shard->set_address(ps_[s].address);
    for (uint32_t id : placement_[s]) shard->add_block_ids(id);
  }
  return response;
}

proto::ClusterStatusResponse ClusterState::Status() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock();
  proto::ClusterStatusResponse response;
  response.set_placement_epoch(epoch_);
  response.set_uptime_seconds(absl::ToDoubleSeconds(now - start_));
  response.set_stop(stop_);
  response.set_stop_reason(stop_reason_);
  for (const auto* group : {&ps_, &workers_}) {
    for (const Member& m : *group) {
      proto::MemberStatus* out = response.add_members();
      out->set_role(m.role);
      out->set_index(m.index);
      out->set_address(m.address);
      out->set_alive(m.alive);
      out->set_registered(m.registered);
      out->set_seconds_since_heartbeat(
          m.registered ? absl::ToDoubleSeconds(now - m.last_heartbeat) : -1);
      *out->mutable_report() = m.report;
    }
  }
  return response;
}

int ClusterState::CheckLiveness() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock();
  const absl::Duration timeout =
      absl::Seconds(options_.config.heartbeat.timeout_s);
  int changed = 0;
  for (auto* group : {&ps_, &workers_}) {
    for (Member& m : *group) {
      if (!m.alive || now - m.last_heartbeat <= timeout) continue;
      m.alive = false;
      ++changed;
      if (m.role == "worker" && m.report.finished()) {
        SPDLOG_LOGGER_INFO(L(), "worker {} at {} left after finishing", m.index,
                           m.address);
      } else {
        SPDLOG_LOGGER_WARN(L(), "{} {} at {} is dead: no heartbeat for {:.1f} s (timeout {:.1f} s)",
                           m.role, m.index, m.address,
                           absl::ToDoubleSeconds(now - m.last_heartbeat),
                           options_.config.heartbeat.timeout_s);
      }
    }
  }
  return changed;
}

}  // namespace downpour::coordinator

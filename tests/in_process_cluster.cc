// Starts and stops the nodes of an in-process cluster in the launcher's order.
#include "tests/in_process_cluster.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace downpour::testing {
namespace {

constexpr char kLoopbackAnyPort[] = "127.0.0.1:0";

// `status` with "<who>: " before its message.
absl::Status Named(const std::string& who, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(who, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<InProcessCluster>> InProcessCluster::Start(
    Config config) {
  std::unique_ptr<InProcessCluster> cluster(new InProcessCluster());
  // The config's addresses are only where the nodes would listen by default;
  // the coordinator's must be the one it bound, for the others to register.
  coordinator::CoordinatorNode::Options coordinator_options;
  coordinator_options.config = config;
  coordinator_options.listen = kLoopbackAnyPort;
  absl::StatusOr<std::unique_ptr<coordinator::CoordinatorNode>> coordinator =
      coordinator::CoordinatorNode::Start(std::move(coordinator_options));
  if (!coordinator.ok()) return Named("coordinator", coordinator.status());
  cluster->coordinator_ = *std::move(coordinator);
  config.cluster.coordinator = cluster->coordinator_->address();
  cluster->config_ = config;
  cluster->client_ = std::make_unique<membership::CoordinatorClient>(
      config.cluster.coordinator, config.rpc, "in-process cluster");

  // A ps registers and returns while the others are missing (no placement
  // yet); the last one to register waits for the placement and serves it, and
  // the others pick it up from their next heartbeat. So one after the other
  // is enough. Standbys only register.
  for (bool standby : {false, true}) {
    const auto& list = standby ? config.cluster.standby_ps : config.cluster.ps;
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      server::PsNode::Options options;
      options.config = config;
      options.index = i;
      options.standby = standby;
      options.listen = kLoopbackAnyPort;
      absl::StatusOr<std::unique_ptr<server::PsNode>> ps =
          server::PsNode::Start(std::move(options));
      if (!ps.ok()) {
        return Named(absl::StrCat(standby ? "standby " : "ps ", i),
                     ps.status());
      }
      (standby ? cluster->standbys_ : cluster->ps_).push_back(*std::move(ps));
    }
  }

  for (int i = 0; i < static_cast<int>(config.cluster.workers.size()); ++i) {
    worker::WorkerNode::Options options;
    options.config = config;
    options.index = i;
    options.listen = kLoopbackAnyPort;
    absl::StatusOr<std::unique_ptr<worker::WorkerNode>> worker =
        worker::WorkerNode::Start(std::move(options));
    if (!worker.ok()) return Named(absl::StrCat("worker ", i), worker.status());
    cluster->workers_.push_back(*std::move(worker));
  }
  return cluster;
}

InProcessCluster::~InProcessCluster() { Stop().IgnoreError(); }

absl::StatusOr<proto::ClusterStatusResponse> InProcessCluster::ClusterStatus() {
  return client_->ClusterStatus();
}

absl::Status InProcessCluster::WaitForWorkersToEnd(absl::Duration deadline) {
  const absl::Time end = absl::Now() + deadline;
  std::vector<std::string> training;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i]->ended()->WaitForNotificationWithDeadline(end)) {
      training.push_back(absl::StrCat(i));
    }
  }
  if (training.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("worker(s) ", absl::StrJoin(training, ", "),
                   " still training after ", absl::FormatDuration(deadline)));
}

absl::Status InProcessCluster::StopPs(int i) {
  return Named(absl::StrCat("ps ", i), ps_[i]->Stop());
}

absl::Status InProcessCluster::Stop() {
  absl::Status first;
  auto keep = [&first](const std::string& who, const absl::Status& status) {
    if (first.ok()) first = Named(who, status);
  };
  for (size_t i = 0; i < workers_.size(); ++i) {
    keep(absl::StrCat("worker ", i), workers_[i]->Stop());
  }
  for (size_t i = 0; i < ps_.size(); ++i) {
    keep(absl::StrCat("ps ", i), ps_[i]->Stop());
  }
  for (size_t i = 0; i < standbys_.size(); ++i) {
    keep(absl::StrCat("standby ", i), standbys_[i]->Stop());
  }
  if (coordinator_ != nullptr) keep("coordinator", coordinator_->Stop());
  return first;
}

}  // namespace downpour::testing

// The fixture and heartbeat builders the ClusterState tests share
// (cluster_state_test.cc, cluster_state_spare_test.cc).
#ifndef DOWNPOUR_COORDINATOR_CLUSTER_STATE_TEST_FIXTURE_H_
#define DOWNPOUR_COORDINATOR_CLUSTER_STATE_TEST_FIXTURE_H_

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "coordinator/test_cluster.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {

class ClusterStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    config.cluster.ps = {"127.0.0.1:1", "127.0.0.1:2"};
    config.cluster.workers = {"127.0.0.1:3", "127.0.0.1:4"};
    config.training.target_accuracy = 0.9;
    config.cluster.standby_ps = {"127.0.0.1:5"};
    config.heartbeat.timeout_s = 3;
    config.coordinator.state_dir =
        std::string(std::getenv("TEST_TMPDIR")) + "/" +
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(config.coordinator.state_dir);
    config_ = config;
    Restart();
  }

  // A new ClusterState over the same state_dir: what a restarted coordinator
  // sees.
  void Restart() {
    state_.reset();
    auto state = ClusterState::Create({config_, &clock_, probe_});
    ASSERT_TRUE(state.ok()) << state.status();
    state_ = *std::move(state);
  }

  void RegisterWorker(int index) {
    proto::RegisterWorkerRequest request;
    request.set_index(index);
    ASSERT_THAT(RegisterWorkerCall(request), ::downpour::testing::IsOk());
  }

  std::vector<int> PartsOf(int worker) {
    proto::HeartbeatRequest request;
    request.set_role("worker");
    request.set_index(worker);
    auto response = Heartbeat(request);
    EXPECT_THAT(response, ::downpour::testing::IsOk());
    if (!response.ok()) return {};
    return {response->partition().parts().begin(),
            response->partition().parts().end()};
  }

  void RegisterPs(int index, const std::string& address, bool standby = false) {
    proto::RegisterServerRequest request;
    request.set_index(index);
    request.set_address(address);
    request.set_standby(standby);
    ASSERT_THAT(RegisterServer(request), ::downpour::testing::IsOk());
  }

  // Ps `ps` reports holding pushes of these workers' registered processes.
  void PsHolds(int ps, const std::vector<int>& workers) {
    proto::HeartbeatRequest request;
    request.set_role("ps");
    request.set_index(ps);
    for (int w : workers) {
      proto::WorkerIncarnation* from =
          request.mutable_report()->add_applied_from();
      from->set_worker(w);
      from->set_incarnation(worker_incarnations_[w]);
    }
    ASSERT_THAT(Heartbeat(request), ::downpour::testing::IsOk());
  }

  // Worker `index` reports its `evaluations`th test accuracy.
  absl::StatusOr<proto::HeartbeatResponse> Evaluated(int index, double accuracy,
                                                     uint64_t evaluations) {
    proto::HeartbeatRequest request;
    request.set_role("worker");
    request.set_index(index);
    request.mutable_report()->set_accuracy(accuracy);
    request.mutable_report()->set_evaluations(evaluations);
    return Heartbeat(request);
  }

  absl::StatusOr<proto::HeartbeatResponse> Beat(const std::string& role,
                                                int index, double accuracy) {
    proto::HeartbeatRequest request;
    request.set_role(role);
    request.set_index(index);
    request.mutable_report()->set_accuracy(accuracy);
    return Heartbeat(request);
  }

  // The calls as the members make them: registrations carry no key (a new
  // process) and the key each got is remembered by address and by member;
  // heartbeats carry the key of their address's process (else their
  // member's). A worker registers at its config address unless told one.
  //
  // A registration refused while the old process's lease runs is made
  // again once the clock moved past the lease (the old process stays
  // silent): what a worker's or standby's client does (Unavailable, retried
  // by common/retry.h), and here a ps's restart after its old process was
  // silent that long (the real daemon rejoins as a spare at once: the
  // fault tests in tests/ cover that).
  template <typename Call>
  auto AfterTheLease(Call call) {
    auto response = call();
    if ((absl::IsUnavailable(response.status()) ||
         absl::IsAlreadyExists(response.status())) &&
        absl::StrContains(response.status().message(), "lease")) {
      clock_.Advance(absl::Seconds(config_.heartbeat.timeout_s));
      response = call();
    }
    return response;
  }
  absl::StatusOr<proto::RegisterServerResponse> RegisterServer(
      const proto::RegisterServerRequest& request) {
    auto response =
        AfterTheLease([&] { return state_->RegisterServer(request); });
    if (response.ok()) {
      Remember(request.standby() ? "standby" : "ps", request.index(),
               request.address(), response->member_key(),
               response->incarnation());
    }
    return response;
  }
  absl::StatusOr<proto::RegisterWorkerResponse> RegisterWorkerCall(
      proto::RegisterWorkerRequest request) {
    if (request.address().empty() && request.index() >= 0 &&
        request.index() < static_cast<int>(config_.cluster.workers.size())) {
      request.set_address(config_.cluster.workers[request.index()]);
    }
    auto response =
        AfterTheLease([&] { return state_->RegisterWorker(request); });
    if (response.ok()) {
      Remember("worker", request.index(), request.address(),
               response->member_key(), response->incarnation());
    }
    return response;
  }
  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(
      proto::HeartbeatRequest request) {
    if (request.member_key().empty()) {
      auto it = keys_.find(request.address());
      if (request.address().empty() || it == keys_.end()) {
        it = keys_.find(absl::StrCat(request.role(), ":", request.index()));
      }
      if (it != keys_.end()) request.set_member_key(it->second);
    }
    return state_->Heartbeat(request);
  }
  void Remember(const std::string& role, int index, const std::string& address,
                const std::string& key, uint64_t incarnation) {
    EXPECT_EQ(key.size(), 32u);
    keys_[absl::StrCat(role, ":", index)] = key;
    if (role == "worker") worker_incarnations_[index] = incarnation;
    if (!address.empty()) {
      keys_[address] = key;
      incarnations_[address] = incarnation;
    }
  }

  FakeClock clock_{absl::FromUnixSeconds(1000)};
  // The probe of a standby's address (nullptr: not checked).
  std::function<std::optional<uint64_t>(const std::string&)> probe_;
  std::map<std::string, std::string> keys_;       // by address and "role:index"
  std::map<std::string, uint64_t> incarnations_;  // by address
  std::map<int, uint64_t> worker_incarnations_;   // by worker index
  Config config_;
  std::unique_ptr<ClusterState> state_;
};

// A ps heartbeat from `address` reporting `applied` updates.
inline proto::HeartbeatRequest PsBeat(int index, const std::string& address,
                                      uint64_t applied) {
  proto::HeartbeatRequest request;
  request.set_role("ps");
  request.set_index(index);
  request.set_address(address);
  request.mutable_report()->set_applied_total(applied);
  return request;
}

inline proto::HeartbeatRequest StandbyBeat(int index, int replica_shard) {
  proto::HeartbeatRequest request;
  request.set_role("standby");
  request.set_index(index);
  request.mutable_report()->set_has_replica(replica_shard >= 0);
  request.mutable_report()->set_replica_shard(replica_shard);
  return request;
}

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_CLUSTER_STATE_TEST_FIXTURE_H_

// MemberAgent against an in-process coordinator: it registers when the
// coordinator does not know it, beats, hands each reply to the daemon,
// registers again after a coordinator restart, and sends a last heartbeat on
// Stop.
#include "membership/member_agent.h"

#include <atomic>
#include <functional>
#include <thread>

#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "coordinator/coordinator_node.h"
#include "coordinator/test_cluster.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"

namespace downpour::membership {
namespace {

using coordinator::CoordinatorNode;
using coordinator::TestClusterConfig;

using ::downpour::testing::IsOk;

Config TestConfig() {
  Config config = TestClusterConfig();
  config.rpc.deadline_s = 2;
  return config;
}

// Polls `done` until it holds or 10 s have passed.
bool Eventually(const std::function<bool()>& done) {
  return ::downpour::testing::WaitUntil(done, absl::Seconds(10));
}

class MemberAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartCoordinator("127.0.0.1:0");
    client_ = std::make_unique<CoordinatorClient>(node_->address(),
                                                  TestConfig().rpc, "worker 0");
  }

  void StartCoordinator(const std::string& listen) {
    CoordinatorNode::Options options;
    options.config = TestConfig();
    options.listen = listen;
    auto node = CoordinatorNode::Start(std::move(options));
    ASSERT_THAT(node, IsOk());
    node_ = *std::move(node);
  }

  // An agent for worker 0 that beats every `interval_s`.
  std::unique_ptr<MemberAgent> Agent(double interval_s) {
    return std::make_unique<MemberAgent>(
        client_.get(), "worker", 0, "127.0.0.1:2", interval_s,
        [this] {
          ++registrations_;
          return client_->RegisterWorker(0, "127.0.0.1:2").status();
        },
        [this] {
          proto::MemberReport report;
          report.set_step(step_);
          return report;
        },
        [this](const proto::HeartbeatResponse& response) {
          if (response.has_partition()) ++handled_;
        });
  }

  // The step the coordinator last heard from worker 0; -1 when not registered.
  int64_t ReportedStep() {
    proto::ClusterStatusResponse status = node_->state()->Status();
    for (const proto::MemberStatus& m : status.members()) {
      if (m.role() == "worker" && m.registered()) return m.report().step();
    }
    return -1;
  }

  std::unique_ptr<CoordinatorNode> node_;
  std::unique_ptr<CoordinatorClient> client_;
  std::atomic<int> registrations_{0};
  std::atomic<int> handled_{0};
  std::atomic<int64_t> step_{0};
};

TEST_F(MemberAgentTest, RegistersBeatsAndHandsRepliesToTheDaemon) {
  auto agent = Agent(0.01);
  step_ = 5;
  agent->Start();
  // The coordinator does not know worker 0 yet: the agent registers it.
  ASSERT_TRUE(Eventually([&] { return registrations_ >= 1; }));
  ASSERT_TRUE(Eventually([&] { return ReportedStep() == 5; }));
  ASSERT_TRUE(Eventually([&] { return handled_ >= 1; }));
  step_ = 6;
  EXPECT_TRUE(Eventually([&] { return ReportedStep() == 6; }));
  EXPECT_EQ(registrations_, 1) << "registered once, then only beats";
  agent->Stop();
}

TEST_F(MemberAgentTest, RegistersAgainAfterTheCoordinatorRestarts) {
  ASSERT_THAT(client_->RegisterWorker(0, "127.0.0.1:2"), IsOk());
  auto agent = Agent(0.01);
  step_ = 1;
  agent->Start();
  ASSERT_TRUE(Eventually([&] { return handled_ >= 1; }));
  EXPECT_EQ(registrations_, 0);
  // Same address, new process, no saved state: it has forgotten worker 0.
  const std::string address = node_->address();
  ASSERT_THAT(node_->Stop(), IsOk());
  node_.reset();
  StartCoordinator(address);
  step_ = 2;
  EXPECT_TRUE(Eventually([&] { return registrations_ >= 1; }));
  EXPECT_TRUE(Eventually([&] { return ReportedStep() == 2; }));
  agent->Stop();
}

TEST_F(MemberAgentTest, StopSendsALastHeartbeat) {
  ASSERT_THAT(client_->RegisterWorker(0, "127.0.0.1:2"), IsOk());
  auto agent = Agent(3600);  // the loop never beats on its own here
  agent->Start();
  step_ = 42;
  agent->Stop();
  EXPECT_EQ(ReportedStep(), 42);
  EXPECT_EQ(handled_, 1);
}

// The coordinator is gone when the member stops (cut off, restarting): the
// final report is asked for again until the coordinator is back and takes
// it, after registering again with the new process, which forgot the member.
TEST_F(MemberAgentTest,
       StopAsksForTheFinalReportAgainUntilTheCoordinatorTakesIt) {
  ASSERT_THAT(client_->RegisterWorker(0, "127.0.0.1:2"), IsOk());
  auto agent = Agent(0.2);
  agent->Start();
  ASSERT_TRUE(Eventually([&] { return handled_ >= 1; }));
  const std::string address = node_->address();
  ASSERT_THAT(node_->Stop(), IsOk());
  node_.reset();
  step_ = 42;
  // The fault: the coordinator down for the first 2 s of the stop.
  std::thread restart([&] {
    absl::SleepFor(absl::Seconds(2));
    StartCoordinator(address);
  });
  agent->Stop(absl::Seconds(30));
  restart.join();
  ASSERT_NE(node_, nullptr);
  EXPECT_EQ(ReportedStep(), 42) << "the final report was not delivered";
  EXPECT_GE(registrations_, 1);
}

// A beat the coordinator does not take for the member's (PermissionDenied:
// the key is not the member's) reports nothing, hands nothing to the daemon
// and is not answered by registering again.
TEST_F(MemberAgentTest, AWrongKeyReportsNothingAndDoesNotRegisterAgain) {
  ASSERT_THAT(client_->RegisterWorker(0, "127.0.0.1:2"), IsOk());
  client_->set_member_key("0123456789abcdef0123456789abcdef");
  auto agent = Agent(3600);
  agent->Start();
  step_ = 42;
  agent->Stop();  // one beat
  EXPECT_EQ(ReportedStep(), 0);
  EXPECT_EQ(handled_, 0);
  EXPECT_EQ(registrations_, 0);
}

TEST_F(MemberAgentTest, SetIdentityChangesWhoBeats) {
  // A standby that took shard 0 over beats as ps 0 from its own address.
  ASSERT_THAT(client_->RegisterServer(0, "127.0.0.1:2"), IsOk());
  auto agent = Agent(3600);
  agent->SetIdentity("ps", 0);
  agent->Start();
  step_ = 9;
  agent->Stop();
  proto::ClusterStatusResponse status = node_->state()->Status();
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() == "ps") {
      EXPECT_EQ(m.report().step(), 9u);
    }
    if (m.role() == "worker") {
      EXPECT_FALSE(m.registered());
    }
  }
}

}  // namespace
}  // namespace downpour::membership

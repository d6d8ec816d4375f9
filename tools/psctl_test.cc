// psctl against real daemons on loopback (coordinator, one ps, one worker that
// keeps training): every command, its output and its exit status.
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

struct Exit {
  int status = -1;
  std::string output;
};

// Runs psctl with `args` to its end.
Exit Psctl(const std::string& name, std::vector<std::string> args) {
  // Each answer may take long on a loaded machine; what is asserted is the
  // answer. A test that wants a short wait gives its own --timeout_s after
  // this one (the last one given counts).
  args.insert(args.begin() + 1, {"--timeout_s", "30"});
  auto process = testing::StartDaemon(name, "tools/psctl", std::move(args));
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return {};
  const std::optional<int> status = (*process)->Wait(absl::Seconds(60));
  EXPECT_TRUE(status.has_value()) << "psctl " << name << " did not finish";
  return {status.value_or(-1), ReadFile((*process)->log_path()).value_or("")};
}

class PsctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::TestDir();
    config_ = testing::WriteConfig(
        "cluster.yaml",
        testing::LoopbackConfig(
            1, 1,
            "data:\n  source: synthetic\n  train_examples: 600\n  "
            "test_examples: 100\n"
            "model:\n  layers: [784, 32, 10]\n  block_size: 8192\n"
            "optimizer:\n  type: adam\n  learning_rate: 0.003\n"
            "training:\n  batch_size: 32\n  epochs: 100000\n  "
            "eval_every_steps: 20\n"
            "checkpoint:\n  dir: \"\"\n"));
    auto coordinator = testing::StartDaemon(
        "coordinator", "coordinator/coordinator",
        {"--config", config_, "--port_file", dir + "/coordinator.port", "--set",
         "coordinator.history_interval_s=0.2"});
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    auto address =
        testing::WaitForPort(*coordinator_, dir + "/coordinator.port");
    ASSERT_TRUE(address.ok()) << address.status();
    address_ = *address;
    auto ps = testing::StartDaemon(
        "ps-0", "server/ps_server",
        {"--config", config_, "--index", "0", "--coordinator", address_,
         "--port_file", dir + "/ps.port"});
    ASSERT_TRUE(ps.ok()) << ps.status();
    ps_ = *std::move(ps);
    auto ps_address = testing::WaitForPort(*ps_, dir + "/ps.port");
    ASSERT_TRUE(ps_address.ok()) << ps_address.status();
    ps_address_ = *ps_address;
    auto worker = testing::StartDaemon(
        "worker-0", "worker/ps_worker",
        {"--config", config_, "--index", "0", "--coordinator", address_});
    ASSERT_TRUE(worker.ok()) << worker.status();
    worker_ = *std::move(worker);
    // Wait (bounded) until the worker has reported progress twice.
    RpcSection rpc;
    rpc.deadline_s = 5;
    membership::CoordinatorClient client(address_, rpc, "test");
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      auto status = client.ClusterStatus();
      if (status.ok()) {
        for (const proto::MemberStatus& m : status->members()) {
          if (m.role() == "worker" && m.report().step() > 0 &&
              std::isfinite(m.report().accuracy())) {
            return;
          }
        }
      }
      ASSERT_FALSE(worker_->Poll().has_value()) << worker_->LogTail(20);
      absl::SleepFor(absl::Milliseconds(100));
    }
    FAIL() << "the worker never reported:\n" << worker_->LogTail(20);
  }

  void TearDown() override {
    if (worker_) worker_->Stop(absl::Seconds(20));
    if (ps_) ps_->Stop(absl::Seconds(20));
    if (coordinator_) coordinator_->Stop(absl::Seconds(20));
  }

  std::string config_, address_, ps_address_;
  std::unique_ptr<Subprocess> coordinator_, ps_, worker_;
};

TEST_F(PsctlTest, StatusTableAndJson) {
  Exit table = Psctl("status", {"status", "--coordinator", address_});
  EXPECT_EQ(table.status, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("placement epoch 1"));
  Exit json = Psctl("json", {"status", "--json", "--coordinator", address_});
  EXPECT_EQ(json.status, 0) << json.output;
  EXPECT_THAT(json.output, HasSubstr("\"health\": \"SERVING\""));
  EXPECT_THAT(json.output, HasSubstr("\"rates\""));
  EXPECT_THAT(json.output, HasSubstr("\"served:ParameterServer/Push\""));
  EXPECT_THAT(json.output, HasSubstr("\"called:ParameterServer/Pull\""));
  EXPECT_THAT(json.output, HasSubstr("\"memory_rss_bytes\""));
  EXPECT_THAT(json.output, HasSubstr("\"staleness_p99\""));
  EXPECT_THAT(json.output, Not(HasSubstr("status_error")));
}

TEST_F(PsctlTest, WorkersAndShards) {
  Exit workers = Psctl("workers", {"workers", "--coordinator", address_});
  EXPECT_EQ(workers.status, 0) << workers.output;
  EXPECT_THAT(workers.output, HasSubstr("PUSH-MS"));
  EXPECT_THAT(workers.output, HasSubstr("STALE50/99/MAX"));
  EXPECT_THAT(workers.output, HasSubstr(" cpu"));
  EXPECT_THAT(workers.output, Not(HasSubstr("no status")));
  Exit shards = Psctl(
      "shards", {"shards", "--sample_s", "0.3", "--coordinator", address_});
  EXPECT_EQ(shards.status, 0) << shards.output;
  EXPECT_THAT(shards.output, HasSubstr(ps_address_));
  EXPECT_THAT(shards.output, HasSubstr("Hottest blocks"));
  EXPECT_THAT(shards.output, HasSubstr("STALE50/99/MAX"));
  EXPECT_THAT(shards.output, HasSubstr("fc1.weight"));
}

// A ps started with --join (not in cluster.ps) registers as the next shard
// and heartbeats; add-ps finds it and balances (a dense model has no hash
// buckets: dense blocks move to it), and `moves` lists the new shard and
// the move.
TEST_F(PsctlTest, AddPsFindsAPsThatJoined) {
  const std::string port_file = testing::TestDir() + "/joined.port";
  auto joined = testing::StartDaemon(
      "ps-joined", "server/ps_server",
      {"--config", config_, "--join", "--listen", "127.0.0.1:0",
       "--coordinator", address_, "--port_file", port_file});
  ASSERT_TRUE(joined.ok()) << joined.status();
  auto joined_address = testing::WaitForPort(**joined, port_file);
  ASSERT_TRUE(joined_address.ok()) << joined_address.status();
  Exit add = Psctl("add-ps", {"add-ps", *joined_address, "--coordinator",
                              address_, "--wait_s", "30"});
  EXPECT_EQ(add.status, 0) << add.output;
  EXPECT_THAT(add.output, HasSubstr("serves shard 1"));
  EXPECT_THAT(add.output, HasSubstr("dense blocks"));
  EXPECT_THAT(add.output, HasSubstr("shard 0 -> 1): done"));
  Exit moves = Psctl("moves", {"moves", "--coordinator", address_});
  EXPECT_EQ(moves.status, 0) << moves.output;
  EXPECT_THAT(moves.output, HasSubstr(*joined_address));
  EXPECT_THAT(moves.output, HasSubstr("shard 0 -> 1, "));
  (*joined)->Stop(absl::Seconds(20));
}

// drain-worker's refusals come back as the coordinator said them, exit 1,
// and nothing is drained: the only worker is the last one training.
TEST_F(PsctlTest, DrainWorkerRefusalsExit1WithTheCoordinatorsReason) {
  Exit last =
      Psctl("drain-last", {"drain-worker", "0", "--coordinator", address_});
  EXPECT_EQ(last.status, 1) << last.output;
  EXPECT_THAT(last.output, HasSubstr("worker 0 is the last one training: its "
                                     "parts would wait; stop the job "
                                     "instead"));
  Exit unknown =
      Psctl("drain-unknown", {"drain-worker", "3", "--coordinator", address_});
  EXPECT_EQ(unknown.status, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("valid indices are 0 to 0"));
  Exit status = Psctl("status-after", {"status", "--coordinator", address_});
  EXPECT_EQ(status.status, 0) << status.output;
  EXPECT_THAT(status.output, Not(HasSubstr("drained")));
}

TEST_F(PsctlTest, HealthOfEveryMemberAndOfOneEndpoint) {
  Exit all = Psctl("health", {"health", "--coordinator", address_});
  EXPECT_EQ(all.status, 0) << all.output;
  EXPECT_THAT(all.output, HasSubstr("coordinator"));
  EXPECT_THAT(all.output, HasSubstr("worker 0"));
  Exit one = Psctl("health-one", {"health", "--address", ps_address_});
  EXPECT_EQ(one.status, 0) << one.output;
  EXPECT_THAT(one.output, HasSubstr(ps_address_ + ": SERVING"));
  Exit unknown = Psctl(
      "health-svc", {"health", "--address", ps_address_, "--service", "nope"});
  EXPECT_EQ(unknown.status, 1) << unknown.output;
}

TEST_F(PsctlTest, WatchPrintsFramesWithoutATerminal) {
  Exit watch = Psctl("watch", {"watch", "--count", "2", "--interval_s", "0.1",
                               "--coordinator", address_});
  EXPECT_EQ(watch.status, 0) << watch.output;
  EXPECT_THAT(watch.output, HasSubstr("examples/s  "));  // the sparkline row
  EXPECT_THAT(watch.output,
              Not(HasSubstr("\x1b[2J")));  // no screen control codes
}

TEST_F(PsctlTest, PlotLiveAndFromSavedHistory) {
  const std::string dir = testing::TestDir();
  // A curve needs two samples of the worker's figures in the coordinator's
  // history (one is drawn as a dot): wait for them, bounded, as a client
  // sees them. (The history may hold only one sample this early on a loaded
  // machine.)
  RpcSection rpc;
  rpc.deadline_s = 5;
  membership::CoordinatorClient client(address_, rpc, "test");
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto history = client.History(0);
        if (!history.ok()) return false;
        int samples = 0;
        for (const proto::HistorySample& s : history->samples()) {
          for (const proto::MemberSample& m : s.members()) {
            if (m.role() == "worker" && m.report().step() > 0 &&
                std::isfinite(m.report().loss())) {
              ++samples;
              break;
            }
          }
        }
        return samples >= 2;
      },
      absl::Seconds(60), absl::Milliseconds(100)))
      << "the history never held two samples of the worker";
  Exit plot = Psctl(
      "plot", {"plot", "--out", dir + "/live.svg", "--coordinator", address_});
  EXPECT_EQ(plot.status, 0) << plot.output;
  const std::string svg = ReadFile(dir + "/live.svg").value_or("");
  EXPECT_THAT(svg, HasSubstr("1 worker, 1 ps"));
  EXPECT_THAT(svg, HasSubstr("<polyline"));
  Exit history = Psctl("history", {"history", "--out", dir + "/h.json",
                                   "--coordinator", address_});
  EXPECT_EQ(history.status, 0) << history.output;
  // Offline: no coordinator needed.
  Exit offline = Psctl("offline", {"plot", "--history", dir + "/h.json",
                                   "--out", dir + "/saved.svg"});
  EXPECT_EQ(offline.status, 0) << offline.output;
  EXPECT_THAT(ReadFile(dir + "/saved.svg").value_or(""),
              HasSubstr("<polyline"));
  Exit png = Psctl(
      "png", {"plot", "--out", dir + "/x.png", "--coordinator", address_});
  EXPECT_EQ(png.status, 2);
  EXPECT_THAT(png.output, HasSubstr("SVG only"));
  Exit bad = Psctl("bad-history",
                   {"plot", "--history", config_, "--out", dir + "/b.svg"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.output, HasSubstr("is not a GetHistoryResponse"));
}

TEST(PsctlUnreachableTest, EveryCommandSaysSoAndExits1) {
  for (const char* command :
       {"watch", "workers", "shards", "health", "plot", "history", "moves"}) {
    Exit exit =
        Psctl(command, {command, "--coordinator", "127.0.0.1:1", "--timeout_s",
                        "1", "--out", testing::TestDir() + "/x.svg"});
    EXPECT_EQ(exit.status, 1) << command << ": " << exit.output;
    EXPECT_THAT(exit.output, HasSubstr("127.0.0.1:1")) << command;
    EXPECT_THAT(exit.output, HasSubstr("Is the cluster running?")) << command;
  }
}

// The bucket move commands check their arguments before they call anyone:
// exit 2 with the usage that fixes it.
TEST(PsctlMoveArgumentsTest, BadArgumentsExit2WithTheFix) {
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"move-buckets", "--to", "1"}, "psctl move-buckets --to N --buckets"},
      {{"move-buckets", "--buckets", "0-3"}, "--to N"},
      {{"move-buckets", "--to", "1", "--buckets", "3-1"},
       "'3-1' in '3-1' is not a bucket or a range"},
      {{"add-ps"}, "psctl add-ps HOST:PORT"},
      {{"drain-ps", "x"}, "psctl drain-ps N (got 'x')"},
      {{"drain-ps"}, "psctl drain-ps N"},
      {{"drain-worker"}, "psctl drain-worker N (got '')"},
      {{"drain-worker", "two"}, "psctl drain-worker N (got 'two')"},
      {{"move-buckets", "--to", "1", "--buckets", "0", "--wait_s", "0"},
       "--wait_s must be in (0, 86400]"},
  };
  int n = 0;
  for (const auto& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--coordinator", "127.0.0.1:1"});
    const Exit exit = Psctl(absl::StrCat("psctl-args-", n++), args);
    EXPECT_EQ(exit.status, 2) << exit.output;
    EXPECT_THAT(exit.output, HasSubstr(c.says));
  }
}

}  // namespace
}  // namespace downpour

// Streamed data with real daemons on real files (issue "data bigger than
// memory"): each worker reads only its byte-range part of a generated
// Criteo-format log; a worker killed with SIGKILL has its part finished by
// the other from its last reported position; a job stopped a third into an
// epoch and started again with --resume goes on from the saved positions;
// the model exports and predicts with the training file deleted; a bad line
// in the middle of the stream stops the job naming its file:line:column.
// Counts come from what a client observes: the coordinator's ClusterStatus
// (each worker's last report: examples by epoch, positions) and
// summary.json.
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/config.h"
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
using testing::WaitUntil;

constexpr int kTrainRows = 60000;
constexpr int kTestRows = 5000;
constexpr int kWindow = 200;

// Rows of one text file (its line count).
int64_t Lines(const std::string& path) {
  std::ifstream in(path);
  return std::count(std::istreambuf_iterator<char>(in),
                    std::istreambuf_iterator<char>(), '\n');
}

// The longest line of a file, in bytes with its '\n'.
int64_t LongestLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int64_t most = 0;
  while (std::getline(in, line)) {
    most = std::max<int64_t>(most, static_cast<int64_t>(line.size()) + 1);
  }
  return most;
}

class StreamTest : public testing::DaemonJobTest {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir();
    const int generated = testing::RunToEnd(
        {(fs::path(testing::BinDir()) / "bench/criteo/gen_criteo").string(),
         "--out", dir_ + "/train.txt", "--rows", absl::StrCat(kTrainRows),
         "--test_out", dir_ + "/test.txt", "--test_rows",
         absl::StrCat(kTestRows), "--seed", "5"},
        dir_ + "/gen.log");
    ASSERT_EQ(generated, 0) << testing::ReadText(dir_ + "/gen.log");
    ASSERT_EQ(Lines(dir_ + "/train.txt"), kTrainRows);
  }

  // The job's sections but the cluster's: criteo, `epochs` epochs, FTRL.
  std::string JobSections(const std::string& train, int epochs = 2) const {
    return absl::StrCat(
        "data:\n  source: criteo\n  path: ", train, "\n  test_path: ", dir_,
        "/test.txt\n  shuffle_window: ", kWindow,
        "\n  eval_rows: 1000\n"
        "model:\n  type: sparse_linear\n  task: binary\n"
        "  sparse_buckets: 32\n"
        "optimizer:\n  type: ftrl\n  learning_rate: 0.05\n  l1: 1\n"
        "  l2: 1\n"
        "training:\n  batch_size: 32\n  epochs: ",
        epochs, "\n  eval_every_steps: 0\n");
  }

  // The most a part's reported position can be ahead of what was trained:
  // the shuffle window and one chunk (worker/sparse_stream.h).
  int64_t SkipBound() const {
    return kWindow + (int64_t{256} << 10) / 100 + 1;  // lines are > 100 B
  }

  membership::CoordinatorClient Client(const std::string& address) const {
    RpcSection rpc;
    rpc.deadline_s = 2;
    return membership::CoordinatorClient(address, rpc, "stream_test");
  }

  std::string dir_;
};

// Examples by epoch over the workers' last reports in `status`.
std::vector<int64_t> EpochExamples(const proto::ClusterStatusResponse& status) {
  std::vector<int64_t> sum;
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() != "worker") continue;
    const auto& e = m.report().epoch_examples();
    if (sum.size() < static_cast<size_t>(e.size())) sum.resize(e.size(), 0);
    for (int i = 0; i < e.size(); ++i) sum[i] += e[i];
  }
  return sum;
}

TEST_F(StreamTest, AKilledWorkersPartIsFinishedByTheOtherFromItsPosition) {
  // Four epochs, so that worker 0 is still training when worker 1 is
  // declared dead (1 s of silence) in the first.
  config_ = testing::WriteConfig(
      "job.yaml",
      testing::LoopbackConfig(1, 2, JobSections(dir_ + "/train.txt", 4),
                              /*heartbeat_timeout_s=*/1));
  const std::string port_file = dir_ + "/coordinator.port";
  Subprocess& c = Start("coordinator", "coordinator/coordinator",
                        {"--listen", "127.0.0.1:0", "--port_file", port_file});
  absl::StatusOr<std::string> coordinator = testing::WaitForPort(c, port_file);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  Start("ps-0", "server/ps_server",
        {"--index", "0", "--coordinator", *coordinator});
  for (int w = 0; w < 2; ++w) {
    Start(absl::StrCat("worker-", w), "worker/ps_worker",
          {"--index", absl::StrCat(w), "--coordinator", *coordinator});
  }
  membership::CoordinatorClient client = Client(*coordinator);
  // Worker 1 is a third into its part's first epoch: kill it.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto status = client.ClusterStatus();
        if (!status.ok()) return false;
        for (const proto::MemberStatus& m : status->members()) {
          if (m.role() == "worker" && m.index() == 1 &&
              m.report().examples() >= kTrainRows / 6) {
            return true;
          }
        }
        return false;
      },
      absl::Seconds(90), absl::Milliseconds(10)))
      << daemons_["worker-1"]->LogTail(20);
  daemons_["worker-1"]->Signal(SIGKILL);
  // Worker 0 adopts part 1 and trains both parts to the end of epoch 2.
  proto::ClusterStatusResponse last;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto status = client.ClusterStatus();
        if (!status.ok()) return false;
        last = *status;
        for (const proto::MemberStatus& m : status->members()) {
          if (m.role() == "worker" && m.index() == 0) {
            return m.report().finished();
          }
        }
        return false;
      },
      absl::Seconds(120), absl::Milliseconds(50)))
      << daemons_["worker-0"]->LogTail(30);
  for (const proto::MemberStatus& m : last.members()) {
    if (m.role() == "worker" && m.index() == 0) {
      EXPECT_THAT(m.parts(), ::testing::ElementsAre(0, 1));
    }
  }
  // Every row of each epoch was trained once, but for those in worker 1's
  // shuffle window when it last reported (read, not trained, not counted):
  // nothing is counted twice.
  const std::vector<int64_t> epochs = EpochExamples(last);
  std::printf("examples by epoch after the kill: %s (of %d each)\n",
              absl::StrJoin(epochs, ", ").c_str(), kTrainRows);
  ASSERT_EQ(epochs.size(), 4u);
  EXPECT_LE(epochs[0], kTrainRows);
  EXPECT_GE(epochs[0], kTrainRows - SkipBound());
  for (int e = 1; e < 4; ++e) {
    EXPECT_EQ(epochs[e], kTrainRows) << "epoch " << e << ", after the kill";
  }
}

// Reads summary.json's "examples_per_epoch" list.
std::vector<int64_t> SummaryEpochs(const std::string& json) {
  std::vector<int64_t> out;
  const size_t at = json.find("\"examples_per_epoch\": [");
  if (at == std::string::npos) return out;
  const size_t begin = json.find('[', at) + 1;
  const std::string list = json.substr(begin, json.find(']', begin) - begin);
  for (absl::string_view n : absl::StrSplit(list, ',')) {
    int64_t v = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(n), &v)) out.push_back(v);
  }
  return out;
}

TEST_F(StreamTest, AStoppedJobResumesFromItsPositionsAndExportsWithoutIt) {
  // Lines of about 250 bytes: check the skip bound's assumption.
  ASSERT_GT(LongestLine(dir_ + "/train.txt"), 100);
  config_ = testing::WriteConfig(
      "job.yaml", absl::StrCat("cluster:\n  coordinator: 127.0.0.1:0\n"
                               "  ps: [127.0.0.1:0]\n  workers: [127.0.0.1:0, "
                               "127.0.0.1:0]\n"
                               "heartbeat:\n  interval_s: 0.2\n  timeout_s: 2\n"
                               "checkpoint:\n  interval_s: 0.5\n",
                               JobSections(dir_ + "/train.txt")));
  const std::string run_dir = dir_ + "/run";
  auto launch = [&](const std::string& log, bool resume) {
    std::vector<std::string> argv = {
        (fs::path(testing::BinDir()) / "deploy/launcher").string(),
        "--config",
        config_,
        "--run_dir",
        run_dir,
        "--bin_dir",
        testing::BinDir(),
        "--progress_s",
        "0.5"};
    if (resume) argv.push_back("--resume");
    return Subprocess::Start("launcher", argv, dir_ + "/" + log);
  };
  absl::StatusOr<std::unique_ptr<Subprocess>> first =
      launch("first.log", false);
  ASSERT_TRUE(first.ok()) << first.status();
  // A third of the first epoch trained (room left before its end on a
  // loaded machine): stop the whole job (SIGTERM, as a user's Ctrl-C).
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<std::string> port =
            ReadFile(run_dir + "/coordinator.port");
        if (!port.ok()) return false;
        auto status = Client(absl::StrCat("127.0.0.1:",
                                          absl::StripAsciiWhitespace(*port)))
                          .ClusterStatus();
        if (!status.ok()) return false;
        const std::vector<int64_t> e = EpochExamples(*status);
        return !e.empty() && e[0] >= kTrainRows / 3;
      },
      absl::Seconds(90), absl::Milliseconds(10)))
      << (*first)->LogTail(20);
  (*first)->Signal(SIGTERM);
  ASSERT_TRUE((*first)->Wait(absl::Seconds(60)).has_value());
  const std::vector<int64_t> before =
      SummaryEpochs(testing::ReadText(run_dir + "/summary.json"));
  ASSERT_FALSE(before.empty()) << testing::ReadText(run_dir + "/summary.json");
  ASSERT_LT(before[0], kTrainRows);

  absl::StatusOr<std::unique_ptr<Subprocess>> second =
      launch("second.log", true);
  ASSERT_TRUE(second.ok()) << second.status();
  const std::optional<int> exit = (*second)->Wait(absl::Seconds(120));
  ASSERT_TRUE(exit.has_value()) << (*second)->LogTail(30);
  EXPECT_EQ(*exit, 0) << (*second)->LogTail(30);
  const std::string json = testing::ReadText(run_dir + "/summary.json");
  const std::vector<int64_t> after = SummaryEpochs(json);
  ASSERT_EQ(after.size(), 2u) << json;
  // The first epoch in all: trained before the stop plus after the resume,
  // within the rows in the windows at the last saved positions (skipped) and
  // those trained after them (trained twice).
  const int64_t first_epoch = before[0] + after[0];
  std::printf("epoch 1: %lld before the stop, %lld after the resume (of %d)\n",
              static_cast<long long>(before[0]),
              static_cast<long long>(after[0]), kTrainRows);
  EXPECT_NEAR(static_cast<double>(first_epoch), kTrainRows,
              0.01 * kTrainRows + 2 * SkipBound())
      << "before " << before[0] << ", after " << after[0];
  EXPECT_EQ(after[1] + (before.size() > 1 ? before[1] : 0), kTrainRows);

  // The schema is the config's: export and predict with the training file
  // gone.
  fs::remove(dir_ + "/train.txt");
  const std::string model = dir_ + "/model.npz";
  const int exported =
      testing::RunToEnd({(fs::path(testing::BinDir()) / "tools/psctl").string(),
                         "export", "--config", config_, "--checkpoint_dir",
                         run_dir + "/checkpoints", "--out", model},
                        dir_ + "/export.log");
  ASSERT_EQ(exported, 0) << testing::ReadText(dir_ + "/export.log");
  const int predicted = testing::RunToEnd(
      {(fs::path(testing::BinDir()) / "tools/predict").string(), "--model",
       model, "--data", dir_ + "/test.txt", "--out", dir_ + "/p.csv"},
      dir_ + "/predict.log");
  const std::string predict_log = testing::ReadText(dir_ + "/predict.log");
  ASSERT_EQ(predicted, 0) << predict_log;
  const double auc = testing::Figure(predict_log, "auc");
  EXPECT_GT(auc, 0.6) << predict_log;
  EXPECT_NEAR(auc, testing::Figure(json, "\"auc\":"), 1e-3) << json;
}

TEST_F(StreamTest, ABadLineInTheStreamStopsTheJobNamingIt) {
  // Line 30001 of the file is cut short.
  const std::string bad = dir_ + "/bad.txt";
  {
    std::ifstream in(dir_ + "/train.txt");
    std::ofstream out(bad);
    std::string line;
    for (int i = 1; std::getline(in, line); ++i) {
      out << (i == kTrainRows / 2 + 1 ? line.substr(0, 20) : line) << "\n";
    }
  }
  config_ = testing::WriteConfig(
      "job.yaml", absl::StrCat("cluster:\n  coordinator: 127.0.0.1:0\n"
                               "  ps: [127.0.0.1:0]\n  workers: [127.0.0.1:0, "
                               "127.0.0.1:0]\n",
                               JobSections(bad)));
  const std::string run_dir = dir_ + "/run";
  const int status = testing::RunToEnd(
      {(fs::path(testing::BinDir()) / "deploy/launcher").string(), "--config",
       config_, "--run_dir", run_dir, "--bin_dir", testing::BinDir()},
      dir_ + "/launcher.log");
  EXPECT_NE(status, 0);
  // Whichever worker's part holds it (parts split by bytes, not lines).
  const std::string worker_log =
      testing::ReadText(run_dir + "/logs/worker-0.log") +
      testing::ReadText(run_dir + "/logs/worker-1.log");
  EXPECT_THAT(testing::ReadText(dir_ + "/launcher.log"),
              HasSubstr("exited with status 2"));
  EXPECT_THAT(worker_log,
              HasSubstr(absl::StrCat(bad, ":", kTrainRows / 2 + 1, ":")))
      << worker_log;
  EXPECT_THAT(worker_log, HasSubstr("a Criteo line has 40 tab-separated"));
}

}  // namespace
}  // namespace downpour

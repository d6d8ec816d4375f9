// The launcher binary under faults, on real daemons on loopback ephemeral
// ports: a ps killed with SIGKILL is restarted and the job still ends with a
// summary that lists the fault; a ps that refuses its corrupt checkpoint is
// not restarted and the summary gives its own reason; a launcher killed with
// SIGKILL leaves no daemon behind; the next launch on its run folder stops any
// that were left.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "deploy/run_dir_guard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing::WaitUntil;

// Two ps, two workers on simulated compute (each step sleeps, so a job's
// length is known), checkpoints and coordinator state left to the launcher's
// defaults under the run folder.
std::string JobYaml(int steps) {
  return absl::StrCat(
      "cluster:\n  coordinator: 127.0.0.1:0\n"
      "  ps: [127.0.0.1:0, 127.0.0.1:0]\n  workers: [127.0.0.1:0, "
      "127.0.0.1:0]\n"
      "heartbeat:\n  interval_s: 0.2\n  timeout_s: 2\n"
      "rpc:\n  deadline_s: 2\n  connect_timeout_s: 5\n"
      "model:\n  layers: [784, 32, 10]\n"
      "data:\n  source: synthetic\n  train_examples: 400\n  test_examples: "
      "100\n"
      "compute:\n  device: simulated\n  simulated_step_ms: 10\n"
      "training:\n  steps: ",
      steps,
      "\n  eval_every_steps: 0\n"
      "checkpoint:\n  interval_s: 0.5\n");
}

// The digits after `key` in `json`, or "" when `key` is absent.
std::string ExtractNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find(key);
  if (at == std::string::npos) return "";
  size_t end = at + key.size();
  while (end < json.size() && absl::ascii_isdigit(json[end])) ++end;
  return json.substr(at + key.size(), end - at - key.size());
}

class LauncherFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::WriteConfig("job.yaml", JobYaml(600));
    run_dir_ = testing::TestDir() + "/run";
  }

  // Starts the launcher binary on config_ and run_dir_; its output in `log`.
  std::unique_ptr<Subprocess> StartLauncher(
      const std::string& log, bool resume = false,
      std::vector<std::string> flags = {}) {
    std::vector<std::string> argv = {
        (fs::path(testing::BinDir()) / "deploy/launcher").string(),
        "--config",
        config_,
        "--run_dir",
        run_dir_,
        "--bin_dir",
        testing::BinDir(),
        "--progress_s",
        "0.5"};
    if (resume) argv.push_back("--resume");
    for (std::string& f : flags) argv.push_back(std::move(f));
    auto launcher =
        Subprocess::Start("launcher", argv, testing::TestDir() + "/" + log);
    EXPECT_TRUE(launcher.ok()) << launcher.status();
    return launcher.ok() ? *std::move(launcher) : nullptr;
  }

  // The pid file's daemons once it names every one of the job's.
  std::map<std::string, PidEntry> WaitForDaemons() {
    std::map<std::string, PidEntry> daemons;
    const bool all = WaitUntil(
        [&] {
          daemons.clear();
          for (const PidEntry& e : ReadPidFile(run_dir_)) daemons[e.name] = e;
          return daemons.size() == 6;  // launcher, coordinator, 2 ps, 2 workers
        },
        absl::Seconds(30), absl::Milliseconds(20));
    EXPECT_TRUE(all) << "launcher.pids names " << daemons.size()
                     << " processes";
    return daemons;
  }

  // Both workers have trained `steps` steps, by the coordinator's
  // ClusterStatus.
  bool WaitForSteps(int steps) {
    absl::StatusOr<std::string> port = ReadFile(run_dir_ + "/coordinator.port");
    if (!port.ok()) return false;
    RpcSection rpc;
    rpc.deadline_s = 1;
    membership::CoordinatorClient client(
        absl::StrCat("127.0.0.1:", absl::StripAsciiWhitespace(*port)), rpc,
        "test");
    return WaitUntil(
        [&] {
          auto status = client.ClusterStatus();
          if (!status.ok()) return false;
          int trained = 0;
          for (const auto& m : status->members()) {
            if (m.role() == "worker" && m.report().step() >= steps) ++trained;
          }
          return trained == 2;
        },
        absl::Seconds(30), absl::Milliseconds(50));
  }

  static bool Runs(const PidEntry& e) {
    absl::StatusOr<unsigned long long> start = ProcessStartTime(e.pid);
    return start.ok() && *start == e.start_time;
  }

  std::string config_;
  std::string run_dir_;
};

// Without a backup the restarted ps comes back from its checkpoint: what it
// had acknowledged since is lost, and the outcome says so (counted exactly by
// tests/fault_test.cc). --fail_on_loss turns that into exit status 4.
TEST_F(LauncherFaultTest, AKilledPsIsRestartedAndTheSummaryListsIt) {
  std::unique_ptr<Subprocess> launcher =
      StartLauncher("launcher.log", false, {"--fail_on_loss"});
  ASSERT_NE(launcher, nullptr);
  std::map<std::string, PidEntry> daemons = WaitForDaemons();
  ASSERT_TRUE(WaitForSteps(50)) << launcher->LogTail(30);
  ASSERT_EQ(::kill(daemons["ps 0"].pid, SIGKILL), 0);

  const std::optional<int> status = launcher->Wait(absl::Seconds(60));
  ASSERT_TRUE(status.has_value()) << "launcher still running:\n"
                                  << launcher->LogTail(30);
  absl::StatusOr<std::string> json = ReadFile(run_dir_ + "/summary.json");
  ASSERT_TRUE(json.ok()) << json.status();
  // The kill rarely lands just after a checkpoint with nothing since.
  const bool lost = !absl::StrContains(*json, "\"acked_pushes_lost\": 0,");
  if (lost) {
    EXPECT_EQ(*status, 4) << "--fail_on_loss\n" << launcher->LogTail(40);
    EXPECT_THAT(*json,
                HasSubstr("\"ok\": false,\n  \"outcome\": \"succeeded with "
                          "loss: "));
    // The outcome names the count the summary holds, "1 acknowledged push"
    // or "N acknowledged pushes".
    const std::string count = ExtractNumber(*json, "\"acked_pushes_lost\": ");
    ASSERT_FALSE(count.empty()) << *json;
    EXPECT_THAT(*json, HasSubstr(absl::StrCat(count, " acknowledged push",
                                              count == "1" ? "" : "es",
                                              " of shard 0\"")));
  } else {
    EXPECT_EQ(*status, 0) << launcher->LogTail(40);
    EXPECT_THAT(*json, HasSubstr("\"outcome\": \"succeeded\""));
  }
  EXPECT_THAT(*json,
              HasSubstr("\"daemon\": \"ps 0\", \"what\": \"killed by signal 9 "
                        "(Killed)\", \"exit_status\": 137, \"signal\": 9, "
                        "\"action\": \"restarted\""));
  EXPECT_THAT(*json,
              HasSubstr("\"recovery\": \"the job saw 1 fault: ps 0 killed"));
  // The restarted ps found the shard's checkpoint in the run folder.
  EXPECT_TRUE(fs::exists(run_dir_ + "/checkpoints"));
}

TEST_F(LauncherFaultTest,
       APsThatRefusesItsCorruptCheckpointEndsTheJobWithItsReason) {
  // A short job leaves checkpoints of both shards in the run folder.
  config_ = testing::WriteConfig("job.yaml", JobYaml(100));
  std::unique_ptr<Subprocess> first = StartLauncher("first.log");
  ASSERT_NE(first, nullptr);
  const std::optional<int> done = first->Wait(absl::Seconds(60));
  ASSERT_TRUE(done.has_value()) << "launcher still running:\n"
                                << first->LogTail(30);
  ASSERT_EQ(*done, 0) << first->LogTail(40);
  // Every generation of shard 1 is corrupted: nothing to fall back on.
  int corrupted = 0;
  for (const auto& entry :
       fs::directory_iterator(run_dir_ + "/checkpoints/ps-1")) {
    std::FILE* f = std::fopen(entry.path().c_str(), "r+b");
    ASSERT_NE(f, nullptr) << entry.path();
    std::fseek(f, 50, SEEK_SET);
    const int byte = std::fgetc(f);
    std::fseek(f, 50, SEEK_SET);
    std::fputc(byte ^ 0xff, f);
    std::fclose(f);
    ++corrupted;
  }
  ASSERT_GT(corrupted, 0) << "the first job left no checkpoint of shard 1";

  // Resumed, ps 1 refuses at start (exit 2). The launcher ends the job at
  // that first refusal: ps 1 is started once and never restarted, so the
  // summary lists exactly one fault, ps 1 "gave up" with status 2, and no
  // "restarted" (with restarts, 3 more refusals and their backoffs).
  const absl::Time start = absl::Now();
  std::unique_ptr<Subprocess> resumed =
      StartLauncher("resumed.log", /*resume=*/true);
  ASSERT_NE(resumed, nullptr);
  const std::optional<int> status = resumed->Wait(absl::Seconds(60));
  ASSERT_TRUE(status.has_value()) << "launcher still running:\n"
                                  << resumed->LogTail(30);
  EXPECT_EQ(*status, 1) << resumed->LogTail(40);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30))
      << "not ended at the refusal";
  absl::StatusOr<std::string> json = ReadFile(run_dir_ + "/summary.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"faults\": [\n    {\"time_s\": "));
  EXPECT_THAT(*json, HasSubstr("\"daemon\": \"ps 1\", \"what\": \"exited with "
                               "status 2\", \"exit_status\": 2, \"signal\": 0, "
                               "\"action\": \"gave up\""));
  EXPECT_THAT(*json, Not(HasSubstr("\"action\": \"restarted\"")));
  EXPECT_THAT(*json,
              HasSubstr("\"recovery\": \"the job saw 1 fault: ps 1 exited "
                        "with status 2, gave up\""));
  // The ps's own message, not a pointer to its log: "ps 1 exited with status
  // 2 after 0.1 s: checkpoint '.../ps-1/...' is corrupt (...); move it away
  // ...", in `failure` and as the first line of `outcome`.
  for (const std::string key : {"\"failure\": \"", "\"outcome\": \"failed: "}) {
    const size_t at = json->find(key);
    ASSERT_NE(at, std::string::npos) << key << " in " << *json;
    const std::string value =
        json->substr(at + key.size(), json->find('\n', at) - at - key.size());
    EXPECT_THAT(value, StartsWith("ps 1 exited with status 2 after ")) << key;
    EXPECT_THAT(value,
                HasSubstr(" s: checkpoint '" + run_dir_ + "/checkpoints/ps-1/"))
        << key;
    EXPECT_THAT(value, HasSubstr("' is corrupt (")) << key;
    EXPECT_THAT(value, HasSubstr("move it away")) << key;
  }
}

// A worker that fails once the coordinator says the job is over is not
// restarted: the restart would only be told to stop, and fail the same way
// (chaos seeds 42 and 48: a worker whose last pushes found no server of a
// shard that died as the job ended, restarted for 110 s until the launcher
// gave up and called the job failed). Here worker 1 trains its steps, then
// waits until `psctl status` says the job is done and exits 1.
TEST_F(LauncherFaultTest, AWorkerThatFailsOnceTheJobIsOverIsNotRestarted) {
  config_ = testing::WriteConfig("job.yaml", JobYaml(100));
  const fs::path bin = fs::path(testing::TestDir()) / "bin";
  const fs::path real = testing::BinDir();
  for (const char* b :
       {"coordinator/coordinator", "server/ps_server", "tools/psctl"}) {
    fs::create_directories((bin / b).parent_path());
    fs::create_symlink(real / b, bin / b);
  }
  fs::create_directories(bin / "worker");
  const std::string worker = (bin / "worker/ps_worker").string();
  {
    std::ofstream script(worker);
    script << "#!/bin/sh\n"
           << (real / "worker/ps_worker").string() << " \"$@\" || exit $?\n"
           << "case \" $* \" in *' --index 1 '*) ;; *) exit 0 ;; esac\n"
           << "for a; do [ \"$p\" = --coordinator ] && c=$a; p=$a; done\n"
           << "until " << (bin / "tools/psctl").string()
           << " --coordinator \"$c\" status 2>/dev/null | grep -q 'job done'; "
              "do sleep 0.1; done\n"
           << "echo 'worker 1: pushes to shard 0 found no server' >&2\n"
           << "exit 1\n";
  }
  fs::permissions(worker, fs::perms::owner_all);

  std::unique_ptr<Subprocess> launcher =
      StartLauncher("launcher.log", false, {"--bin_dir", bin.string()});
  ASSERT_NE(launcher, nullptr);
  const std::optional<int> status = launcher->Wait(absl::Seconds(90));
  ASSERT_TRUE(status.has_value()) << "launcher still running:\n"
                                  << launcher->LogTail(30);
  EXPECT_EQ(*status, 0) << launcher->LogTail(40);
  absl::StatusOr<std::string> json = ReadFile(run_dir_ + "/summary.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"outcome\": \"succeeded\""));
  EXPECT_THAT(*json,
              HasSubstr("\"daemon\": \"worker 1\", \"what\": \"exited with "
                        "status 1\", \"exit_status\": 1, \"signal\": 0, "
                        "\"action\": \"left down\""));
  EXPECT_THAT(*json, HasSubstr("the job is over (every worker finished its "
                               "steps): a restart would only be told to stop"));
  EXPECT_THAT(*json, Not(HasSubstr("\"action\": \"restarted\"")));
}

TEST_F(LauncherFaultTest, AKilledLauncherLeavesNoDaemonBehind) {
  std::unique_ptr<Subprocess> launcher = StartLauncher("launcher.log");
  ASSERT_NE(launcher, nullptr);
  std::map<std::string, PidEntry> daemons = WaitForDaemons();
  ASSERT_TRUE(WaitForSteps(10)) << launcher->LogTail(30);
  launcher->Signal(SIGKILL);
  ASSERT_TRUE(launcher->Wait(absl::Seconds(5)).has_value());
  std::set<std::string> left;
  const bool gone = WaitUntil(
      [&] {
        left.clear();
        for (const auto& [name, e] : daemons) {
          if (name != "launcher" && Runs(e)) left.insert(name);
        }
        return left.empty();
      },
      absl::Seconds(30), absl::Milliseconds(50));
  EXPECT_TRUE(gone) << "still running 30 s after the launcher died: "
                    << absl::StrJoin(left, ", ");
  for (const auto& [name, e] : daemons) {
    if (name != "launcher" && Runs(e)) ::kill(e.pid, SIGKILL);
  }
}

TEST_F(LauncherFaultTest, TheNextLaunchStopsDaemonsAKilledLauncherLeft) {
  std::unique_ptr<Subprocess> first = StartLauncher("first.log");
  ASSERT_NE(first, nullptr);
  std::map<std::string, PidEntry> daemons = WaitForDaemons();
  ASSERT_TRUE(WaitForSteps(10)) << first->LogTail(30);
  first->Signal(SIGKILL);
  ASSERT_TRUE(first->Wait(absl::Seconds(5)).has_value());
  // A daemon of that launcher hung for good (stopped; its parent lives, so
  // no kernel signal ends it), listed in the pid file the killed launcher
  // left. A stopped ps_server would not do: its process group is orphaned
  // when its launcher dies, and the kernel's SIGHUP and SIGCONT end it.
  auto hung = Subprocess::Start("hung", {"/bin/sleep", "300"},
                                testing::TestDir() + "/hung.log");
  ASSERT_TRUE(hung.ok()) << hung.status();
  (*hung)->Signal(SIGSTOP);
  absl::StatusOr<unsigned long long> started = ProcessStartTime((*hung)->pid());
  ASSERT_TRUE(started.ok()) << started.status();
  std::vector<PidEntry> entries = ReadPidFile(run_dir_);
  ASSERT_FALSE(entries.empty()) << "the killed launcher left no pid file";
  entries.push_back({(*hung)->pid(), *started, "ps 9"});
  ASSERT_TRUE(WritePidFile(run_dir_, entries).ok());

  config_ = testing::WriteConfig("job.yaml", JobYaml(100));
  std::unique_ptr<Subprocess> second = StartLauncher("second.log");
  ASSERT_NE(second, nullptr);
  const std::optional<int> status = second->Wait(absl::Seconds(60));
  ASSERT_TRUE(status.has_value()) << "launcher still running:\n"
                                  << second->LogTail(30);
  EXPECT_EQ(*status, 0) << second->LogTail(40);
  const std::string log = second->LogTail(200);
  EXPECT_THAT(log, HasSubstr(absl::StrCat("left by an earlier launcher (pid ",
                                          first->pid(), ")")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("ps 9 pid ", (*hung)->pid())));
  EXPECT_TRUE((*hung)->Wait(absl::Seconds(15)).has_value())
      << "the hung daemon was not stopped";
  // Nothing the first launcher started is left either (the rest ended on
  // their own, from PR_SET_PDEATHSIG, or were stopped).
  for (const auto& [name, entry] : daemons) {
    EXPECT_FALSE(Runs(entry))
        << name << " (pid " << entry.pid << ") outlived both launchers";
  }
  absl::StatusOr<std::string> json = ReadFile(run_dir_ + "/summary.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"outcome\": \"succeeded\""));
}

}  // namespace
}  // namespace downpour

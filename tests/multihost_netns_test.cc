// Multi-host: the coordinator, each ps and each worker run in a network
// namespace of their own, each with its own address on a virtual switch (veth
// pairs on a bridge inside a separate "switch" namespace, so the machine's own
// network is never touched). The launcher, in a namespace too, starts them in
// its --ssh mode through a stand-in for ssh that maps each host address to its
// namespace (`ip netns exec NS sh -c COMMAND`), so the daemons talk over a real
// virtual network, not loopback, and the launcher's remote mode runs end to
// end.
//
// Needs root and `ip` (iproute2); skips with a message where namespaces cannot
// be made. Every namespace it made is deleted at the end, its processes killed.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/netns_lab.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string DataSection() {
  const std::string mnist = testing::MnistDir();
  if (mnist.empty()) {
    return "data:\n  source: synthetic\n  train_examples: 3000\n  "
           "test_examples: 500\n";
  }
  return absl::StrCat("data:\n  source: mnist\n  path: ", mnist,
                      "\n  train_examples: 3000\n  test_examples: 500\n");
}

TEST(MultihostNetnsTest, DaemonsInTheirOwnNamespacesTrainOverAVirtualNetwork) {
  NetnsLab lab(testing::TestDir());
  const std::string why_not = lab.SetUp({{"ctl", 2},
                                         {"coordinator", 10},
                                         {"ps0", 11},
                                         {"ps1", 12},
                                         {"worker0", 21},
                                         {"worker1", 22}});
  if (!why_not.empty())
    GTEST_SKIP() << "no network namespaces here: " << why_not;

  const std::string dir = testing::TestDir();
  auto at = [&](const std::string& role, int port) {
    return absl::StrCat(lab.host(role).ip, ":", port);
  };
  const std::string config = testing::WriteConfig(
      "cluster.yaml",
      absl::StrCat(
          "cluster:\n  coordinator: ", at("coordinator", 7000), "\n  ps: [",
          at("ps0", 7001), ", ", at("ps1", 7001), "]\n  workers: [",
          at("worker0", 7100), ", ", at("worker1", 7100), "]\n",
          "heartbeat:\n  interval_s: 0.3\n  timeout_s: 5\n"
          "rpc:\n  deadline_s: 5\n  connect_timeout_s: 30\n"
          "model:\n  layers: [784, 64, 10]\n  block_size: 16384\n"
          "optimizer:\n  type: adam\n  learning_rate: 0.003\n"
          "training:\n  batch_size: 32\n  epochs: 30\n  eval_every_steps: 20\n"
          "  target_accuracy: 0.85\n",
          DataSection(), "checkpoint:\n  dir: ", dir,
          "/ckpt\n  interval_s: 2\n",
          "coordinator:\n  state_dir: \"\"\n  history_interval_s: 0.5\n",
          // Plaintext between the namespaces' hosts (a lab no one else
          // reaches).
          "security:\n  insecure_network: true\n"));
  const std::string ssh = lab.WriteSsh(dir + "/netns_ssh");
  const std::string run_dir = dir + "/run";
  auto launcher = Subprocess::Start(
      "launcher",
      {lab.ip(), "netns", "exec", lab.host("ctl").netns,
       (fs::path(testing::BinDir()) / "deploy/launcher").string(), "--config",
       config, "--run_dir", run_dir, "--bin_dir", testing::BinDir(), "--ssh",
       "--ssh_command", ssh, "--progress_s", "1", "--accuracy_mark", "0.8"},
      dir + "/launcher.log");
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  // Bounded: the job takes seconds; a hang ends the test rather than CI.
  const std::optional<int> status = (*launcher)->Wait(absl::Seconds(240));
  ASSERT_TRUE(status.has_value()) << "launcher still running after 240 s:\n"
                                  << (*launcher)->LogTail(40);
  const std::string output = ReadFile(dir + "/launcher.log").value_or("");
  ASSERT_EQ(*status, 0) << output;
  EXPECT_THAT(output, HasSubstr("Training done."));

  // Every member registered from its own namespace's address.
  const std::string coordinator_log =
      ReadFile(run_dir + "/logs/coordinator.log").value_or("");
  for (const char* role : {"ps0", "ps1", "worker0", "worker1"}) {
    EXPECT_THAT(coordinator_log,
                HasSubstr(absl::StrCat("registered from ", lab.host(role).ip)))
        << coordinator_log;
  }
  // The run trained to a modest accuracy, and the launcher saved its record.
  const std::string summary = ReadFile(run_dir + "/summary.json").value_or("");
  const size_t at_accuracy = summary.find("\"accuracy\": ");
  ASSERT_NE(at_accuracy, std::string::npos) << summary;
  EXPECT_GT(std::atof(summary.c_str() + at_accuracy + 12), 0.7) << summary;
  EXPECT_TRUE(fs::exists(run_dir + "/history.json")) << output;
  EXPECT_TRUE(fs::exists(run_dir + "/training.svg")) << output;
}

}  // namespace
}  // namespace downpour

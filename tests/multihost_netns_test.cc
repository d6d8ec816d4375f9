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
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kSubnet[] = "10.213.7.";  // inside our own namespaces only

struct Host {
  std::string role;  // "ctl", "coordinator", "ps0", ...
  std::string ip;
  std::string netns;
};

// Runs a command to its end (bounded); returns (status, output).
std::pair<int, std::string> Run(const std::vector<std::string>& argv) {
  static int n = 0;
  const std::string log =
      absl::StrCat(testing::TestDir(), "/cmd-", n++, ".out");
  auto process = Subprocess::Start("cmd", argv, log);
  if (!process.ok()) return {-1, std::string(process.status().message())};
  const int status = (*process)->Wait(absl::Seconds(30)).value_or(-1);
  return {status, ReadFile(log).value_or("")};
}

std::string IpTool() {
  for (const char* path :
       {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (fs::exists(path)) return path;
  }
  return "";
}

// The namespaces, switch and addresses of one test; torn down by the
// destructor.
class NetnsLab {
 public:
  NetnsLab()
      : ip_(IpTool()), prefix_(absl::StrCat("dpmh", getpid() % 100000)) {}
  ~NetnsLab() { TearDown(); }

  // Empty on success, else why the lab could not be made (the test skips).
  std::string SetUp(const std::vector<std::pair<std::string, int>>& hosts) {
    if (geteuid() != 0)
      return "not root: network namespaces need CAP_SYS_ADMIN";
    if (ip_.empty()) return "no `ip` command (Debian: iproute2)";
    switch_ = prefix_ + "-sw";
    std::string error = Ip({"netns", "add", switch_});
    if (!error.empty()) return "cannot create a network namespace: " + error;
    made_.push_back(switch_);
    for (const auto& step : std::vector<std::vector<std::string>>{
             {"-n", switch_, "link", "set", "lo", "up"},
             {"-n", switch_, "link", "add", "br0", "type", "bridge"},
             {"-n", switch_, "link", "set", "br0", "up"}}) {
      if (!(error = Ip(step)).empty())
        return "cannot make the virtual switch: " + error;
    }
    for (size_t k = 0; k < hosts.size(); ++k) {
      Host host{hosts[k].first, absl::StrCat(kSubnet, hosts[k].second),
                absl::StrCat(prefix_, "-", k)};
      if (!(error = Ip({"netns", "add", host.netns})).empty()) return error;
      made_.push_back(host.netns);
      const std::string port = absl::StrCat("p", k);
      for (const auto& step : std::vector<std::vector<std::string>>{
               {"-n", switch_, "link", "add", port, "type", "veth", "peer",
                "name", "eth0", "netns", host.netns},
               {"-n", switch_, "link", "set", port, "master", "br0"},
               {"-n", switch_, "link", "set", port, "up"},
               {"-n", host.netns, "addr", "add", host.ip + "/24", "dev",
                "eth0"},
               {"-n", host.netns, "link", "set", "eth0", "up"},
               {"-n", host.netns, "link", "set", "lo", "up"}}) {
        if (!(error = Ip(step)).empty())
          return "cannot wire " + host.role + ": " + error;
      }
      hosts_.push_back(host);
    }
    return "";
  }

  const Host& host(const std::string& role) const {
    for (const Host& h : hosts_) {
      if (h.role == role) return h;
    }
    return hosts_.front();
  }
  const std::string& ip() const { return ip_; }

  // A stand-in for ssh: `ssh HOST COMMAND` runs COMMAND in HOST's namespace.
  std::string WriteSsh(const std::string& path) const {
    std::string cases;
    for (const Host& h : hosts_)
      absl::StrAppend(&cases, "  ", h.ip, ") ns=", h.netns, " ;;\n");
    std::ofstream(path)
        << "#!/bin/sh\n# ssh HOST COMMAND -> run COMMAND in HOST's network "
           "namespace\n"
        << "case \"$1\" in\n"
        << cases << "  *) echo \"no test host $1\" >&2; exit 255 ;;\nesac\n"
        << "exec " << ip_ << " netns exec \"$ns\" /bin/sh -c \"$2\"\n";
    chmod(path.c_str(), 0755);
    return path;
  }

 private:
  // Runs `ip args`; returns "" on success, else its output.
  std::string Ip(std::vector<std::string> args) {
    args.insert(args.begin(), ip_);
    auto [status, output] = Run(args);
    return status == 0
               ? ""
               : absl::StrCat("`", absl::StrJoin(args, " "), "`: ", output);
  }

  void TearDown() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
      // Only processes we started live in our namespaces; end any left over.
      auto [status, pids] = Run({ip_, "netns", "pids", *it});
      for (absl::string_view pid :
           absl::StrSplit(pids, '\n', absl::SkipWhitespace())) {
        Run({"/bin/kill", "-9", std::string(absl::StripAsciiWhitespace(pid))});
      }
      Run({ip_, "netns", "del", *it});
    }
    made_.clear();
  }

  const std::string ip_;
  const std::string prefix_;
  std::string switch_;
  std::vector<std::string> made_;
  std::vector<Host> hosts_;
};

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
  NetnsLab lab;
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
          "coordinator:\n  state_dir: \"\"\n  history_interval_s: 0.5\n"));
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

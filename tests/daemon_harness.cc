// Daemon start-up for the integration tests.
#include "tests/daemon_harness.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/mnist.h"
#include "gtest/gtest.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"

namespace downpour::testing {

namespace fs = std::filesystem;

std::string TestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(std::getenv("TEST_TMPDIR")) /
                       absl::StrCat(info->test_suite_name(), ".", info->name());
  fs::create_directories(dir);
  return dir.string();
}

std::string BinDir() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return (fs::path(srcdir ? srcdir : ".") /
          (workspace ? workspace : "downpour"))
      .string();
}

std::string WriteConfig(const std::string& name, const std::string& yaml) {
  const std::string path = (fs::path(TestDir()) / name).string();
  std::ofstream(path) << yaml;
  return path;
}

std::string LoopbackConfig(int num_ps, int num_workers,
                           const std::string& extra,
                           double heartbeat_timeout_s) {
  auto list = [](int n) {
    std::string out = "[";
    for (int i = 0; i < n; ++i)
      absl::StrAppend(&out, i ? ", " : "", "127.0.0.1:0");
    return out + "]";
  };
  return absl::StrCat(
      "cluster:\n  coordinator: 127.0.0.1:0\n  ps: ", list(num_ps),
      "\n  workers: ", list(num_workers),
      "\nheartbeat:\n  interval_s: 0.2\n  timeout_s: ", heartbeat_timeout_s,
      "\n"
      "rpc:\n  deadline_s: 5\n  connect_timeout_s: 20\n",
      "coordinator:\n  state_dir: ", TestDir(), "/coordinator\n", extra);
}

std::string MnistDir() {
  const char* dir = std::getenv("DOWNPOUR_MNIST_DIR");
  if (dir == nullptr || !fs::exists(fs::path(dir) / MnistDigitFile(9)))
    return "";
  return dir;
}

absl::StatusOr<std::unique_ptr<Subprocess>> StartDaemon(
    const std::string& name, const std::string& binary,
    std::vector<std::string> args) {
  std::vector<std::string> argv = {(fs::path(BinDir()) / binary).string()};
  for (std::string& a : args) argv.push_back(std::move(a));
  return Subprocess::Start(name, argv,
                           (fs::path(TestDir()) / (name + ".log")).string());
}

absl::StatusOr<std::string> WaitForPort(Subprocess& daemon,
                                        const std::string& port_file) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    if (auto status = daemon.Poll()) {
      return absl::AbortedError(absl::StrCat(
          daemon.name(), " exited with ", *status, ":\n", daemon.LogTail(20)));
    }
    absl::StatusOr<std::string> text = ReadFile(port_file);
    int port = 0;
    if (text.ok() &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port)) {
      return absl::StrCat("127.0.0.1:", port);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(daemon.name(), " did not listen:\n", daemon.LogTail(20)));
}

namespace {

// Counter `name`, or nullopt when the Status call failed.
std::optional<double> AskCounter(const std::string& address,
                                 const std::string& name) {
  auto stub = proto::Status::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(2));
  proto::GetStatusResponse response;
  if (!stub->GetStatus(&context, proto::GetStatusRequest(), &response).ok()) {
    return std::nullopt;
  }
  auto it = response.counters().find(name);
  return it == response.counters().end() ? -1 : it->second;
}

}  // namespace

double StatusCounter(const std::string& address, const std::string& name) {
  return AskCounter(address, name).value_or(-1);
}

double LiveCounter(const std::string& address, const std::string& name,
                   absl::Duration patience) {
  const absl::Time give_up = absl::Now() + patience;
  std::optional<double> value = AskCounter(address, name);
  while (!value.has_value() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
    value = AskCounter(address, name);
  }
  return value.value_or(-1);
}

absl::StatusOr<proto::GetStatusResponse> DaemonStatus(
    const std::string& address, absl::Duration patience) {
  const absl::Time give_up = absl::Now() + patience;
  for (;;) {
    auto stub = proto::Status::NewStub(MakeChannel(address));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(2));
    proto::GetStatusResponse response;
    const grpc::Status status =
        stub->GetStatus(&context, proto::GetStatusRequest(), &response);
    if (status.ok()) return response;
    if (absl::Now() >= give_up) {
      return absl::UnavailableError(
          absl::StrCat("Status of ", address, ": ", status.error_message()));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

int RunToEnd(const std::vector<std::string>& argv, const std::string& log) {
  absl::StatusOr<std::unique_ptr<Subprocess>> p =
      Subprocess::Start(argv[0], argv, log);
  if (!p.ok()) return -1;
  std::optional<int> status = (*p)->Wait(absl::Seconds(120));
  return status.has_value() ? *status : -1;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double Figure(const std::string& text, const std::string& name) {
  const size_t at = text.rfind(name + " ");
  if (at == std::string::npos) return NAN;
  return std::atof(text.c_str() + at + name.size() + 1);
}

void DaemonJobTest::TearDown() {
  for (auto& [name, daemon] : daemons_) {
    if (!daemon->Poll().has_value()) daemon->Signal(SIGCONT);
  }
  daemons_.clear();  // SIGKILLs what is left
}

Subprocess& DaemonJobTest::Start(const std::string& name,
                                 const std::string& binary,
                                 std::vector<std::string> args) {
  args.insert(args.begin(), {"--config", config_});
  auto daemon = StartDaemon(name, binary, std::move(args));
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  daemons_[name] = *std::move(daemon);
  return *daemons_[name];
}

void WriteSparseLibsvm(const std::string& path, int rows, uint64_t seed) {
  std::mt19937_64 id_rng(7);  // the same ids in every file
  std::vector<uint64_t> ids(3000);
  for (uint64_t& id : ids) id = id_rng() | (uint64_t{1} << 63);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, 2999);
  std::ofstream out(path);
  for (int r = 0; r < rows; ++r) {
    std::string line;
    int positive = 0;
    for (int f = 0; f < 30; ++f) {
      const int i = pick(rng);
      positive += i % 3 == 0;
      absl::StrAppend(&line, " ", ids[i], ":1");
    }
    out << (positive > 10 ? "+1" : "-1") << line << "\n";
  }
}

}  // namespace downpour::testing

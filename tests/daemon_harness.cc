// Daemon start-up for the integration tests.
#include "tests/daemon_harness.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
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

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/mnist.h"
#include "rpc/server_util.h"
#include "proto/status.grpc.pb.h"
#include "gtest/gtest.h"

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
  return (fs::path(srcdir ? srcdir : ".") / (workspace ? workspace : "downpour")).string();
}

std::string WriteConfig(const std::string& name, const std::string& yaml) {
  const std::string path = (fs::path(TestDir()) / name).string();
  std::ofstream(path) << yaml;
  return path;
}

std::string LoopbackConfig(int num_ps, int num_workers, const std::string& extra) {
  auto list = [](int n) {
    std::string out = "[";
    for (int i = 0; i < n; ++i) absl::StrAppend(&out, i ? ", " : "", "127.0.0.1:0");
    return out + "]";
  };
  return absl::StrCat("cluster:\n  coordinator: 127.0.0.1:0\n  ps: ", list(num_ps),
                      "\n  workers: ", list(num_workers),
                      "\nheartbeat:\n  interval_s: 0.2\n  timeout_s: 2\n"
                      "rpc:\n  deadline_s: 5\n  connect_timeout_s: 20\n",
                      "coordinator:\n  state_dir: ", TestDir(), "/coordinator\n",
                      extra);
}

std::string MnistDir() {
  const char* dir = std::getenv("DOWNPOUR_MNIST_DIR");
  if (dir == nullptr || !fs::exists(fs::path(dir) / MnistDigitFile(9))) return "";
  return dir;
}

absl::StatusOr<std::unique_ptr<Subprocess>> StartDaemon(const std::string& name,
                                                        const std::string& binary,
                                                        std::vector<std::string> args) {
  std::vector<std::string> argv = {(fs::path(BinDir()) / binary).string()};
  for (std::string& a : args) argv.push_back(std::move(a));
  return Subprocess::Start(name, argv, (fs::path(TestDir()) / (name + ".log")).string());
}

absl::StatusOr<std::string> WaitForPort(Subprocess& daemon, const std::string& port_file) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    if (auto status = daemon.Poll()) {
      return absl::AbortedError(absl::StrCat(daemon.name(), " exited with ", *status,
                                             ":\n", daemon.LogTail(20)));
    }
    absl::StatusOr<std::string> text = ReadFile(port_file);
    int port = 0;
    if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port)) {
      return absl::StrCat("127.0.0.1:", port);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(daemon.name(), " did not listen:\n",
                                                  daemon.LogTail(20)));
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
      return absl::UnavailableError(absl::StrCat(
          "Status of ", address, ": ", status.error_message()));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

namespace {

// A connected TCP socket to host:port, or -1.
int ConnectTo(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return -1;
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.substr(0, colon).c_str(),
                  address.substr(colon + 1).c_str(), &hints, &found) != 0) {
    return -1;
  }
  int fd = socket(found->ai_family, found->ai_socktype, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  return fd;
}

// A chunked body (RFC 9112 7.1) decoded; what cannot be parsed ends it.
std::string Dechunk(absl::string_view chunked) {
  std::string out;
  for (;;) {
    const size_t eol = chunked.find("\r\n");
    if (eol == absl::string_view::npos) break;
    absl::string_view size_text = chunked.substr(0, eol);
    size_text = size_text.substr(0, size_text.find(';'));
    size_t size = 0;
    for (char c : size_text) {
      if (!absl::ascii_isxdigit(c)) break;
      size = size * 16 + (absl::ascii_isdigit(c) ? c - '0'
                                                 : absl::ascii_tolower(c) - 'a' + 10);
    }
    if (size == 0 || eol + 2 + size > chunked.size()) break;
    out.append(chunked.data() + eol + 2, size);
    chunked.remove_prefix(std::min(chunked.size(), eol + 2 + size + 2));
  }
  return out;
}

}  // namespace

absl::StatusOr<HttpAnswer> HttpGet(const std::string& address,
                                   const std::string& target,
                                   const std::string& headers) {
  const int fd = ConnectTo(address);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
  }
  const std::string request =
      absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: ", address,
                   "\r\nConnection: close\r\n", headers, "\r\n");
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw;
  char buffer[8192];
  for (;;) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  HttpAnswer answer;
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return answer;  // code 0: no answer
  const std::string head = raw.substr(0, head_end);
  const std::vector<std::string> status_line =
      absl::StrSplit(head.substr(0, head.find("\r\n")), ' ');
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &answer.code)) {
    answer.code = 0;
  }
  answer.body = raw.substr(head_end + 4);
  if (absl::StrContains(absl::AsciiStrToLower(head),
                        "transfer-encoding: chunked")) {
    answer.body = Dechunk(answer.body);
  }
  return answer;
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
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

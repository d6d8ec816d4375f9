// Network namespaces, veth pairs on a bridge, tbf shaping, a stand-in ssh.
#include "tests/netns_lab.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/subprocess.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;

constexpr char kSubnet[] = "10.213.7.";  // inside our own namespaces only

std::string FindTool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string path = absl::StrCat(dir, name);
    if (fs::exists(path)) return path;
  }
  return "";
}

}  // namespace

NetnsLab::NetnsLab(std::string log_dir, std::string prefix)
    : log_dir_(std::move(log_dir)),
      ip_(FindTool("ip")),
      tc_(FindTool("tc")),
      prefix_(absl::StrCat(prefix, getpid() % 100000)) {}

NetnsLab::~NetnsLab() { TearDown(); }

std::string NetnsLab::Command(const std::vector<std::string>& argv) {
  const std::string log =
      absl::StrCat(log_dir_, "/netns-cmd-", commands_++ % 4, ".out");
  std::error_code ignored;
  fs::remove(log, ignored);  // Subprocess appends
  auto process = Subprocess::Start("cmd", argv, log);
  if (!process.ok()) return std::string(process.status().message());
  const int status = (*process)->Wait(absl::Seconds(30)).value_or(-1);
  if (status == 0) return "";
  return absl::StrCat("`", absl::StrJoin(argv, " "),
                      "`: ", ReadFile(log).value_or(""));
}

std::string NetnsLab::Ip(std::vector<std::string> args) {
  args.insert(args.begin(), ip_);
  return Command(args);
}

std::string NetnsLab::SetUp(
    const std::vector<std::pair<std::string, int>>& hosts) {
  if (geteuid() != 0) return "not root: network namespaces need CAP_SYS_ADMIN";
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
    NetnsHost host{hosts[k].first, absl::StrCat(kSubnet, hosts[k].second),
                   absl::StrCat(prefix_, "-", k), absl::StrCat("p", k)};
    if (!(error = Ip({"netns", "add", host.netns})).empty()) return error;
    made_.push_back(host.netns);
    for (const auto& step : std::vector<std::vector<std::string>>{
             {"-n", switch_, "link", "add", host.port, "type", "veth", "peer",
              "name", "eth0", "netns", host.netns},
             {"-n", switch_, "link", "set", host.port, "master", "br0"},
             {"-n", switch_, "link", "set", host.port, "up"},
             {"-n", host.netns, "addr", "add", host.ip + "/24", "dev", "eth0"},
             {"-n", host.netns, "link", "set", "eth0", "up"},
             {"-n", host.netns, "link", "set", "lo", "up"}}) {
      if (!(error = Ip(step)).empty())
        return "cannot wire " + host.role + ": " + error;
    }
    hosts_.push_back(host);
  }
  // Running a command in a namespace needs a mount namespace of its own
  // whose / can be made a slave (`ip netns exec` does that): not so in a
  // chroot whose / is no mount point, where every daemon would fail to start.
  if (!hosts_.empty()) {
    if (std::string exec = Ip({"netns", "exec", hosts_.front().netns, "true"});
        !exec.empty()) {
      return "cannot run a command in a network namespace (a chroot whose / "
             "is not a mount point?): " +
             exec;
    }
  }
  return "";
}

std::string NetnsLab::ShapeLink(const std::string& role,
                                const LinkShape& shape) {
  const double bytes_per_s = shape.rate_mbit * 1e6 / 8;
  const int burst =
      shape.burst_bytes > 0
          ? shape.burst_bytes
          : std::max(16 * 1024, static_cast<int>(bytes_per_s / 100));
  return QdiscOnBothEnds(
      role, "replace",
      {"root", "tbf", "rate",
       absl::StrCat(static_cast<int64_t>(shape.rate_mbit * 1000), "kbit"),
       "burst", absl::StrCat(burst), "latency",
       absl::StrCat(shape.latency_ms, "ms")});
}

std::string NetnsLab::UnshapeLink(const std::string& role) {
  return QdiscOnBothEnds(role, "del", {"root"});
}

std::string NetnsLab::QdiscOnBothEnds(const std::string& role,
                                      const std::string& verb,
                                      const std::vector<std::string>& spec) {
  if (tc_.empty()) return "no `tc` command (Debian: iproute2)";
  const NetnsHost* h = Find(role);
  if (h == nullptr) return absl::StrCat("no host ", role, " in the lab");
  // Each end shapes what it sends: the host towards the switch, the switch's
  // port towards the host.
  for (const auto& [netns, dev] : {std::pair{h->netns, std::string("eth0")},
                                   std::pair{switch_, h->port}}) {
    std::vector<std::string> argv = {ip_,     "netns", "exec", netns, tc_,
                                     "qdisc", verb,    "dev",  dev};
    argv.insert(argv.end(), spec.begin(), spec.end());
    if (std::string error = Command(argv); !error.empty()) return error;
  }
  return "";
}

std::string NetnsLab::CutLink(const std::string& role) {
  const NetnsHost* h = Find(role);
  if (h == nullptr) return absl::StrCat("no host ", role, " in the lab");
  return Ip({"-n", switch_, "link", "set", h->port, "down"});
}

std::string NetnsLab::MendLink(const std::string& role) {
  const NetnsHost* h = Find(role);
  if (h == nullptr) return absl::StrCat("no host ", role, " in the lab");
  return Ip({"-n", switch_, "link", "set", h->port, "up"});
}

std::string NetnsLab::Enter(const std::string& role) {
  const NetnsHost* h = Find(role);
  if (h == nullptr) return absl::StrCat("no host ", role, " in the lab");
  const std::string path = "/run/netns/" + h->netns;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::StrCat("open ", path, ": ", std::strerror(errno));
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int error = errno;
  ::close(fd);
  if (rc != 0) return absl::StrCat("setns ", path, ": ", std::strerror(error));
  return "";
}

const NetnsHost* NetnsLab::Find(const std::string& role) const {
  for (const NetnsHost& h : hosts_) {
    if (h.role == role) return &h;
  }
  return nullptr;
}

const NetnsHost* NetnsLab::HostWithIp(const std::string& ip) const {
  for (const NetnsHost& h : hosts_) {
    if (h.ip == ip) return &h;
  }
  return nullptr;
}

const NetnsHost& NetnsLab::host(const std::string& role) const {
  for (const NetnsHost& h : hosts_) {
    if (h.role == role) return h;
  }
  return hosts_.front();
}

std::string NetnsLab::WriteSsh(const std::string& path) const {
  std::string cases;
  for (const NetnsHost& h : hosts_)
    absl::StrAppend(&cases, "  ", h.ip, ") ns=", h.netns, " ;;\n");
  std::ofstream(path)
      << "#!/bin/sh\n# ssh HOST COMMAND -> run COMMAND in HOST's network "
         "namespace\n"
      << "case \"$1\" in\n"
      << cases << "  *) echo \"no lab host $1\" >&2; exit 255 ;;\nesac\n"
      << "exec " << ip_ << " netns exec \"$ns\" /bin/sh -c \"$2\"\n";
  chmod(path.c_str(), 0755);
  return path;
}

void NetnsLab::KillProcesses() {
  for (const std::string& netns : made_) {
    const std::string log = absl::StrCat(log_dir_, "/netns-pids.out");
    std::error_code ignored;
    fs::remove(log, ignored);
    auto pids = Subprocess::Start("ip", {ip_, "netns", "pids", netns}, log);
    if (pids.ok()) (*pids)->Wait(absl::Seconds(30));
    for (absl::string_view pid : absl::StrSplit(ReadFile(log).value_or(""),
                                                '\n', absl::SkipWhitespace())) {
      // Not this process, which may live in one of them (Enter).
      if (absl::StripAsciiWhitespace(pid) == absl::StrCat(getpid())) continue;
      Command(
          {"/bin/kill", "-9", std::string(absl::StripAsciiWhitespace(pid))});
    }
  }
}

void NetnsLab::TearDown() {
  // Only processes we started live in our namespaces; end any left over.
  KillProcesses();
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    Command({ip_, "netns", "del", *it});
  }
  made_.clear();
  hosts_.clear();
}

}  // namespace downpour

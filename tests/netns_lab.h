// A lab of network namespaces that stands in for a cluster of hosts: each host
// is a namespace of its own with one address on a virtual switch (veth pairs
// on a bridge inside a separate "switch" namespace), so the machine's own
// network is never touched. Links can be rate-limited with tc's tbf on both
// ends, and a stand-in for ssh maps each host's address to its namespace so
// the launcher's --ssh mode runs unchanged.
//
//   NetnsLab lab(log_dir);
//   std::string why_not = lab.SetUp({{"ctl", 2}, {"ps0", 11}, {"worker0",
//   21}}); if (!why_not.empty()) GTEST_SKIP() << why_not; lab.ShapeLink("ps0",
//   {.rate_mbit = 100}); lab.WriteSsh(dir + "/ssh");   // then: launcher --ssh
//   --ssh_command ...
//
// Needs root and `ip` (iproute2); `tc` for ShapeLink. Used by
// tests/multihost_netns_test and bench/scale_model.
#ifndef DOWNPOUR_TESTS_NETNS_LAB_H_
#define DOWNPOUR_TESTS_NETNS_LAB_H_

#include <string>
#include <utility>
#include <vector>

namespace downpour {

struct NetnsHost {
  std::string role;   // "ctl", "coordinator", "ps0", ...
  std::string ip;     // its address on the lab's switch: "10.213.7.11"
  std::string netns;  // its namespace's name
  std::string port;   // its veth's name on the switch side: "p3"
};

// The shape of one host's link, the same in both directions.
struct LinkShape {
  double rate_mbit = 100;  // tbf rate, Mbit/s (10^6 bits), > 0
  // tbf bucket; 0 = 10 ms of traffic at rate_mbit (at least 16 KiB).
  int burst_bytes = 0;
  double latency_ms = 50;  // tbf: the most a packet may wait in its queue
};

// Not thread-safe. Every namespace made is deleted
// by TearDown or the destructor, and the processes in it are killed first.
class NetnsLab {
 public:
  // Output of the commands the lab runs goes to files in `log_dir`. Names are
  // "<prefix><pid>-sw" and "<prefix><pid>-<k>"; addresses 10.213.7.<n> (only
  // inside the lab).
  explicit NetnsLab(std::string log_dir, std::string prefix = "dpmh");
  ~NetnsLab();

  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  // Makes the switch and one host per (role, last byte of its address).
  // Empty on success, else why the lab could not be made (a test skips).
  std::string SetUp(const std::vector<std::pair<std::string, int>>& hosts);

  // Limits `role`'s link with `tc qdisc replace ... root tbf` on both ends of
  // its veth pair: egress from the host and egress from the switch towards
  // the host, so the link carries at most shape.rate_mbit each way. Empty on
  // success, else the failing command and its output.
  std::string ShapeLink(const std::string& role, const LinkShape& shape);

  // Removes the shaping ShapeLink put on `role`'s link (both ends). Empty on
  // success, else the failing command and its output.
  std::string UnshapeLink(const std::string& role);

  // Cuts `role`'s link (its port on the switch goes down: nothing passes
  // either way, as with a pulled cable) or mends it again. Empty on success.
  std::string CutLink(const std::string& role);
  std::string MendLink(const std::string& role);

  // Moves the calling thread into `role`'s namespace (threads it starts
  // later follow it; call it before any other thread exists, so the whole
  // process lives there). Empty on success, else why not.
  std::string Enter(const std::string& role);

  // The host whose address is `ip`; null when none is.
  const NetnsHost* HostWithIp(const std::string& ip) const;

  // The host playing `role`; the first host when there is none.
  const NetnsHost& host(const std::string& role) const;
  const std::vector<NetnsHost>& hosts() const { return hosts_; }
  // The `ip` command's path ("" when none was found).
  const std::string& ip() const { return ip_; }

  // Writes a stand-in for ssh to `path` (made executable) and returns path:
  // `ssh HOST COMMAND` runs COMMAND in HOST's namespace.
  std::string WriteSsh(const std::string& path) const;

  // Kills (SIGKILL) every process left in the lab's namespaces.
  void KillProcesses();

  // Kills the processes in the lab's namespaces and deletes them; idempotent.
  void TearDown();

 private:
  // Runs argv to its end (bounded); returns "" when it exits 0, else the
  // command and its output.
  std::string Command(const std::vector<std::string>& argv);
  std::string Ip(std::vector<std::string> args);
  // The host playing `role`, or null.
  const NetnsHost* Find(const std::string& role) const;
  // `tc qdisc VERB dev D SPEC...` on both ends of `role`'s veth pair.
  std::string QdiscOnBothEnds(const std::string& role, const std::string& verb,
                              const std::vector<std::string>& spec);

  const std::string log_dir_;
  const std::string ip_;
  const std::string tc_;
  const std::string prefix_;
  std::string switch_;
  std::vector<std::string> made_;
  std::vector<NetnsHost> hosts_;
  int commands_ = 0;
};

}  // namespace downpour

#endif  // DOWNPOUR_TESTS_NETNS_LAB_H_

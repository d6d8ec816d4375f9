// The accept4 interposer and its bookkeeping (see accept_guard.h).
#include "rpc/accept_guard.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/fd_limit.h"
#include "common/logging.h"

namespace downpour {
namespace {

using Accept4Fn = int (*)(int, sockaddr*, socklen_t*, int);

// libc's accept4: the next definition after ours.
Accept4Fn RealAccept4() {
  static const Accept4Fn real =
      reinterpret_cast<Accept4Fn>(dlsym(RTLD_NEXT, "accept4"));
  return real;
}

// A peer at its limit is looked at again (are its connections still open?)
// at most this often: a flood from one address costs no more than that.
constexpr absl::Duration kRecheckPeerEvery = absl::Milliseconds(100);

// Tracked connections are swept for closed ones every this many.
constexpr int kSweepEvery = 1024;

// A connection the guard let through: its descriptor and the socket's inode,
// which tells whether the descriptor still refers to it (gRPC closes it
// without telling us; the number may be reused).
struct Tracked {
  int fd;
  ino_t inode;
};

bool StillOpen(const Tracked& tracked) {
  struct stat st;
  return fstat(tracked.fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
         st.st_ino == tracked.inode;
}

enum class Verdict { kKeep, kOverReserve, kOverPerPeer };

class Guard {
 public:
  // Opens the spare descriptor; false when it cannot.
  bool Install() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (spare_ < 0) spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (spare_ < 0) return false;
    installed_.store(true);
    return true;
  }
  bool installed() const { return installed_.load(); }

  // What to do with `fd`, just accepted; records it when kept.
  Verdict Admit(int fd) ABSL_LOCKS_EXCLUDED(mu_) {
    const uint64_t limit = FdLimit();
    const AcceptGuardLimits limits = AcceptGuardLimitsFor(limit);
    if (limit > 0 && static_cast<uint64_t>(fd) + limits.reserve >= limit) {
      counts_.over_reserve.fetch_add(1);
      return Verdict::kOverReserve;
    }
    std::string peer = PeerHost(fd);
    if (peer.empty()) return Verdict::kKeep;
    struct stat st;
    if (fstat(fd, &st) != 0) return Verdict::kKeep;
    absl::MutexLock lock(&mu_);
    Peer& conns = peers_[peer];
    if (static_cast<int>(conns.open.size()) >= limits.per_peer) {
      const absl::Time now = absl::Now();
      if (now - conns.checked >= kRecheckPeerEvery) {
        Prune(&conns.open);
        conns.checked = now;
      }
      if (static_cast<int>(conns.open.size()) >= limits.per_peer) {
        counts_.over_per_peer.fetch_add(1);
        last_peer_ = std::move(peer);
        return Verdict::kOverPerPeer;
      }
    }
    conns.open.push_back({fd, st.st_ino});
    if (++since_sweep_ >= kSweepEvery) Sweep();
    return Verdict::kKeep;
  }

  // accept4 failed with EMFILE/ENFILE: closes the connection waiting on
  // `listener` with the help of the spare descriptor. False when nothing
  // was waiting (or the spare could not make room).
  bool CloseOneWaiting(int listener) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (spare_ >= 0) close(spare_);
    const int fd = RealAccept4()(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC);  // may fail: next time
    if (fd < 0) return false;
    counts_.out_of_fds.fetch_add(1);
    return true;
  }

  AcceptGuardCounts counts() const {
    return {counts_.over_reserve.load(), counts_.over_per_peer.load(),
            counts_.out_of_fds.load()};
  }

  // WARN at most once per 10 s while connections are being closed.
  void MaybeLog() ABSL_LOCKS_EXCLUDED(mu_) {
    const int64_t now = absl::ToUnixSeconds(absl::Now());
    int64_t last = last_log_.load();
    if (now - last < 10 || !last_log_.compare_exchange_strong(last, now)) {
      return;
    }
    const AcceptGuardCounts c = counts();
    const uint64_t limit = FdLimit();
    const AcceptGuardLimits limits = AcceptGuardLimitsFor(limit);
    std::string peer;
    {
      absl::MutexLock lock(&mu_);
      peer = last_peer_;
    }
    SPDLOG_LOGGER_WARN(
        Log(Logger::kRpc),
        "connections closed at accept since start: {} that would have left "
        "fewer than {} of {} descriptors free, {} from an address holding "
        "{} already (last: {}), {} while out of descriptors; clients retry "
        "(docs/SECURITY.md, \"Connections\")",
        c.over_reserve, limits.reserve, limit, c.over_per_peer, limits.per_peer,
        peer.empty() ? "none" : peer, c.out_of_fds);
  }

 private:
  struct Peer {
    std::vector<Tracked> open;
    absl::Time checked = absl::InfinitePast();
  };

  static void Prune(std::vector<Tracked>* open) {
    open->erase(std::remove_if(open->begin(), open->end(),
                               [](const Tracked& t) { return !StillOpen(t); }),
                open->end());
  }

  void Sweep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    since_sweep_ = 0;
    for (auto it = peers_.begin(); it != peers_.end();) {
      Prune(&it->second.open);
      if (it->second.open.empty()) {
        peers_.erase(it++);
      } else {
        ++it;
      }
    }
  }

  std::atomic<bool> installed_{false};
  struct {
    std::atomic<uint64_t> over_reserve{0}, over_per_peer{0}, out_of_fds{0};
  } counts_;
  std::atomic<int64_t> last_log_{0};

  absl::Mutex mu_;
  int spare_ ABSL_GUARDED_BY(mu_) = -1;
  absl::flat_hash_map<std::string, Peer> peers_ ABSL_GUARDED_BY(mu_);
  int since_sweep_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_peer_ ABSL_GUARDED_BY(mu_);
};

Guard& TheGuard() {
  static Guard* const guard = new Guard();
  return *guard;
}

int GuardedAccept4(int listener, sockaddr* address, socklen_t* length,
                   int flags) {
  const Accept4Fn real = RealAccept4();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Guard& guard = TheGuard();
  if (!guard.installed()) return real(listener, address, length, flags);
  const socklen_t length_in = length != nullptr ? *length : 0;
  // Until a connection is kept or none is waiting, as gRPC's own loop does:
  // its listener is edge-triggered, so returning EAGAIN with connections
  // still queued would leave them (and a client behind them) waiting for
  // the next connection to arrive.
  for (;;) {
    if (length != nullptr) *length = length_in;
    const int fd = real(listener, address, length, flags);
    if (fd >= 0) {
      if (guard.Admit(fd) == Verdict::kKeep) return fd;
      close(fd);
    } else if (errno == EMFILE || errno == ENFILE) {
      // No room to accept even into the spare: gRPC retries on the next
      // connection (its listener stays armed).
      if (!guard.CloseOneWaiting(listener)) break;
    } else {
      return fd;  // EAGAIN included: nothing waiting
    }
    guard.MaybeLog();
  }
  guard.MaybeLog();
  errno = EAGAIN;
  return -1;
}

}  // namespace

std::string PeerHost(int fd) {
  sockaddr_storage address;
  socklen_t length = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return "";
  }
  char text[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {  // ::ffff:a.b.c.d
      inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], text, sizeof(text));
    } else {
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    }
  } else {
    return "";  // unix sockets: not capped per peer
  }
  return text;
}

AcceptGuardLimits AcceptGuardLimitsFor(uint64_t fd_limit) {
  AcceptGuardLimits limits;
  if (fd_limit == 0) {  // unknown: no limits
    limits.per_peer = std::numeric_limits<int>::max();
    return limits;
  }
  const int64_t limit =
      static_cast<int64_t>(std::min<uint64_t>(fd_limit, uint64_t{1} << 30));
  limits.reserve = static_cast<int>(std::max<int64_t>(32, limit / 16));
  limits.per_peer =
      static_cast<int>(std::max<int64_t>(16, (limit - limits.reserve) / 4));
  return limits;
}

std::string InstallAcceptGuard() {
  static const std::string* const result = [] {
    void* in_effect = dlsym(RTLD_DEFAULT, "accept4");
    if (in_effect != reinterpret_cast<void*>(&accept4)) {
      return new std::string(
          "accept guard off: accept4 is not interposed in this binary "
          "(gRPC's listeners stop for good if descriptors run out)");
    }
    if (!TheGuard().Install()) {
      return new std::string(
          absl::StrCat("accept guard off: cannot open its spare descriptor: ",
                       std::strerror(errno)));
    }
    const AcceptGuardLimits limits = AcceptGuardLimitsFor(FdLimit());
    return new std::string(absl::StrCat(
        "connections capped at accept: ", limits.reserve,
        " descriptors kept free, ", limits.per_peer, " per peer address"));
  }();
  return *result;
}

AcceptGuardCounts GetAcceptGuardCounts() { return TheGuard().counts(); }

}  // namespace downpour

// The interposer: libgrpc's calls to accept4 bind here (see accept_guard.h).
extern "C" __attribute__((visibility("default"))) int accept4(
    int fd, sockaddr* __restrict address, socklen_t* __restrict length,
    int flags) {
  return downpour::GuardedAccept4(fd, address, length, flags);
}

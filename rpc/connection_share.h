// Which connections a small listener keeps when more arrive than it holds:
// at most `max_total` in all and `max_per_address` from one peer address.
// A new connection is never refused while an older one that has not yet
// sent its request could make room: that one is displaced (closed), so a
// flood of stalled or idle connections, even from the same address as the
// legitimate client (a NAT, 127.0.0.1), cannot keep that client out. Among
// those, the one that got least far is displaced first (a connection that
// sent nothing before one halfway through a ClientHello, before one whose
// handshake the server answered), then the oldest: a client reopening
// silent connections as fast as they are closed cannot displace a scraper
// in the middle of its TLS handshake. The listener it was made for is
// rpc/metrics_http.h's /metrics endpoint.
//
//   ConnectionShare share({/*max_total=*/256, /*max_per_address=*/64});
//   ConnectionShare::Admission admission = share.Admit(peer);
//   if (!admission.admit) { close(fd); return; }       // all are answering
//   if (admission.displace) Close(*admission.displace);  // calls Remove
//   share.Add(id, peer);
//   ...  share.SetProgress(id, 1) as it gets further;
//   ...  share.MarkAnswering(id) once its request is complete;
//   ...  share.Remove(id) when it is closed.
//
// Not thread-safe: one thread (the listener's loop) owns it.
#ifndef DOWNPOUR_RPC_CONNECTION_SHARE_H_
#define DOWNPOUR_RPC_CONNECTION_SHARE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace downpour {

class ConnectionShare {
 public:
  struct Limits {
    int max_total = 256;       // connections held at once, at least 1
    int max_per_address = 64;  // of them from one address, at least 1
  };

  // What to do with a new connection.
  struct Admission {
    bool admit = false;  // false: every candidate is answering; refuse it
    // Set: close this connection (and Remove it) before Add.
    std::optional<uint64_t> displace;
  };

  explicit ConnectionShare(Limits limits);
  ConnectionShare(const ConnectionShare&) = delete;
  ConnectionShare& operator=(const ConnectionShare&) = delete;

  // Room for one more connection from `address`. When `address` holds its
  // share, the displaced one is its own first pending connection; when the
  // listener is full, the first pending one of the address that holds the
  // most connections (ties: the one whose first pending connection comes
  // first). "Pending": added and not marked answering; "first": of least
  // progress, then oldest.
  Admission Admit(const std::string& address) const;

  // REQUIRES: `id` is new and greater than every id added before (ages
  // are told by id), and Admit(address) just allowed it.
  void Add(uint64_t id, const std::string& address);
  // How far `id` got (any scale, higher is further; 0 when added): it is
  // displaced after those with less.
  void SetProgress(uint64_t id, int progress);
  // `id` sent its whole request: it is no longer displaced.
  void MarkAnswering(uint64_t id);
  // `id` was closed; unknown ids are ignored.
  void Remove(uint64_t id);

  int size() const { return static_cast<int>(entries_.size()); }
  const Limits& limits() const { return limits_; }

 private:
  // A pending connection's place in line: least progress, then oldest.
  using Rank = std::pair<int, uint64_t>;  // progress, id

  struct Holder {
    int held = 0;            // connections of this address
    std::set<Rank> pending;  // those not answering, to displace first first
  };
  struct Entry {
    std::string address;
    int progress = 0;
    bool pending = true;
  };

  // The address that gives up a connection when the listener is full; null
  // when no address has a pending one.
  const Holder* LargestWithPending() const;

  const Limits limits_;
  std::map<uint64_t, Entry> entries_;
  std::map<std::string, Holder> holders_;
};

}  // namespace downpour

#endif  // DOWNPOUR_RPC_CONNECTION_SHARE_H_

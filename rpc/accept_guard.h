// Keeps a daemon's gRPC listeners accepting when connections would exhaust its
// file descriptors, and bounds the connections one peer address may hold.
//
// gRPC 1.51 stops accepting on a listener for good the first time accept()
// fails with EMFILE, and offers no way to cap connections before it accepts
// them (GRPC_ARG_MAX_ALLOWED_INCOMING_CONNECTIONS came later; a socket
// mutator that refuses a connection stops the listener too). So this file
// interposes libc's accept4 for the whole process: libgrpc calls accept4
// through the dynamic linker, and a definition in our own binary comes first
// (ELF symbol interposition, the mechanism LD_PRELOAD uses). Once
// InstallAcceptGuard ran, every accepted connection is checked:
//
//  - daemon-wide: a connection whose descriptor leaves fewer than
//    `reserve` descriptors free (descriptors are allocated lowest first, so
//    descriptor n means n are in use) is closed at once: the reserve stays
//    for the daemon's own work (checkpoints, its own calls, the self-check);
//  - per peer: a connection from an address that already holds
//    `per_peer` live connections is closed at once;
//  - EMFILE/ENFILE anyway (descriptors taken by something else): a spare
//    descriptor held for this is closed, the waiting connection accepted
//    and closed, the spare reopened, and gRPC is told EAGAIN, so its
//    listener waits for the next connection instead of dying.
//
// A closed connection is a reset or end of stream for the client, which
// retries (gRPC reconnects with backoff). Counted in AcceptGuardCounts and
// logged (WARN, at most once per 10 s). Thread-safe. Without
// InstallAcceptGuard, accept4 behaves as libc's.
#ifndef DOWNPOUR_RPC_ACCEPT_GUARD_H_
#define DOWNPOUR_RPC_ACCEPT_GUARD_H_

#include <cstdint>
#include <string>

namespace downpour {

struct AcceptGuardLimits {
  int reserve = 0;   // descriptors kept free for the daemon's own use
  int per_peer = 0;  // live connections one peer address may hold
};

// The limits for a soft descriptor limit of `fd_limit`: reserve = max(32,
// fd_limit / 16); per_peer = max(16, (fd_limit - reserve) / 4), so that no
// single address can take the connections every other one needs. A limit of 0
// (unknown) means no limits.
AcceptGuardLimits AcceptGuardLimitsFor(uint64_t fd_limit);

// The address of connected socket `fd`'s peer without its port, as the
// per-peer cap counts it ("10.0.0.7", "::1"; an IPv4-mapped IPv6 address
// as IPv4); "" when unknown or not an IP socket.
std::string PeerHost(int fd);

// Turns the guard on for this process (idempotent; StartServer calls it),
// with AcceptGuardLimitsFor(the soft limit at each accept). Returns what it
// did for the startup log, or why it cannot work ("accept4 is not
// interposed ...": then gRPC's listeners behave as without it).
std::string InstallAcceptGuard();

// Connections closed by the guard since start, by reason.
struct AcceptGuardCounts {
  uint64_t over_reserve = 0;   // would have left fewer than `reserve` free
  uint64_t over_per_peer = 0;  // the peer held `per_peer` already
  uint64_t out_of_fds = 0;     // accept failed with EMFILE/ENFILE
};
AcceptGuardCounts GetAcceptGuardCounts();

}  // namespace downpour

#endif  // DOWNPOUR_RPC_ACCEPT_GUARD_H_

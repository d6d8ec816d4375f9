// Starting a gRPC server with the options every Downpour daemon needs, channels
// with our limits, and the process-wide record of RPC latencies.
#ifndef DOWNPOUR_RPC_SERVER_UTIL_H_
#define DOWNPOUR_RPC_SERVER_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/counters.h"
#include "grpcpp/grpcpp.h"

namespace downpour {

// Largest gRPC message we send or accept: payloads are chunked well below it.
constexpr int kMaxMessageBytes = 64 << 20;

// Connection management (StartServer, MakeChannel): keepalive pings every
// 20 s, a peer that does not answer one in 10 s is dropped; a server closes a
// connection idle for 5 minutes and a TLS/HTTP2 handshake not done in 10 s
// (measured: a raw TCP connection that sends nothing is closed after 10 s, in
// plaintext and TLS alike: tests/connection_test); no connection lives
// longer than an hour (gRPC adds +-10% jitter): the server sends GOAWAY,
// calls in flight get 5 minutes to finish, clients reconnect for the next
// call (rpc.deadline_s bounds our calls far below that; a health Watch
// stream is cancelled and the prober watches again). One connection may have
// 1024 calls open at once (a worker keeps at most kPushRequestsPerShard = 8
// push requests and a few pulls in flight per shard).
constexpr int kKeepaliveTimeMs = 20'000;
constexpr int kKeepaliveTimeoutMs = 10'000;
constexpr int kMaxConnectionIdleMs = 300'000;
constexpr int kMaxConnectionAgeMs = 3'600'000;
constexpr int kMaxConnectionAgeGraceMs = 300'000;
constexpr int kHandshakeTimeoutMs = 10'000;
constexpr int kMaxConcurrentStreams = 1024;

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;         // the bound port (the ephemeral one when asked for 0)
  std::string address;  // host:port with the bound port
};

// Binds `address` (host:port, port 0 = ephemeral) and starts serving `services`
// with the process's transport (rpc/security.h: TLS and tokens once
// InstallSecurity ran, plaintext otherwise; the log says which, loudly for
// plaintext off loopback), the accept guard (rpc/accept_guard.h: connections
// capped per daemon and per peer address; installed by the first call, for
// the whole process) and SetConnectionLimits,
// plus the standard grpc.health.v1.Health service (gRPC's default one: SERVING
// for the whole server, "", from start until Shutdown, then NOT_SERVING), so
// Kubernetes gRPC probes and grpc_health_probe work unchanged. Every call
// served is timed into RpcLatencies() as "served:<Service>/<Method>".
// SO_REUSEPORT is off, so a port already in use is an error:
// Unavailable "cannot listen on 127.0.0.1:7001 (ps 0): address in use or not
// available; stop the process holding it or change the port in the config".
// `who` names the daemon in messages.
absl::StatusOr<StartedServer> StartServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    const std::string& who);

// A channel with our message limits, keepalive and reconnect settings, and the
// process's transport credentials (TLS and its role token once installed).
// Every call made on it is timed into RpcLatencies() as
// "called:<Service>/<Method>". `fresh_connection`: a connection of its own
// rather than one shared with the process's other channels to the same address
// (AcceptWatch).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           bool fresh_connection = false);

// The latency of every RPC this process served (StartServer) or made
// (MakeChannel), by kind. Process-wide, as gRPC's own interceptor registry is,
// because the channels are made deep inside clients; StatusService reports it.
// Thread-safe.
Counters& RpcLatencies();

// The name a call is timed under: "served:" or "called:" and the gRPC method
// without its leading "/" and our package:
// "/downpour.proto.ParameterServer/Pull"
// -> "served:ParameterServer/Pull"; "/grpc.health.v1.Health/Check" ->
// "served:grpc.health.v1.Health/Check".
std::string LatencyName(bool served, absl::string_view method);

// Sets glibc malloc up for bulk transfers, once per process; StartServer and
// MakeChannel call it, so every daemon, tool and benchmark gets it. gRPC
// allocates and frees buffers of 0.1-4 MiB per message: with glibc's defaults
// each one above the dynamic mmap threshold is a fresh mmap (page faults and
// zeroing on every message) and every free at the top of the heap trims it
// back to the OS. We set M_MMAP_THRESHOLD to 32 MiB (glibc's maximum) and
// M_TRIM_THRESHOLD to 256 MiB: ps_bench measured pushes 2-2.6x faster and CPU
// per GB 2.4-3.6 -> 1.1-1.4 s (docs/BENCHMARKS.md). The cost: up to 256 MiB of
// freed heap may stay mapped per process. Left alone when the environment's
// GLIBC_TUNABLES already sets malloc tunables (the user's choice wins).
// Returns what it did, for the startup log: "mmap 32 MiB, trim 256 MiB" or
// why not.
std::string TuneMallocForBulkTransfer();

// Returns the process-wide deadline for a call `seconds` from now.
std::chrono::system_clock::time_point DeadlineIn(double seconds);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_SERVER_UTIL_H_

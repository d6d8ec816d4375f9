// Starting a gRPC server with the options every Downpour daemon needs.
#ifndef DOWNPOUR_COMMON_SERVER_UTIL_H_
#define DOWNPOUR_COMMON_SERVER_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace downpour {

// Largest gRPC message we send or accept: payloads are chunked well below it.
constexpr int kMaxMessageBytes = 64 << 20;

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;             // the bound port (the ephemeral one when asked for 0)
  std::string address;      // host:port with the bound port
};

// Binds `address` (host:port, port 0 = ephemeral) and starts serving `services`.
// SO_REUSEPORT is off, so a port already in use is an error:
// Unavailable "cannot listen on 127.0.0.1:7001 (ps 0): address in use or not
// available; stop the process holding it or change the port in the config".
// `who` names the daemon in messages.
absl::StatusOr<StartedServer> StartServer(const std::string& address,
                                          const std::vector<grpc::Service*>& services,
                                          const std::string& who);

// A channel with our message limits and keepalive settings.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// Returns the process-wide deadline for a call `seconds` from now.
std::chrono::system_clock::time_point DeadlineIn(double seconds);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_SERVER_UTIL_H_

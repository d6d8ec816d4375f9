// gRPC server and channel construction shared by the daemons and tools.
#include "common/server_util.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace downpour {

absl::StatusOr<StartedServer> StartServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    const std::string& who) {
  std::vector<std::string> parts = absl::StrSplit(address, ':');
  if (parts.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": listen address '", address, "' is not host:port"));
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  // gRPC sets SO_REUSEPORT by default, which lets two daemons share a port
  // silently; we want "address in use" to be an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  StartedServer started;
  started.server = builder.BuildAndStart();
  if (started.server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address, " (", who,
        "): address in use or not available; stop the process holding it or "
        "change the port in the config"));
  }
  started.port = port;
  parts.back() = std::to_string(port);
  started.address = absl::StrJoin(parts, ":");
  return started;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a peer restarts instead of gRPC's default 1-120 s.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

std::chrono::system_clock::time_point DeadlineIn(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

}  // namespace downpour

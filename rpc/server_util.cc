// gRPC server and channel construction shared by the daemons and tools.
#include "rpc/server_util.h"

#include <malloc.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/server_interceptor.h"
#include "rpc/accept_guard.h"
#include "rpc/security.h"

namespace downpour {
namespace {

namespace gx = grpc::experimental;

// Times one unary call, from its creation (the call starting) to `end`.
class TimingInterceptor final : public gx::Interceptor {
 public:
  TimingInterceptor(std::string name, gx::InterceptionHookPoints end)
      : name_(std::move(name)), end_(end) {}

  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(end_)) {
      const std::chrono::duration<double> took =
          std::chrono::steady_clock::now() - start_;
      RpcLatencies().RecordLatency(name_, took.count());
    }
    methods->Proceed();
  }

 private:
  const std::string name_;
  const gx::InterceptionHookPoints end_;
  const std::chrono::steady_clock::time_point start_ =
      std::chrono::steady_clock::now();
};

// Streaming calls (health Watch) live as long as the peer wants: not timed.
class ServerTiming final : public gx::ServerInterceptorFactoryInterface {
 public:
  gx::Interceptor* CreateServerInterceptor(gx::ServerRpcInfo* info) override {
    if (info->type() != gx::ServerRpcInfo::Type::UNARY) return nullptr;
    return new TimingInterceptor(LatencyName(true, info->method()),
                                 gx::InterceptionHookPoints::PRE_SEND_STATUS);
  }
};

class ClientTiming final : public gx::ClientInterceptorFactoryInterface {
 public:
  gx::Interceptor* CreateClientInterceptor(gx::ClientRpcInfo* info) override {
    if (info->type() != gx::ClientRpcInfo::Type::UNARY) return nullptr;
    return new TimingInterceptor(LatencyName(false, info->method()),
                                 gx::InterceptionHookPoints::POST_RECV_STATUS);
  }
};

// Connection management on every server: a peer that vanished, a connection
// idle for minutes or older than an hour and a handshake that never completes
// are closed, and one connection cannot open unbounded streams.
void SetConnectionLimits(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                              kKeepaliveTimeoutMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Clients ping every kKeepaliveTimeMs; allow that (gRPC's default minimum
  // is 5 minutes and it would close their connections as abusive).
  builder->AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      kKeepaliveTimeMs / 2);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                              kMaxConnectionIdleMs);
  // An authenticated client cannot hold one connection (and its descriptor)
  // for ever by keeping a call open or pinging.
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                              kMaxConnectionAgeMs);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                              kMaxConnectionAgeGraceMs);
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                              kHandshakeTimeoutMs);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                              kMaxConcurrentStreams);
  // A request's metadata is small; this bounds what one call can make us
  // buffer before any handler runs.
  builder->AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 16 << 10);
}

// Says how this server is reached: encrypted, or plaintext on loopback
// (fine: only this machine), or plaintext on the network (loudly).
void LogTransport(const std::string& who, const std::string& address) {
  if (TransportIsSecure()) {
    Log(Logger::kRpc)
        ->info("{} serves on {} with {}", who, address, TransportSummary());
  } else if (IsLoopbackHost(address)) {
    Log(Logger::kRpc)
        ->info(
            "{} serves plaintext gRPC on loopback {}: only this machine can "
            "connect (set security.tls before listening on a network; "
            "docs/SECURITY.md)",
            who, address);
  } else {
    Log(Logger::kRpc)
        ->warn(
            "SECURITY: {} serves UNENCRYPTED, UNAUTHENTICATED gRPC on {} "
            "(security.insecure_network: true): anyone who can reach this "
            "port can read the model, push gradients and end the job. Turn "
            "on security.tls and tokens (deploy/make_certs.sh, "
            "docs/SECURITY.md)",
            who, address);
  }
}

}  // namespace

std::string TuneMallocForBulkTransfer() {
  static const std::string* const result = [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (tunables != nullptr &&
        std::strstr(tunables, "glibc.malloc.") != nullptr) {
      return new std::string("left to GLIBC_TUNABLES");
    }
    constexpr int kMmapThreshold = 32 << 20;  // glibc's largest allowed
    constexpr int kTrimThreshold = 256 << 20;
    if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1 ||
        mallopt(M_TRIM_THRESHOLD, kTrimThreshold) != 1) {
      return new std::string("mallopt refused: glibc defaults kept");
    }
    return new std::string("mmap threshold 32 MiB, trim threshold 256 MiB");
  }();
  return *result;
}

Counters& RpcLatencies() {
  static Counters* const latencies = new Counters();
  return *latencies;
}

std::string LatencyName(bool served, absl::string_view method) {
  absl::ConsumePrefix(&method, "/");
  absl::ConsumePrefix(&method, "downpour.proto.");
  return absl::StrCat(served ? "served:" : "called:", method);
}

absl::StatusOr<StartedServer> StartServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    const std::string& who) {
  std::vector<std::string> parts = absl::StrSplit(address, ':');
  if (parts.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": listen address '", address, "' is not host:port"));
  }
  RETURN_IF_ERROR(CheckListenAddress(who, address));
  TuneMallocForBulkTransfer();
  static std::once_flag once;  // process-wide settings
  std::call_once(once, [] {
    grpc::EnableDefaultHealthCheckService(true);
    // Server reflection: grpcurl and grpc_cli list and call the services
    // without the .proto files (rpc/security.cc: reader and admin only when
    // security is on).
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    // Before any listener accepts: gRPC 1.51's stop for good on EMFILE.
    Log(Logger::kRpc)->info("{}", InstallAcceptGuard());
  });
  std::shared_ptr<grpc::ServerCredentials> credentials =
      ServerTransportCredentials();
  if (credentials == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(who,
                     ": security.tls is on but this process has no certificate "
                     "(security.cert_file / key_file) to serve with"));
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, credentials, &port);
  SetConnectionLimits(&builder);
  // gRPC sets SO_REUSEPORT by default, which lets two daemons share a port
  // silently; we want "address in use" to be an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::vector<std::unique_ptr<gx::ServerInterceptorFactoryInterface>> timing;
  timing.push_back(std::make_unique<ServerTiming>());
  builder.experimental().SetInterceptorCreators(std::move(timing));
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
  LogTransport(who, started.address);
  return started;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           bool fresh_connection) {
  TuneMallocForBulkTransfer();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a peer restarts instead of gRPC's default 1-120 s.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // gRPC reads this as the least time a connection attempt is given to
  // finish its handshake (MIN_CONNECT_TIMEOUT of gRPC's connection-backoff
  // protocol), not as a backoff. At 100 ms a peer on a loaded machine that
  // took longer to send its first HTTP/2 frame failed the attempt, and calls
  // without wait_for_ready failed at once with "connection attempt timed out
  // before receiving SETTINGS frame" or "tcp handshaker shutdown" (seen from
  // psctl under two CPU hogs). A refused connection (peer down) still fails
  // at once; the backoff above still paces the retries.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  // Find a dead peer or path in seconds rather than at the OS's TCP timeout
  // (hours), also between calls; servers allow pings this often
  // (SetConnectionLimits).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  if (fresh_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (const std::string name = TransportServerName(); !name.empty()) {
    args.SetSslTargetNameOverride(name);  // security.server_name
  }
  std::vector<std::unique_ptr<gx::ClientInterceptorFactoryInterface>> timing;
  timing.push_back(std::make_unique<ClientTiming>());
  return gx::CreateCustomChannelWithInterceptors(
      address, ChannelTransportCredentials(), args, std::move(timing));
}

std::chrono::system_clock::time_point DeadlineIn(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

}  // namespace downpour

// Transport security for every gRPC server and channel of a process: TLS
// (optionally mutual) and bearer tokens by role, from the config's `security`
// section (docs/SECURITY.md).
//
//   // once, at start, before any server or channel is made:
//   RETURN_IF_ERROR(InstallSecurity(config.security, "ps-0", CallerRole::kPs));
//   StartServer(...);   // TLS server, tokens checked per method
//   MakeChannel(...);   // TLS channel carrying this process's token
//
// Process-wide, as gRPC's interceptor registry is: the channels are made deep
// inside clients (GrpcPsClient, Replicator, CoordinatorClient), and a process
// is one daemon with one identity. A process that installs nothing (tests of
// the cores, in-process clusters) serves and calls in plaintext.
//
// Roles and what they may call (Authorize): health checks need no token;
//   ps      Coordinator RegisterServer/Heartbeat, ParameterServer Replicate
//   worker  Coordinator RegisterWorker/Heartbeat, ParameterServer Pull/Push/
//           Checksums/Lookup
//   admin   every read: status, placement, history, model, Pull, Checksums,
//           Lookup; the serving daemon's Predict and ServeStatus; Coordinator
//           MoveBuckets (psctl move-buckets, add-ps, drain-ps)
//   reader  status, placement, history, model (no parameters); the serving
//           daemon's Predict and ServeStatus
// and every role reads status, placement, history and the model description.
// ps and worker tokens may not call the serving daemon's Predictor: serving
// clients get the reader token (or admin), training members never need it.
// ps and standbys call as ps, workers as worker, the coordinator and the
// serving daemon as reader
// (it reads members' Status to tell which process holds a place), psctl and
// the launcher as admin or reader (ClientRole); rpc/daemon.cc decides.
#ifndef DOWNPOUR_RPC_SECURITY_H_
#define DOWNPOUR_RPC_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config.h"
#include "grpcpp/grpcpp.h"

namespace downpour {

enum class CallerRole { kNone, kPs, kWorker, kAdmin, kReader };

// "ps", "worker", "admin", "reader" ("none" for kNone).
const char* CallerRoleName(CallerRole role);

// OK when `role` may call `method` ("/downpour.proto.ParameterServer/Push");
// otherwise PermissionDenied naming both and what may. kNone (no token) may
// only call health checks: Unauthenticated otherwise.
absl::Status Authorize(CallerRole role, absl::string_view method);

// The token a process in `role` sends, from the config (psctl and the
// launcher: admin when its file is readable, else reader).
std::string TokenFileFor(const SecuritySection& security, CallerRole role);

// The role psctl and the launcher call as: admin when its token file can be
// read, else reader when that one can, else kNone (no tokens configured).
CallerRole ClientRole(const SecuritySection& security);

// Reads a token file: one token, surrounding whitespace ignored, 16 to 4096
// printable characters. Errors name the file and the fix.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// "{name}" in `pattern` replaced by `name`.
std::string ExpandName(const std::string& pattern, const std::string& name);

// Loads the files `security` names and makes them this process's transport:
// `name` ("ps-0", "client") fills "{name}" in cert_file and key_file; `role`
// picks the token this process sends (kNone = none); `token_file` overrides
// it ("" = from the config). Errors name the file and the key. Replaces what
// an earlier call installed (servers and channels made before keep theirs).
absl::Status InstallSecurity(const SecuritySection& security,
                             const std::string& name, CallerRole role,
                             const std::string& token_file = "");

// Channel credentials as a process named `name` would make them, sending the
// token in `token_file` ("" = none): for tools and tests that call with
// another identity than the process's own.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const SecuritySection& security, const std::string& name,
    const std::string& token_file);

// Back to plaintext (tests).
void UninstallSecurity();

// The credentials StartServer and MakeChannel use: TLS ones once installed,
// insecure ones otherwise.
std::shared_ptr<grpc::ServerCredentials> ServerTransportCredentials();
std::shared_ptr<grpc::ChannelCredentials> ChannelTransportCredentials();

// security.server_name of the installed transport ("" = none): MakeChannel
// checks servers' certificates against it.
std::string TransportServerName();

// True once InstallSecurity turned TLS on.
bool TransportIsSecure();
// OK when a server of `who` may listen on `address`: TLS is on, the address
// is loopback (IsLoopbackHost), or security.insecure_network is true.
// FailedPrecondition naming the address and the fixes otherwise (a wildcard
// 0.0.0.0 or [::] is not loopback).
absl::Status CheckListenAddress(const std::string& who,
                                const std::string& address);

// deploy/make_certs.sh names each member's certificate "downpour-{name}".
inline constexpr char kCertificatePrefix[] = "downpour-";

// With mutual TLS installed: OK when the caller's verified client
// certificate is one made for a member in `members` ("worker-2": CN
// downpour-worker-2; "standby-*": any standby's), else PermissionDenied:
// "`action` only with the certificate made for worker-2 (CN
// downpour-worker-2); this caller's certificate is downpour-worker-0:
// refused, nothing changed (...)". Without mutual TLS (plaintext, or TLS
// without client certificates, for the process or for the server the call
// came to) there is nothing to check: OK.
//
//   CheckCallerIsMember(auth, {"worker-2"}, "a push as worker 2 is made");
absl::Status CheckCallerIsMember(const grpc::AuthContext* auth,
                                 const std::vector<std::string>& members,
                                 absl::string_view action);

// True once InstallSecurity turned on mutual TLS with this process's own
// certificate: servers then know each caller's certificate (cheap, for hot
// paths that check it only then).
bool TransportIsMutual();

// One line for the startup log: "TLS (mutual), tokens for ps, worker, admin"
// or "plaintext".
std::string TransportSummary();

// True when `host` (of host:port) is a loopback address or "localhost".
bool IsLoopbackHost(absl::string_view address);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_SECURITY_H_

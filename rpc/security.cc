// TLS and role tokens for the process's gRPC servers and channels.
#include "rpc/security.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cctype>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "grpcpp/security/auth_metadata_processor.h"

namespace downpour {
namespace {

constexpr char kRoleProperty[] = "downpour-role";
constexpr size_t kMaxPemBytes = 1 << 20;

// "/grpc.health.v1.Health/Check" and ".../Watch".
bool IsHealthMethod(absl::string_view method) {
  absl::ConsumePrefix(&method, "/");
  return absl::StartsWith(method, "grpc.health.v1.Health/");
}

// Constant-time equality, so that how long a wrong token took to refuse says
// nothing about how much of it matched.

bool SameToken(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

// Checks the bearer token of every call against the role tokens and the
// method against the role (Authorize). Runs on gRPC's auth path, before any
// handler: a refused call never reaches a service.
class TokenChecker final : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenChecker(std::vector<std::pair<std::string, CallerRole>> tokens)
      : tokens_(std::move(tokens)) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata,
                       grpc::AuthContext* context, OutputMetadata* consumed,
                       OutputMetadata* /*response*/) override {
    absl::string_view method;
    if (auto it = metadata.find(":path"); it != metadata.end()) {
      method = absl::string_view(it->second.data(), it->second.size());
    }
    // Health checks are for probes and load balancers, which carry no
    // token or one of their own: answered whatever the token (a wrong one
    // too), so that a probe's answer depends only on the daemon's health.
    if (IsHealthMethod(method)) return grpc::Status::OK;
    CallerRole role = CallerRole::kNone;
    auto auth = metadata.find("authorization");
    if (auth != metadata.end()) {
      absl::string_view value(auth->second.data(), auth->second.size());
      if (!absl::ConsumePrefix(&value, "Bearer ")) {
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            "the authorization header is not 'Bearer <token>'");
      }
      for (const auto& [token, token_role] : tokens_) {
        if (SameToken(value, token)) role = token_role;
      }
      if (role == CallerRole::kNone) {
        return grpc::Status(
            grpc::StatusCode::UNAUTHENTICATED,
            "the bearer token matches no role's token of this cluster "
            "(security.*_token_file): check the token file the client uses");
      }
      consumed->insert(std::make_pair(
          std::string(auth->first.data(), auth->first.size()),
          std::string(auth->second.data(), auth->second.size())));
    }
    if (absl::Status allowed = Authorize(role, method); !allowed.ok()) {
      return grpc::Status(static_cast<grpc::StatusCode>(allowed.code()),
                          std::string(allowed.message()));
    }
    context->AddProperty(kRoleProperty, CallerRoleName(role));
    return grpc::Status::OK;
  }

 private:
  const std::vector<std::pair<std::string, CallerRole>> tokens_;
};

// Sends this process's token with every call.
class TokenSender final : public grpc::MetadataCredentialsPlugin {
 public:
  explicit TokenSender(std::string token) : header_("Bearer " + token) {}
  bool IsBlocking() const override { return false; }
  const char* GetType() const override { return "downpour-token"; }
  grpc::Status GetMetadata(
      grpc::string_ref, grpc::string_ref, const grpc::AuthContext&,
      std::multimap<grpc::string, grpc::string>* metadata) override {
    metadata->insert(std::make_pair("authorization", header_));
    return grpc::Status::OK;
  }

 private:
  const std::string header_;
};

struct Transport {
  std::shared_ptr<grpc::ServerCredentials> server;
  std::shared_ptr<grpc::ChannelCredentials> channel;
  std::string summary = "plaintext";
  std::string server_name;
  bool secure = false;
  bool mutual = false;  // clients present certificates the server checked
  // security.insecure_network: plaintext may listen beyond loopback.
  bool insecure_network = false;
};

std::mutex& TransportMutex() {
  static std::mutex* const mu = new std::mutex();
  return *mu;
}

Transport& CurrentTransport() {
  static Transport* const transport = [] {
    auto* t = new Transport();
    t->server = grpc::InsecureServerCredentials();
    t->channel = grpc::InsecureChannelCredentials();
    return t;
  }();
  return *transport;
}

// Reads at most kMaxPemBytes (a path naming /dev/zero fails, not hangs).
absl::StatusOr<std::string> ReadSecurityFile(const std::string& key,
                                             const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " '", path, "' is not a regular file"));
  }
  if (::stat(path.c_str(), &st) == 0 &&
      static_cast<size_t>(st.st_size) > kMaxPemBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " '", path, "' is ", st.st_size, " bytes; at most ",
                     kMaxPemBytes, " expected"));
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat(key, ": ", text.status().message(),
                     " (deploy/make_certs.sh writes the TLS files and tokens; "
                     "docs/SECURITY.md)"));
  }
  return text;
}

}  // namespace

const char* CallerRoleName(CallerRole role) {
  switch (role) {
    case CallerRole::kPs:
      return "ps";
    case CallerRole::kWorker:
      return "worker";
    case CallerRole::kAdmin:
      return "admin";
    case CallerRole::kReader:
      return "reader";
    case CallerRole::kNone:
      break;
  }
  return "none";
}

absl::Status Authorize(CallerRole role, absl::string_view method) {
  if (IsHealthMethod(method)) return absl::OkStatus();
  absl::string_view name = method;
  absl::ConsumePrefix(&name, "/");
  if (role == CallerRole::kNone) {
    return absl::UnauthenticatedError(absl::StrCat(
        "this cluster requires a bearer token (security.*_token_file) and ",
        method.empty() ? "the call" : method,
        " carried none: give the client a token file (psctl --token_file)"));
  }
  absl::ConsumePrefix(&name, "downpour.proto.");
  // Reads every role may make.
  static const char* const kAnyRole[] = {
      "Status/GetStatus", "Coordinator/GetPlacement",
      "Coordinator/ClusterStatus", "Coordinator/GetHistory",
      "Coordinator/DescribeModel"};
  for (const char* m : kAnyRole) {
    if (name == m) return absl::OkStatus();
  }
  static const std::map<std::string, std::vector<CallerRole>>* const kRoles =
      new std::map<std::string, std::vector<CallerRole>>{
          {"Coordinator/RegisterServer", {CallerRole::kPs}},
          {"Coordinator/RegisterWorker", {CallerRole::kWorker}},
          {"Coordinator/Heartbeat", {CallerRole::kPs, CallerRole::kWorker}},
          // Live bucket moves change the placement: psctl as admin only.
          {"Coordinator/MoveBuckets", {CallerRole::kAdmin}},
          {"Coordinator/DrainWorker", {CallerRole::kAdmin}},
          {"ParameterServer/Pull", {CallerRole::kWorker, CallerRole::kAdmin}},
          {"ParameterServer/Push", {CallerRole::kWorker}},
          {"ParameterServer/Checksums",
           {CallerRole::kWorker, CallerRole::kAdmin}},
          {"ParameterServer/Replicate", {CallerRole::kPs}},
          {"ParameterServer/CopyBuckets", {CallerRole::kPs}},
          {"ParameterServer/CopyBlocks", {CallerRole::kPs}},
          {"ParameterServer/Lookup", {CallerRole::kWorker, CallerRole::kAdmin}},
          // The serving daemon (serve/): predictions and its status are for
          // clients of the trained model, not for training members.
          {"Predictor/Predict", {CallerRole::kReader, CallerRole::kAdmin}},
          {"Predictor/ServeStatus", {CallerRole::kReader, CallerRole::kAdmin}},
          // Server reflection (rpc/server_util.cc): what the services are.
          {"grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
           {CallerRole::kReader, CallerRole::kAdmin}},
      };
  auto it = kRoles->find(std::string(name));
  if (it != kRoles->end()) {
    for (CallerRole allowed : it->second) {
      if (allowed == role) return absl::OkStatus();
    }
    std::vector<std::string> names;
    for (CallerRole allowed : it->second)
      names.push_back(CallerRoleName(allowed));
    return absl::PermissionDeniedError(
        absl::StrCat("role ", CallerRoleName(role), " may not call ", name,
                     " (only ", absl::StrJoin(names, ", "), ")"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat("role ", CallerRoleName(role), " may not call ",
                   method.empty() ? "this method" : method, " (no role may)"));
}

std::string TokenFileFor(const SecuritySection& security, CallerRole role) {
  switch (role) {
    case CallerRole::kPs:
      return security.ps_token_file;
    case CallerRole::kWorker:
      return security.worker_token_file;
    case CallerRole::kAdmin:
      return security.admin_token_file;
    case CallerRole::kReader:
      return security.reader_token_file;
    case CallerRole::kNone:
      break;
  }
  return "";
}

CallerRole ClientRole(const SecuritySection& security) {
  for (CallerRole role : {CallerRole::kAdmin, CallerRole::kReader}) {
    const std::string path = TokenFileFor(security, role);
    if (!path.empty() && ReadTokenFile(path).ok()) return role;
  }
  return CallerRole::kNone;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSecurityFile("token file", path);
  if (!text.ok()) return text.status();
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.size() < 16 || token.size() > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file '", path, "' holds ", token.size(),
        " characters; a token is 16 to 4096 (make one with `openssl rand -hex "
        "32`)"));
  }
  for (char c : token) {
    if (!std::isgraph(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token file '", path,
          "' holds a space or control character inside the token; a token is "
          "one word of printable characters"));
    }
  }
  return token;
}

std::string ExpandName(const std::string& pattern, const std::string& name) {
  return absl::StrReplaceAll(pattern, {{"{name}", name}});
}

namespace {

struct TlsFiles {
  std::string ca, cert, key;  // PEM; cert and key empty when not configured
};

absl::StatusOr<TlsFiles> LoadTlsFiles(const SecuritySection& security,
                                      const std::string& name) {
  TlsFiles files;
  absl::StatusOr<std::string> ca =
      ReadSecurityFile("security.ca_file", security.ca_file);
  if (!ca.ok()) return ca.status();
  files.ca = *std::move(ca);
  if (security.cert_file.empty()) return files;
  absl::StatusOr<std::string> cert = ReadSecurityFile(
      "security.cert_file", ExpandName(security.cert_file, name));
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadSecurityFile(
      "security.key_file", ExpandName(security.key_file, name));
  if (!key.ok()) return key.status();
  files.cert = *std::move(cert);
  files.key = *std::move(key);
  return files;
}

std::shared_ptr<grpc::ChannelCredentials> TlsChannelCredentials(
    const SecuritySection& security, const TlsFiles& files,
    const std::string& token) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = files.ca;
  if (security.mutual_tls && !files.cert.empty()) {
    options.pem_private_key = files.key;
    options.pem_cert_chain = files.cert;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::SslCredentials(options);
  if (token.empty()) return credentials;
  return grpc::CompositeChannelCredentials(
      credentials, grpc::MetadataCredentialsFromPlugin(
                       std::make_unique<TokenSender>(token)));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const SecuritySection& security, const std::string& name,
    const std::string& token_file) {
  if (!security.tls) return grpc::InsecureChannelCredentials();
  absl::StatusOr<TlsFiles> files = LoadTlsFiles(security, name);
  if (!files.ok()) return files.status();
  std::string token;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> read = ReadTokenFile(token_file);
    if (!read.ok()) return read.status();
    token = *std::move(read);
  }
  return TlsChannelCredentials(security, *files, token);
}

absl::Status InstallSecurity(const SecuritySection& security,
                             const std::string& name, CallerRole role,
                             const std::string& token_file) {
  Transport next;
  if (!security.tls) {
    next.server = grpc::InsecureServerCredentials();
    next.channel = grpc::InsecureChannelCredentials();
  } else {
    absl::StatusOr<TlsFiles> files = LoadTlsFiles(security, name);
    if (!files.ok()) return files.status();
    // Tokens this process checks (every role's it knows) and sends.
    std::vector<std::pair<std::string, CallerRole>> tokens;
    std::vector<std::string> roles;
    for (CallerRole r : {CallerRole::kPs, CallerRole::kWorker,
                         CallerRole::kAdmin, CallerRole::kReader}) {
      const std::string path = TokenFileFor(security, r);
      if (path.empty()) continue;
      absl::StatusOr<std::string> token = ReadTokenFile(path);
      if (!token.ok()) {
        // A client (psctl) need not hold the other roles' tokens; a server
        // must, or it would refuse that role.
        if (name == "client") continue;
        return absl::Status(
            token.status().code(),
            absl::StrCat("security.", CallerRoleName(r),
                         "_token_file: ", token.status().message()));
      }
      tokens.emplace_back(*std::move(token), r);
      roles.push_back(CallerRoleName(r));
    }
    std::string own_token;
    const std::string own_path =
        token_file.empty() ? TokenFileFor(security, role) : token_file;
    if (!own_path.empty()) {
      absl::StatusOr<std::string> token = ReadTokenFile(own_path);
      if (!token.ok()) return token.status();
      own_token = *std::move(token);
    }
    if (!files->cert.empty()) {
      grpc::SslServerCredentialsOptions options(
          security.mutual_tls
              ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
              : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
      options.pem_root_certs = files->ca;
      options.pem_key_cert_pairs.push_back({files->key, files->cert});
      next.server = grpc::SslServerCredentials(options);
      if (!tokens.empty()) {
        next.server->SetAuthMetadataProcessor(
            std::make_shared<TokenChecker>(tokens));
      }
    } else {
      // Without a certificate (psctl) a process serves nothing: StartServer
      // refuses.
      next.server = nullptr;
    }
    next.channel = TlsChannelCredentials(security, *files, own_token);
    next.secure = true;
    next.mutual = security.mutual_tls && !files->cert.empty();
    next.server_name = security.server_name;
    next.summary = absl::StrCat(
        security.mutual_tls ? "mutual TLS" : "TLS",
        tokens.empty()
            ? ", no tokens"
            : absl::StrCat(", tokens for ", absl::StrJoin(roles, ", ")),
        own_token.empty() ? ""
                          : absl::StrCat("; calls as ", CallerRoleName(role)));
  }
  next.insecure_network = security.insecure_network;
  std::lock_guard<std::mutex> lock(TransportMutex());
  CurrentTransport() = std::move(next);
  return absl::OkStatus();
}

void UninstallSecurity() {
  std::lock_guard<std::mutex> lock(TransportMutex());
  Transport& t = CurrentTransport();
  t.server = grpc::InsecureServerCredentials();
  t.channel = grpc::InsecureChannelCredentials();
  t.summary = "plaintext";
  t.server_name.clear();
  t.secure = false;
}

std::shared_ptr<grpc::ServerCredentials> ServerTransportCredentials() {
  std::lock_guard<std::mutex> lock(TransportMutex());
  return CurrentTransport().server;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelTransportCredentials() {
  std::lock_guard<std::mutex> lock(TransportMutex());
  return CurrentTransport().channel;
}

std::string TransportServerName() {
  std::lock_guard<std::mutex> lock(TransportMutex());
  return CurrentTransport().server_name;
}

absl::Status CheckListenAddress(const std::string& who,
                                const std::string& address) {
  {
    std::lock_guard<std::mutex> lock(TransportMutex());
    const Transport& t = CurrentTransport();
    if (t.secure || t.insecure_network) return absl::OkStatus();
  }
  if (IsLoopbackHost(address)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      who, ": refusing to serve plaintext gRPC on ", address,
      ", which is not a loopback address: anyone who reaches it could read "
      "the model, push gradients and register as a member. Turn on "
      "security.tls and tokens (deploy/make_certs.sh, docs/SECURITY.md), "
      "listen on 127.0.0.1, or, on a network only trusted machines reach, "
      "set security.insecure_network: true"));
}

bool TransportIsSecure() {
  std::lock_guard<std::mutex> lock(TransportMutex());
  return CurrentTransport().secure;
}

std::string TransportSummary() {
  std::lock_guard<std::mutex> lock(TransportMutex());
  return CurrentTransport().summary;
}

bool IsLoopbackHost(absl::string_view address) {
  absl::string_view host = address;
  if (size_t colon = host.rfind(':'); colon != absl::string_view::npos) {
    host = host.substr(0, colon);
  }
  absl::ConsumePrefix(&host, "[");
  absl::ConsumeSuffix(&host, "]");
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

bool TransportIsMutual() {
  std::lock_guard<std::mutex> lock(TransportMutex());
  return CurrentTransport().mutual;
}

namespace {

// True when certificate common name `cn` was made for `member` ("worker-2",
// or "standby-*" for any index).
bool CertificateIsFor(absl::string_view cn, absl::string_view member) {
  if (!absl::ConsumePrefix(&cn, kCertificatePrefix)) return false;
  if (!absl::ConsumeSuffix(&member, "*")) return cn == member;
  int index = 0;
  return absl::ConsumePrefix(&cn, member) && !cn.empty() &&
         absl::SimpleAtoi(cn, &index) && index >= 0;
}

}  // namespace

absl::Status CheckCallerIsMember(const grpc::AuthContext* auth,
                                 const std::vector<std::string>& members,
                                 absl::string_view action) {
  if (!TransportIsMutual()) return absl::OkStatus();
  // A server that requires client certificates never admits a connection
  // without one, so a caller with no verified certificate reached a server
  // of this process made without mutual TLS (ps_bench runs both): nothing
  // to check there.
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return absl::OkStatus();
  std::string names;
  if (auth != nullptr) {
    for (const grpc::string_ref& name :
         auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      const absl::string_view cn(name.data(), name.size());
      for (const std::string& member : members) {
        if (CertificateIsFor(cn, member)) return absl::OkStatus();
      }
      absl::StrAppend(&names, names.empty() ? "" : ", ", cn);
    }
  }
  std::vector<std::string> wanted;
  for (const std::string& member : members) {
    wanted.push_back(
        absl::StrCat(kCertificatePrefix,
                     absl::EndsWith(member, "*")
                         ? absl::StrCat(absl::StripSuffix(member, "*"), "N")
                         : member));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      action, " only with the certificate made for ",
      absl::StrJoin(members, " or "), " (CN ", absl::StrJoin(wanted, ", "),
      "); this caller's certificate is ", names.empty() ? "unnamed" : names,
      ": refused, nothing changed (deploy/make_certs.sh makes one per "
      "member)"));
}

}  // namespace downpour

#include "rpc/security.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;

constexpr char kPush[] = "/downpour.proto.ParameterServer/Push";
constexpr char kPull[] = "/downpour.proto.ParameterServer/Pull";
constexpr char kReplicate[] = "/downpour.proto.ParameterServer/Replicate";
constexpr char kHeartbeat[] = "/downpour.proto.Coordinator/Heartbeat";
constexpr char kRegisterServer[] = "/downpour.proto.Coordinator/RegisterServer";
constexpr char kRegisterWorker[] = "/downpour.proto.Coordinator/RegisterWorker";
constexpr char kClusterStatus[] = "/downpour.proto.Coordinator/ClusterStatus";
constexpr char kGetStatus[] = "/downpour.proto.Status/GetStatus";
constexpr char kHealth[] = "/grpc.health.v1.Health/Check";

// Server reflection (what the services are) is for readers and admins.
TEST(AuthorizeTest, ReflectionNeedsTheReaderOrAdminToken) {
  constexpr char kReflection[] =
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  EXPECT_TRUE(Authorize(CallerRole::kReader, kReflection).ok());
  EXPECT_TRUE(Authorize(CallerRole::kAdmin, kReflection).ok());
  EXPECT_EQ(Authorize(CallerRole::kWorker, kReflection).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Authorize(CallerRole::kNone, kReflection).code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(AuthorizeTest, OnlyWorkersPushAndOnlyMembersRegister) {
  EXPECT_TRUE(Authorize(CallerRole::kWorker, kPush).ok());
  for (CallerRole role :
       {CallerRole::kPs, CallerRole::kAdmin, CallerRole::kReader}) {
    EXPECT_EQ(Authorize(role, kPush).code(),
              absl::StatusCode::kPermissionDenied)
        << CallerRoleName(role);
  }
  EXPECT_TRUE(Authorize(CallerRole::kPs, kRegisterServer).ok());
  EXPECT_FALSE(Authorize(CallerRole::kWorker, kRegisterServer).ok());
  EXPECT_TRUE(Authorize(CallerRole::kWorker, kRegisterWorker).ok());
  EXPECT_FALSE(Authorize(CallerRole::kPs, kRegisterWorker).ok());
  EXPECT_TRUE(Authorize(CallerRole::kPs, kHeartbeat).ok());
  EXPECT_TRUE(Authorize(CallerRole::kWorker, kHeartbeat).ok());
  EXPECT_FALSE(Authorize(CallerRole::kAdmin, kHeartbeat).ok());
  EXPECT_FALSE(Authorize(CallerRole::kReader, kHeartbeat).ok());
  EXPECT_TRUE(Authorize(CallerRole::kPs, kReplicate).ok());
  EXPECT_FALSE(Authorize(CallerRole::kWorker, kReplicate).ok());
}

TEST(AuthorizeTest, ReadersReadStatusButNotTheModel) {
  for (CallerRole role : {CallerRole::kPs, CallerRole::kWorker,
                          CallerRole::kAdmin, CallerRole::kReader}) {
    EXPECT_TRUE(Authorize(role, kClusterStatus).ok()) << CallerRoleName(role);
    EXPECT_TRUE(Authorize(role, kGetStatus).ok()) << CallerRoleName(role);
  }
  EXPECT_TRUE(Authorize(CallerRole::kAdmin, kPull).ok());
  const absl::Status reader = Authorize(CallerRole::kReader, kPull);
  EXPECT_EQ(reader.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(reader.message(),
              HasSubstr("role reader may not call ParameterServer/Pull (only "
                        "worker, admin)"));
  // Lookup reads rows: the same roles as Pull.
  const char kLookup[] = "/downpour.proto.ParameterServer/Lookup";
  EXPECT_TRUE(Authorize(CallerRole::kWorker, kLookup).ok());
  EXPECT_TRUE(Authorize(CallerRole::kAdmin, kLookup).ok());
  EXPECT_EQ(Authorize(CallerRole::kReader, kLookup).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Authorize(CallerRole::kPs, kLookup).code(),
            absl::StatusCode::kPermissionDenied);
}

// The serving daemon answers its clients (reader) and operators (admin); a
// training member's token is no key to it, and no token is refused.
TEST(AuthorizeTest, ReadersAndAdminsPredictFromTheServingDaemon) {
  const char kPredict[] = "/downpour.proto.Predictor/Predict";
  const char kServeStatus[] = "/downpour.proto.Predictor/ServeStatus";
  for (const char* method : {kPredict, kServeStatus}) {
    EXPECT_TRUE(Authorize(CallerRole::kReader, method).ok()) << method;
    EXPECT_TRUE(Authorize(CallerRole::kAdmin, method).ok()) << method;
    for (CallerRole role : {CallerRole::kPs, CallerRole::kWorker}) {
      const absl::Status refused = Authorize(role, method);
      EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied)
          << CallerRoleName(role) << " " << method;
      EXPECT_THAT(refused.message(), HasSubstr("(only reader, admin)"));
    }
    EXPECT_EQ(Authorize(CallerRole::kNone, method).code(),
              absl::StatusCode::kUnauthenticated)
        << method;
  }
}

TEST(AuthorizeTest, NoTokenReachesOnlyHealthChecks) {
  EXPECT_TRUE(Authorize(CallerRole::kNone, kHealth).ok());
  EXPECT_TRUE(
      Authorize(CallerRole::kNone, "/grpc.health.v1.Health/Watch").ok());
  EXPECT_EQ(Authorize(CallerRole::kNone, kClusterStatus).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Authorize(CallerRole::kNone, kPush).code(),
            absl::StatusCode::kUnauthenticated);
}

// A live bucket move changes the placement: the admin token only.
TEST(AuthorizeTest, OnlyAdminMovesBuckets) {
  constexpr char kMoveBuckets[] = "/downpour.proto.Coordinator/MoveBuckets";
  EXPECT_TRUE(Authorize(CallerRole::kAdmin, kMoveBuckets).ok());
  for (CallerRole role :
       {CallerRole::kPs, CallerRole::kWorker, CallerRole::kReader}) {
    EXPECT_EQ(Authorize(role, kMoveBuckets).code(),
              absl::StatusCode::kPermissionDenied)
        << CallerRoleName(role);
  }
}

TEST(AuthorizeTest, UnknownMethodsAreNobodys) {
  EXPECT_EQ(
      Authorize(CallerRole::kAdmin, "/downpour.proto.Coordinator/Shutdown")
          .code(),
      absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Authorize(CallerRole::kAdmin, "").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(TokenFileTest, ReadsOneTrimmedToken) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/good.token");
  ASSERT_TRUE(WriteFileAtomically(path, "  0123456789abcdef0123\n").ok());
  auto token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "0123456789abcdef0123");
}

TEST(TokenFileTest, RefusesShortSpacedMissingAndEndlessFiles) {
  const std::string dir = ::testing::TempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/short.token", "abc\n").ok());
  EXPECT_THAT(ReadTokenFile(dir + "/short.token").status().message(),
              HasSubstr("16 to 4096"));
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/two.token", "0123456789abcdef 0123456789\n")
          .ok());
  EXPECT_THAT(ReadTokenFile(dir + "/two.token").status().message(),
              HasSubstr("space or control character"));
  EXPECT_EQ(ReadTokenFile(dir + "/absent.token").status().code(),
            absl::StatusCode::kNotFound);
  // Not a regular file: refused at once rather than read forever.
  EXPECT_THAT(ReadTokenFile("/dev/zero").status().message(),
              HasSubstr("not a regular file"));
}

TEST(SecurityTest, ExpandNameFillsTheDaemonsName) {
  EXPECT_EQ(ExpandName("certs/{name}.pem", "ps-0"), "certs/ps-0.pem");
  EXPECT_EQ(ExpandName("certs/server.pem", "ps-0"), "certs/server.pem");
}

TEST(SecurityTest, LoopbackHosts) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1:7001"));
  EXPECT_TRUE(IsLoopbackHost("127.3.2.1:0"));
  EXPECT_TRUE(IsLoopbackHost("localhost:7001"));
  EXPECT_TRUE(IsLoopbackHost("[::1]:7001"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0:7001"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.7:7001"));
  EXPECT_FALSE(IsLoopbackHost("[::]:7001"));
  EXPECT_FALSE(IsLoopbackHost("ps0.example:7001"));
}

TEST(SecurityTest, MissingCertificateFilesNameTheKey) {
  SecuritySection security;
  security.tls = true;
  security.ca_file = "/nonexistent/ca.pem";
  const absl::Status status =
      InstallSecurity(security, "ps-0", CallerRole::kPs);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("security.ca_file"));
  EXPECT_THAT(status.message(), HasSubstr("make_certs.sh"));
  EXPECT_FALSE(TransportIsSecure());  // nothing installed
}

TEST(SecurityTest, PlaintextUntilInstalled) {
  EXPECT_FALSE(TransportIsSecure());
  EXPECT_EQ(TransportSummary(), "plaintext");
  EXPECT_TRUE(InstallSecurity(SecuritySection(), "ps-0", CallerRole::kPs).ok());
  EXPECT_FALSE(TransportIsSecure());
}

}  // namespace
}  // namespace downpour

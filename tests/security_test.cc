// Transport security with real daemons and real TLS: certificates and tokens
// from deploy/make_certs.sh, a coordinator, a ps and a worker on loopback.
// A job trains over TLS with role tokens; every call without a token, with a
// wrong one, with a role that may not make it, or without TLS is refused
// with UNAUTHENTICATED / PERMISSION_DENIED / a failed handshake, and leaves
// the cluster as it was (the ps's checksums, the job not stopped). Mutual TLS
// refuses a client without a certificate. psctl calls with the config's
// admin token and fails clearly with a wrong one.
#include "rpc/security.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/push_sequence.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;

class SecurityTest : public testing::DaemonJobTest {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir();
    certs_ = dir_ + "/certs";
    auto make = Subprocess::Start(
        "make_certs",
        {testing::BinDir() + "/deploy/make_certs.sh", "--out", certs_, "--ps",
         "1", "--standby", "0", "--workers", "2"},
        dir_ + "/make_certs.log");
    ASSERT_TRUE(make.ok()) << make.status();
    ASSERT_EQ((*make)->Wait(absl::Seconds(60)), 0) << (*make)->LogTail(20);
  }

  void TearDown() override {
    testing::DaemonJobTest::TearDown();
    UninstallSecurity();
  }

  std::string SecuritySectionYaml(bool mutual) const {
    return absl::StrCat(
        "security:\n  tls: true\n  server_name: ", server_name_,
        "\n  mutual_tls: ", mutual ? "true" : "false", "\n  ca_file: ", certs_,
        "/ca.pem\n  cert_file: ", certs_, "/{name}.pem\n",
        "  key_file: ", certs_, "/{name}.key\n", "  ps_token_file: ", certs_,
        "/ps.token\n", "  worker_token_file: ", certs_, "/worker.token\n",
        "  admin_token_file: ", certs_, "/admin.token\n",
        "  reader_token_file: ", certs_, "/reader.token\n");
  }

  // Coordinator and ps (and, when `steps` > 0, one worker training `steps`
  // steps) with TLS and tokens. The test process itself calls as admin.
  void StartCluster(bool mutual, int steps, int workers = 1) {
    const std::string yaml = testing::LoopbackConfig(
        1, workers,
        absl::StrCat("data:\n  source: synthetic\n  train_examples: 2000\n"
                     "  test_examples: 200\nmodel:\n  layers: [784, 32, 10]\n"
                     "training:\n  steps: ",
                     std::max(steps, 1),
                     "\n  eval_every_steps: 0\ncheckpoint:\n  dir: \"\"\n",
                     SecuritySectionYaml(mutual)));
    config_ = testing::WriteConfig("secure.yaml", yaml);
    auto config = LoadConfig(config_);
    ASSERT_TRUE(config.ok()) << config.status();
    security_ = config->security;
    ASSERT_TRUE(InstallSecurity(security_, "client", CallerRole::kAdmin).ok());

    const std::string port_file = dir_ + "/coordinator.port";
    Subprocess& c = Start("coordinator", "coordinator/coordinator",
                          {"--port_file", port_file});
    auto address = testing::WaitForPort(c, port_file);
    ASSERT_TRUE(address.ok()) << address.status();
    coordinator_ = *address;
    const std::string ps_port = dir_ + "/ps.port";
    Subprocess& ps = Start("ps-0", "server/ps_server",
                           {"--index", "0", "--coordinator", coordinator_,
                            "--port_file", ps_port});
    auto ps_address = testing::WaitForPort(ps, ps_port);
    ASSERT_TRUE(ps_address.ok()) << ps_address.status();
    ps_ = *ps_address;
    if (steps > 0) {
      Start("worker-0", "worker/ps_worker",
            {"--index", "0", "--coordinator", coordinator_});
    }
    // The ps holds its blocks once it answers Checksums (as admin).
    ASSERT_TRUE(
        testing::WaitUntil([&] { return Checksums(MakeChannel(ps_)).ok(); },
                           absl::Seconds(30), absl::Milliseconds(50)))
        << "ps never answered Checksums over TLS; log:\n"
        << daemons_["ps-0"]->LogTail(20);
  }

  // A channel with TLS and `token_file`'s token ("" = none).
  std::shared_ptr<grpc::Channel> Channel(const std::string& address,
                                         const std::string& token_file,
                                         const std::string& name = "client") {
    auto credentials = ChannelCredentialsFor(security_, name, token_file);
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    return grpc::CreateChannel(address, *credentials);
  }
  std::string Token(const std::string& role) const {
    return absl::StrCat(certs_, "/", role, ".token");
  }

  static grpc::Status Checksums(std::shared_ptr<grpc::Channel> channel,
                                proto::ChecksumResponse* out = nullptr) {
    auto stub = proto::ParameterServer::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::ChecksumResponse response;
    grpc::Status status =
        stub->Checksums(&context, proto::ChecksumRequest(), &response);
    if (out != nullptr) *out = response;
    return status;
  }

  // Every call an outsider would make to take over or poison the cluster.
  struct Refusals {
    grpc::Status cluster_status, heartbeat, register_server, register_worker,
        pull, push, replicate, checksums;
  };
  Refusals Attack(std::shared_ptr<grpc::Channel> coordinator,
                  std::shared_ptr<grpc::Channel> ps) {
    auto c = proto::Coordinator::NewStub(coordinator);
    auto p = proto::ParameterServer::NewStub(ps);
    Refusals r;
    auto context = [] {
      auto ctx = std::make_unique<grpc::ClientContext>();
      ctx->set_deadline(DeadlineIn(5));
      return ctx;
    };
    {
      proto::ClusterStatusResponse response;
      r.cluster_status = c->ClusterStatus(
          context().get(), proto::ClusterStatusRequest(), &response);
    }
    {
      // A forged worker report that would end the job.
      proto::HeartbeatRequest request;
      request.set_role("worker");
      request.set_index(0);
      request.mutable_report()->set_accuracy(1.0);
      request.mutable_report()->set_finished(true);
      proto::HeartbeatResponse response;
      r.heartbeat = c->Heartbeat(context().get(), request, &response);
    }
    {
      proto::RegisterServerRequest request;  // ps 0's index, our address
      request.set_index(0);
      request.set_address("127.0.0.1:1");
      proto::RegisterServerResponse response;
      r.register_server =
          c->RegisterServer(context().get(), request, &response);
    }
    {
      proto::RegisterWorkerRequest request;
      request.set_index(0);
      request.set_address("127.0.0.1:1");
      proto::RegisterWorkerResponse response;
      r.register_worker =
          c->RegisterWorker(context().get(), request, &response);
    }
    {
      proto::PullRequest request;
      request.add_block_ids(0);
      proto::PullResponse response;
      r.pull = p->Pull(context().get(), request, &response);
    }
    {
      proto::PushRequest request;
      request.set_worker_id(0);
      request.set_sequence(~uint64_t{0});
      proto::PushResponse response;
      r.push = p->Push(context().get(), request, &response);
    }
    {
      proto::ReplicateRequest request;
      proto::ReplicateResponse response;
      r.replicate = p->Replicate(context().get(), request, &response);
    }
    {
      proto::ChecksumResponse response;
      r.checksums = Checksums(ps, &response);
    }
    return r;
  }

  // The model's blocks and the placement, as the test (admin) reads them.
  void ModelAndPlacement(proto::DescribeModelResponse* model,
                         proto::GetPlacementResponse* placement) {
    auto stub = proto::Coordinator::NewStub(MakeChannel(coordinator_));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    ASSERT_TRUE(stub->DescribeModel(&context, {}, model).ok());
    grpc::ClientContext placement_context;
    placement_context.set_deadline(DeadlineIn(5));
    ASSERT_TRUE(stub->GetPlacement(&placement_context, {}, placement).ok());
  }

  std::string dir_, certs_, coordinator_, ps_;
  // security.server_name: "" checks the dialled host (127.0.0.1); "downpour"
  // is in every certificate make_certs.sh writes.
  std::string server_name_ = "\"\"";
  SecuritySection security_;
};

std::string Describe(const grpc::Status& s) {
  return absl::StrCat(s.error_code(), " ", s.error_message());
}

TEST_F(SecurityTest, AJobTrainsOverTlsWithRoleTokens) {
  server_name_ = "downpour";  // certificates checked against a fixed name
  StartCluster(/*mutual=*/false, /*steps=*/200);
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto stub = proto::Coordinator::NewStub(MakeChannel(coordinator_));
        grpc::ClientContext context;
        context.set_deadline(DeadlineIn(2));
        proto::ClusterStatusResponse status;
        if (!stub->ClusterStatus(&context, {}, &status).ok()) return false;
        return status.stop();
      },
      absl::Seconds(90), absl::Milliseconds(100)))
      << "the job over TLS did not finish; worker log:\n"
      << daemons_["worker-0"]->LogTail(30);
  EXPECT_EQ(daemons_["worker-0"]->Wait(absl::Seconds(30)), 0)
      << daemons_["worker-0"]->LogTail(30);
  // The ps applied the worker's pushes: its versions moved.
  proto::ChecksumResponse sums;
  ASSERT_TRUE(Checksums(MakeChannel(ps_), &sums).ok());
  uint64_t versions = 0;
  for (const auto& block : sums.blocks()) versions += block.version();
  EXPECT_GE(versions, 200u);
}

TEST_F(SecurityTest, CallsWithoutTheRightTokenAreRefusedAndChangeNothing) {
  StartCluster(/*mutual=*/false, /*steps=*/0);
  proto::ChecksumResponse before;
  ASSERT_TRUE(Checksums(MakeChannel(ps_), &before).ok());

  // No token at all.
  Refusals none = Attack(Channel(coordinator_, ""), Channel(ps_, ""));
  for (const grpc::Status* s :
       {&none.cluster_status, &none.heartbeat, &none.register_server,
        &none.register_worker, &none.pull, &none.push, &none.replicate,
        &none.checksums}) {
    EXPECT_EQ(s->error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << Describe(*s);
  }
  EXPECT_THAT(none.push.error_message(), HasSubstr("requires a bearer token"));

  // A token that is no role's.
  const std::string forged = dir_ + "/forged.token";
  ASSERT_TRUE(
      WriteFileAtomically(forged, "0123456789abcdef0123456789abcdef\n").ok());
  Refusals wrong = Attack(Channel(coordinator_, forged), Channel(ps_, forged));
  EXPECT_EQ(wrong.cluster_status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(wrong.push.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.push.error_message(), HasSubstr("matches no role"));

  // The read-only token reads status, and nothing else.
  Refusals reader = Attack(Channel(coordinator_, Token("reader")),
                           Channel(ps_, Token("reader")));
  EXPECT_TRUE(reader.cluster_status.ok()) << Describe(reader.cluster_status);
  for (const grpc::Status* s :
       {&reader.heartbeat, &reader.register_server, &reader.register_worker,
        &reader.pull, &reader.push, &reader.replicate, &reader.checksums}) {
    EXPECT_EQ(s->error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << Describe(*s);
  }
  EXPECT_THAT(reader.push.error_message(),
              HasSubstr("role reader may not call ParameterServer/Push"));

  // A ps may not push or pose as a worker; a worker may not register a
  // shard or write into a replica.
  Refusals ps =
      Attack(Channel(coordinator_, Token("ps")), Channel(ps_, Token("ps")));
  EXPECT_EQ(ps.push.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ps.pull.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ps.register_worker.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  Refusals worker = Attack(Channel(coordinator_, Token("worker")),
                           Channel(ps_, Token("worker")));
  EXPECT_EQ(worker.register_server.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(worker.replicate.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // A token of the right role still cannot pose as a member: ps 0's place is
  // held by a live process (its heartbeat lease), a heartbeat needs the
  // member's key, and a push sequence the coordinator never issued is not
  // applied.
  EXPECT_EQ(ps.register_server.error_code(), grpc::StatusCode::ALREADY_EXISTS)
      << Describe(ps.register_server);
  // (worker 0 never registered here: FAILED_PRECONDITION "register first";
  // a registered one's forged heartbeat is PERMISSION_DENIED,
  // tests/forged_identity_test)
  EXPECT_FALSE(ps.heartbeat.ok()) << Describe(ps.heartbeat);
  EXPECT_FALSE(worker.heartbeat.ok()) << Describe(worker.heartbeat);
  EXPECT_FALSE(worker.push.ok()) << Describe(worker.push);

  // Plaintext to a TLS port gets no answer at all.
  auto plain = proto::Coordinator::NewStub(
      grpc::CreateChannel(coordinator_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(3));
  proto::ClusterStatusResponse response;
  EXPECT_FALSE(plain->ClusterStatus(&context, {}, &response).ok());

  // Health checks need TLS but no token (probes), and answer whatever token
  // a probe carries: a wrong one too (it carries no authority there).
  const std::string wrong_token = dir_ + "/wrong.token";
  ASSERT_TRUE(
      WriteFileAtomically(wrong_token, "0123456789abcdef0123456789abcdef\n")
          .ok());
  for (const std::string& token : {std::string(), wrong_token}) {
    auto health = grpc::health::v1::Health::NewStub(Channel(ps_, token));
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(5));
    grpc::health::v1::HealthCheckResponse answer;
    const grpc::Status status = health->Check(&ctx, {}, &answer);
    EXPECT_TRUE(status.ok())
        << "token file '" << token << "': " << status.error_message();
    EXPECT_EQ(answer.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }

  // Nothing changed: same blocks, same values, the job still on.
  proto::ChecksumResponse after;
  ASSERT_TRUE(Checksums(MakeChannel(ps_), &after).ok());
  ASSERT_EQ(after.blocks_size(), before.blocks_size());
  for (int i = 0; i < before.blocks_size(); ++i) {
    EXPECT_EQ(after.blocks(i).crc32c(), before.blocks(i).crc32c());
    EXPECT_EQ(after.blocks(i).version(), before.blocks(i).version());
  }
  auto stub = proto::Coordinator::NewStub(MakeChannel(coordinator_));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(5));
  proto::ClusterStatusResponse status;
  ASSERT_TRUE(stub->ClusterStatus(&ctx, {}, &status).ok());
  EXPECT_FALSE(status.stop()) << status.stop_reason();
  EXPECT_EQ(daemons_["ps-0"]->Poll(), std::nullopt) << "the ps stopped";
}

// A caller with the worker token is trusted to push, not to poison: over TLS
// the ps refuses a huge finite gradient, a block named twice, an unknown
// encoding and a pull of the same block many times, and its state is as it
// was.
TEST_F(SecurityTest, AWorkerTokenCannotPoisonTheModel) {
  StartCluster(/*mutual=*/false, /*steps=*/0);
  proto::ChecksumResponse before;
  ASSERT_TRUE(Checksums(MakeChannel(ps_), &before).ok());
  proto::DescribeModelResponse model;
  proto::GetPlacementResponse placement;
  ASSERT_NO_FATAL_FAILURE(ModelAndPlacement(&model, &placement));
  ASSERT_GT(model.blocks_size(), 0);
  const uint32_t block = model.blocks(0).id();
  const std::vector<float> huge(model.blocks(0).floats(), 1e38f);
  // The token holder takes worker 0's place (free: no worker runs), so its
  // pushes carry that place's incarnation and push key.
  proto::RegisterWorkerResponse registered;
  {
    auto stub =
        proto::Coordinator::NewStub(Channel(coordinator_, Token("worker")));
    proto::RegisterWorkerRequest request;
    request.set_index(0);
    request.set_address("127.0.0.1:1");
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    ASSERT_TRUE(stub->RegisterWorker(&context, request, &registered).ok());
  }
  auto ps = proto::ParameterServer::NewStub(Channel(ps_, Token("worker")));
  uint64_t n = 0;
  // Each push its own sequence, retried until the ps has heard of the
  // incarnation.
  auto push = [&](proto::PushRequest request) {
    request.set_sequence(MakeSequence(registered.incarnation(), ++n));
    request.set_push_key(registered.push_key());
    grpc::Status status;
    for (int i = 0; i < 100; ++i) {
      grpc::ClientContext context;
      context.set_deadline(DeadlineIn(5));
      proto::PushResponse response;
      status = ps->Push(&context, request, &response);
      if (status.error_message().find("has not heard of") ==
          std::string::npos) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    return status;
  };
  proto::PushRequest poison;
  poison.set_placement_epoch(placement.epoch());
  poison.set_worker_id(0);
  proto::BlockData* data = poison.add_blocks();
  data->set_block_id(block);
  data->set_data(huge.data(), huge.size() * sizeof(float));
  const grpc::Status finite = push(poison);
  EXPECT_EQ(finite.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << Describe(finite);
  EXPECT_THAT(finite.error_message(), HasSubstr("max_gradient_value"));
  // Issue 25 attack 2 over TLS: the worker token alone does not move worker
  // 0's window (the ps knows the incarnation now); its place's push key does.
  for (const uint64_t key : {uint64_t{0}, registered.push_key() + 1}) {
    proto::PushRequest forged = poison;
    forged.set_sequence(MakeSequence(registered.incarnation(), 1 << 20));
    forged.set_push_key(key);
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::PushResponse response;
    const grpc::Status status = ps->Push(&context, forged, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << Describe(status);
  }
  proto::PushRequest twice = poison;
  const std::vector<float> small(model.blocks(0).floats(), 1e-3f);
  twice.mutable_blocks(0)->set_data(small.data(), small.size() * sizeof(float));
  *twice.add_blocks() = twice.blocks(0);
  EXPECT_EQ(push(twice).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  proto::PushRequest encoding = twice;
  encoding.mutable_blocks()->RemoveLast();
  encoding.mutable_blocks(0)->set_encoding(static_cast<proto::Encoding>(7));
  EXPECT_EQ(push(encoding).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  {
    proto::PullRequest pull;
    pull.set_placement_epoch(placement.epoch());
    pull.set_worker_id(0);
    for (int i = 0; i < 10000; ++i) pull.add_block_ids(block);
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::PullResponse response;
    const grpc::Status pulled = ps->Pull(&context, pull, &response);
    EXPECT_EQ(pulled.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << Describe(pulled);
  }
  proto::ChecksumResponse after;
  ASSERT_TRUE(Checksums(MakeChannel(ps_), &after).ok());
  ASSERT_EQ(after.blocks_size(), before.blocks_size());
  for (int i = 0; i < before.blocks_size(); ++i) {
    EXPECT_EQ(after.blocks(i).crc32c(), before.blocks(i).crc32c());
    EXPECT_EQ(after.blocks(i).version(), before.blocks(i).version());
  }
  // The same worker token still trains: a sane push applies.
  proto::PushRequest sane = encoding;
  sane.mutable_blocks(0)->set_encoding(proto::FLOAT32);
  const grpc::Status applied = push(sane);
  EXPECT_TRUE(applied.ok()) << Describe(applied);
}

// Issue 25 attack 3 in secure mode: with mutual TLS a worker's place is
// taken only with that place's certificate, so a worker token with another
// certificate (psctl's, another worker's) cannot take a free place, and so
// cannot speak for it.
TEST_F(SecurityTest, AWorkerPlaceTakesOnlyItsOwnCertificate) {
  StartCluster(/*mutual=*/true, /*steps=*/0);
  auto register_as = [&](const std::string& certificate) {
    auto stub = proto::Coordinator::NewStub(
        Channel(coordinator_, Token("worker"), certificate));
    proto::RegisterWorkerRequest request;
    request.set_index(0);
    request.set_address("127.0.0.1:1");
    proto::RegisterWorkerResponse response;
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    grpc::Status status = stub->RegisterWorker(&context, request, &response);
    EXPECT_EQ(status.ok(), !response.member_key().empty());
    return status;
  };
  const grpc::Status foreign = register_as("client");
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << Describe(foreign);
  EXPECT_THAT(foreign.error_message(),
              HasSubstr("register: worker 0's place is taken only with the "
                        "certificate made for worker-0 (CN downpour-worker-0); "
                        "this caller's certificate is downpour-client"));
  const grpc::Status own = register_as("worker-0");
  EXPECT_TRUE(own.ok()) << Describe(own);
}

// Issue 26: with mutual TLS a member acts only as itself. Worker 0's
// certificate and the worker token do not push as worker 1 even with worker
// 1's incarnation and push key in hand (the ps checks the certificate against
// the push's worker id), nor take a ps place, nor stream a shard with the ps
// token; worker 1's own certificate pushes.
TEST_F(SecurityTest, AWorkerCertificatePushesOnlyAsItsOwnWorker) {
  StartCluster(/*mutual=*/true, /*steps=*/0, /*workers=*/2);
  proto::DescribeModelResponse model;
  proto::GetPlacementResponse placement;
  ASSERT_NO_FATAL_FAILURE(ModelAndPlacement(&model, &placement));
  ASSERT_GT(model.blocks_size(), 0);
  // Worker 1's place, taken with its own certificate.
  proto::RegisterWorkerResponse registered;
  {
    auto stub = proto::Coordinator::NewStub(
        Channel(coordinator_, Token("worker"), "worker-1"));
    proto::RegisterWorkerRequest request;
    request.set_index(1);
    request.set_address("127.0.0.1:1");
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    ASSERT_TRUE(stub->RegisterWorker(&context, request, &registered).ok());
  }
  const std::vector<float> small(model.blocks(0).floats(), 1e-3f);
  proto::PushRequest push;
  push.set_placement_epoch(placement.epoch());
  push.set_worker_id(1);
  push.set_sequence(MakeSequence(registered.incarnation(), 1));
  push.set_push_key(registered.push_key());
  proto::BlockData* data = push.add_blocks();
  data->set_block_id(model.blocks(0).id());
  data->set_data(small.data(), small.size() * sizeof(float));
  // Retried while the ps has not heard of the incarnation yet.
  auto push_as = [&](const std::string& certificate) {
    auto ps = proto::ParameterServer::NewStub(
        Channel(ps_, Token("worker"), certificate));
    grpc::Status status;
    for (int i = 0; i < 100; ++i) {
      grpc::ClientContext context;
      context.set_deadline(DeadlineIn(5));
      proto::PushResponse response;
      status = ps->Push(&context, push, &response);
      if (!absl::StrContains(status.error_message(), "has not heard of")) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return status;
  };
  proto::ChecksumResponse before, after;
  ASSERT_TRUE(Checksums(MakeChannel(ps_), &before).ok());
  const grpc::Status forged = push_as("worker-0");
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << Describe(forged);
  EXPECT_THAT(forged.error_message(),
              HasSubstr("push: a push as worker 1 is made only with the "
                        "certificate made for worker-1 (CN downpour-worker-1); "
                        "this caller's certificate is downpour-worker-0"));
  ASSERT_TRUE(Checksums(MakeChannel(ps_), &after).ok());
  EXPECT_EQ(after.blocks(0).version(), before.blocks(0).version());
  EXPECT_EQ(after.blocks(0).crc32c(), before.blocks(0).crc32c());
  {
    // Nor a ps's place or a shard's stream, even with the ps token.
    auto c = proto::Coordinator::NewStub(
        Channel(coordinator_, Token("ps"), "worker-0"));
    proto::RegisterServerRequest request;
    request.set_index(0);
    request.set_address("127.0.0.1:1");
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::RegisterServerResponse response;
    const grpc::Status status = c->RegisterServer(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << Describe(status);
    EXPECT_THAT(status.error_message(),
                HasSubstr("certificate made for ps-0 or standby-*"));
    auto p =
        proto::ParameterServer::NewStub(Channel(ps_, Token("ps"), "worker-0"));
    grpc::ClientContext replicate_context;
    replicate_context.set_deadline(DeadlineIn(5));
    proto::ReplicateResponse replicated;
    const grpc::Status stream = p->Replicate(
        &replicate_context, proto::ReplicateRequest(), &replicated);
    EXPECT_EQ(stream.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << Describe(stream);
  }
  const grpc::Status own = push_as("worker-1");
  EXPECT_TRUE(own.ok()) << Describe(own);
  ASSERT_TRUE(Checksums(MakeChannel(ps_), &after).ok());
  EXPECT_EQ(after.blocks(0).version(), before.blocks(0).version() + 1);
}

TEST_F(SecurityTest, MutualTlsRefusesAClientWithoutACertificate) {
  StartCluster(/*mutual=*/true, /*steps=*/0);
  // The test's own channels (client certificate, admin token) work.
  ASSERT_TRUE(Checksums(MakeChannel(ps_)).ok());
  // The same CA and admin token without a client certificate: no connection.
  SecuritySection no_cert = security_;
  no_cert.cert_file.clear();
  no_cert.key_file.clear();
  auto credentials = ChannelCredentialsFor(no_cert, "client", Token("admin"));
  ASSERT_TRUE(credentials.ok());
  grpc::Status refused = Checksums(grpc::CreateChannel(ps_, *credentials));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE)
      << Describe(refused);
}

TEST_F(SecurityTest, PsctlCallsWithTheConfigsTokenAndSaysWhenItIsWrong) {
  StartCluster(/*mutual=*/false, /*steps=*/0);
  auto run = [&](const std::string& name, std::vector<std::string> args) {
    auto process = testing::StartDaemon(name, "tools/psctl", std::move(args));
    EXPECT_TRUE(process.ok()) << process.status();
    const std::optional<int> status = (*process)->Wait(absl::Seconds(60));
    return std::make_pair(status.value_or(-1),
                          ReadFile((*process)->log_path()).value_or(""));
  };
  auto ok = run("psctl-ok",
                {"status", "--config", config_, "--coordinator", coordinator_});
  EXPECT_EQ(ok.first, 0) << ok.second;
  const std::string forged = dir_ + "/forged.token";
  ASSERT_TRUE(
      WriteFileAtomically(forged, "fedcba9876543210fedcba9876543210\n").ok());
  auto bad = run("psctl-bad", {"status", "--config", config_, "--coordinator",
                               coordinator_, "--token_file", forged});
  EXPECT_EQ(bad.first, 1) << bad.second;
  EXPECT_THAT(bad.second, HasSubstr("matches no role"));
}

}  // namespace
}  // namespace downpour

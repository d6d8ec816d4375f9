// The serving daemon (serve/, issue 22 item 3) as a user runs it: the real
// binary on 127.0.0.1:0, Predict over gRPC, the file replaced by rename while
// clients predict, a missing or broken file, TLS and tokens; and a sparse job
// trained on real data, exported with psctl and served, whose served AUC is
// the worker's own to the last bit and whose served margins are predict's;
// a dense model served as predict scores it.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/model_spec.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "deploy/launcher_lib.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/export.h"
#include "model/metrics.h"
#include "model/sparse_model.h"
#include "proto/health.grpc.pb.h"
#include "proto/serve.grpc.pb.h"
#include "rpc/security.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"
#include "tests/run_job.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::downpour::testing::IsOk;
using ::testing::HasSubstr;
using testing::ReadText;
using testing::RunToEnd;

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

template <typename T>
std::string Bytes(const T* data, size_t n) {
  return std::string(reinterpret_cast<const char*>(data), n * sizeof(T));
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Examples [from, to) of `rows` as one request.
proto::PredictRequest RequestOf(const data::SparseDataset& rows, int64_t from,
                                int64_t to) {
  const int64_t first = rows.offsets[from];
  std::vector<uint32_t> offsets;
  for (int64_t r = from; r <= to; ++r) {
    offsets.push_back(static_cast<uint32_t>(rows.offsets[r] - first));
  }
  const size_t n = static_cast<size_t>(rows.offsets[to] - first);
  proto::PredictRequest request;
  request.set_keys(Bytes(rows.keys.data() + first, n));
  request.set_values(Bytes(rows.values.data() + first, n));
  request.set_offsets(Bytes(offsets.data(), offsets.size()));
  return request;
}

// A binary sparse_linear model over keys 1..n (every other one), weights
// from `seed`, `updates` in its meta.
model::SparseModel Model(int n, uint64_t seed, uint64_t updates) {
  Config config;
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kSparseLinear;
  config.model.sparse_buckets = 16;
  config.data.source = DataSource::kLibsvm;
  model::SparseModel m;
  m.meta = model::MakeSparseMeta(config, {"-1", "+1"}, {});
  m.meta.set_updates(updates);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  m.bias = normal(rng);
  for (int k = 1; k <= n; k += 2) {
    const float w = normal(rng);
    m.keys.push_back(k);
    m.weights.push_back(w == 0 ? 1 : w);
  }
  return m;
}

// `rows` examples of 39 keys from 1..2n (Criteo-like), values 1.
data::SparseDataset Rows(int n, int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> key(1, 2 * n);
  data::SparseDataset d;
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < 39; ++i) {
      d.keys.push_back(key(rng));
      d.values.push_back(i % 3 == 0 ? 0.5f : 1);
    }
    d.offsets.push_back(static_cast<int64_t>(d.keys.size()));
    d.y.push_back(r % 2);
  }
  return d;
}

class ServeTest : public testing::DaemonJobTest {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir();
    model_ = dir_ + "/model.npz";
    config_ = testing::WriteConfig("serve.yaml", "logging:\n  level: info\n");
  }

  // Starts the serve binary on 127.0.0.1:0 for model_; its address.
  std::string StartServe(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--model",     model_,
                                     "--listen",    "127.0.0.1:0",
                                     "--port_file", dir_ + "/serve.port"};
    for (std::string& a : extra) args.push_back(std::move(a));
    Subprocess& serve = Start("serve", "serve/serve", args);
    absl::StatusOr<std::string> address =
        testing::WaitForPort(serve, dir_ + "/serve.port");
    EXPECT_THAT(address, IsOk());
    return address.ok() ? *address : "";
  }

  // Calls wait for the channel to connect (within their deadline): on a
  // loaded machine a fresh handshake may outlast MakeChannel's connect
  // timeout. The 64 clients below call without waiting.
  static std::string Health(std::shared_ptr<grpc::Channel> channel) {
    auto stub = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(10));
    context.set_wait_for_ready(true);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = stub->Check(
        &context, grpc::health::v1::HealthCheckRequest(), &response);
    if (!status.ok()) return status.error_message();
    return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
        response.status());
  }

  static grpc::Status Predict(proto::Predictor::Stub& stub,
                              const proto::PredictRequest& request,
                              proto::PredictResponse* reply,
                              bool wait_for_ready = true) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(10));
    context.set_wait_for_ready(wait_for_ready);
    return stub.Predict(&context, request, reply);
  }

  static proto::ServeStatusResponse Status(proto::Predictor::Stub& stub) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(10));
    context.set_wait_for_ready(true);
    proto::ServeStatusResponse status;
    stub.ServeStatus(&context, proto::ServeStatusRequest(), &status);
    return status;
  }

  std::string dir_, model_;
};

TEST_F(ServeTest, PredictsOverGrpcAndSwapsAFileReplacedByRename) {
  const model::SparseModel a = Model(2000, 1, 10);
  const model::SparseModel b = Model(2000, 2, 20);
  ASSERT_THAT(model::WriteSparseModel(model_, a), IsOk());
  const std::string address = StartServe({"--reload_interval_s", "0.05"});
  ASSERT_FALSE(address.empty());
  auto channel = MakeChannel(address);
  EXPECT_EQ(Health(channel), "SERVING");
  auto stub = proto::Predictor::NewStub(channel);

  const data::SparseDataset rows = Rows(2000, 64, 3);
  const proto::PredictRequest request = RequestOf(rows, 0, 64);
  proto::PredictResponse reply;
  ASSERT_TRUE(Predict(*stub, request, &reply).ok());
  const std::vector<float> want_a = model::Margins(a, rows);
  const std::vector<float> got = Floats(reply.margins());
  ASSERT_EQ(got.size(), 64u);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(Bits(got[i]), Bits(want_a[i])) << i;
  }
  EXPECT_EQ(reply.snapshot(), 1u);
  EXPECT_EQ(reply.snapshot_updates(), 10u);

  // Replace by rename (WriteSparseModel writes a temporary file and renames
  // it); poll ServeStatus until the new snapshot answers.
  ASSERT_THAT(model::WriteSparseModel(model_, b), IsOk());
  ASSERT_TRUE(testing::WaitUntil([&] { return Status(*stub).snapshot() == 2; },
                                 absl::Seconds(20), absl::Milliseconds(20)))
      << daemons_["serve"]->LogTail(20);
  ASSERT_TRUE(Predict(*stub, request, &reply).ok());
  EXPECT_EQ(reply.margins(), Bytes(model::Margins(b, rows).data(), 64));
  EXPECT_EQ(reply.snapshot(), 2u);
  EXPECT_EQ(reply.snapshot_updates(), 20u);
  const proto::ServeStatusResponse status = Status(*stub);
  EXPECT_EQ(status.reloads(), 1u);
  EXPECT_EQ(status.updates(), 20u);
  EXPECT_EQ(status.requests(), 2u);
  EXPECT_EQ(status.examples(), 128u);
  EXPECT_GT(status.misses(), 0u);
  // Keys 1..4000 asked, the odd ones of 1..2000 held: 3 in 4 miss.
  EXPECT_NEAR(status.miss_ratio(), 0.75, 0.05);
  EXPECT_GE(status.snapshot_age_s(), 0);
  EXPECT_LT(status.snapshot_age_s(), 60);

  // psctl serving shows the same state.
  ASSERT_EQ(RunToEnd({testing::BinDir() + "/tools/psctl", "serving",
                      "--address", address},
                     dir_ + "/serving.txt"),
            0)
      << ReadText(dir_ + "/serving.txt");
  const std::string shown = ReadText(dir_ + "/serving.txt");
  EXPECT_THAT(shown, HasSubstr(address + ": serving"));
  EXPECT_THAT(shown, HasSubstr("snapshot     2: binary sparse_linear"));
  EXPECT_THAT(shown, HasSubstr("requests     2 (128 examples)"));
  EXPECT_THAT(shown, HasSubstr("loads        2 (1 reloads), 0 failed"));

  // SIGTERM: a clean exit.
  EXPECT_EQ(daemons_["serve"]->Stop(absl::Seconds(10)), 0);
}

TEST_F(ServeTest, AMissingFileIsNotServingUntilItAppears) {
  const std::string address = StartServe({"--reload_interval_s", "0.05"});
  ASSERT_FALSE(address.empty());
  auto channel = MakeChannel(address);
  EXPECT_EQ(Health(channel), "NOT_SERVING");
  auto stub = proto::Predictor::NewStub(channel);
  const data::SparseDataset rows = Rows(100, 4, 3);
  proto::PredictResponse reply;
  const grpc::Status refused = Predict(*stub, RequestOf(rows, 0, 4), &reply);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(refused.error_message(),
            absl::StrCat("no snapshot loaded yet: waiting for ", model_,
                         " (psctl export writes it)"));

  ASSERT_THAT(model::WriteSparseModel(model_, Model(100, 1, 1)), IsOk());
  ASSERT_TRUE(testing::WaitUntil([&] { return Health(channel) == "SERVING"; },
                                 absl::Seconds(20), absl::Milliseconds(20)));
  EXPECT_TRUE(Predict(*stub, RequestOf(rows, 0, 4), &reply).ok());
}

TEST_F(ServeTest, AFileThatIsNoModelEndsTheStartWithStatus2) {
  ASSERT_THAT(WriteFileAtomically(model_, std::string("not a model")), IsOk());
  auto serve = testing::StartDaemon(
      "serve", "serve/serve",
      {"--config", config_, "--model", model_, "--listen", "127.0.0.1:0"});
  ASSERT_THAT(serve, IsOk());
  EXPECT_EQ((*serve)->Wait(absl::Seconds(30)), 2);
  EXPECT_THAT((*serve)->LogTail(5),
              HasSubstr(absl::StrCat("serve: ", model_, ": not a NumPy .npz")));
}

// The target: a swap under 64 concurrent clients fails no request,
// and every answer comes whole from one snapshot.
TEST_F(ServeTest, SixtyFourClientsPredictWhileTheFileIsSwappedRepeatedly) {
  const model::SparseModel a = Model(20000, 1, 1);
  const model::SparseModel b = Model(20000, 2, 2);
  ASSERT_THAT(model::WriteSparseModel(model_, a), IsOk());
  const std::string address = StartServe({"--reload_interval_s", "0.01"});
  ASSERT_FALSE(address.empty());
  const data::SparseDataset rows = Rows(20000, 8, 5);
  const proto::PredictRequest request = RequestOf(rows, 0, 8);
  const std::string margins_a = Bytes(model::Margins(a, rows).data(), 8);
  const std::string margins_b = Bytes(model::Margins(b, rows).data(), 8);
  ASSERT_NE(margins_a, margins_b);

  constexpr int kClients = 64;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < 8; ++c) {
    channels.push_back(MakeChannel(address, true));
    // Connected before the clients start: on a loaded machine a fresh
    // handshake may outlast MakeChannel's connect timeout, and a call on a
    // channel still connecting fails at once. Failures counted below are
    // then the daemon's.
    ASSERT_TRUE(channels.back()->WaitForConnected(DeadlineIn(60)));
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> answered{0}, failed{0}, wrong{0};
  std::atomic<uint64_t> last_snapshot{0};
  std::string first_failure;
  std::atomic<bool> noted{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = proto::Predictor::NewStub(channels[c % channels.size()]);
      while (!stop.load()) {
        proto::PredictResponse reply;
        const grpc::Status status =
            Predict(*stub, request, &reply, /*wait_for_ready=*/false);
        if (!status.ok()) {
          if (!noted.exchange(true)) first_failure = status.error_message();
          ++failed;
          continue;
        }
        const std::string& want =
            reply.snapshot_updates() == 1 ? margins_a : margins_b;
        if (reply.margins() != want) ++wrong;
        uint64_t seen = last_snapshot.load();
        while (reply.snapshot() > seen &&
               !last_snapshot.compare_exchange_weak(seen, reply.snapshot())) {
        }
        ++answered;
      }
    });
  }
  // Swap until the daemon has loaded 20 new files (each swap waits for the
  // daemon to answer from it, so no swap goes unseen).
  auto stub = proto::Predictor::NewStub(MakeChannel(address));
  int swaps = 0;
  for (; swaps < 20; ++swaps) {
    ASSERT_THAT(model::WriteSparseModel(model_, swaps % 2 == 0 ? b : a),
                IsOk());
    const uint64_t want = static_cast<uint64_t>(swaps) + 2;
    ASSERT_TRUE(testing::WaitUntil([&] { return last_snapshot.load() >= want; },
                                   absl::Seconds(30), absl::Milliseconds(5)))
        << "swap " << swaps << ": the clients never saw snapshot " << want
        << "; log:\n"
        << daemons_["serve"]->LogTail(20);
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  const proto::ServeStatusResponse status = Status(*stub);
  std::fprintf(stderr,
               "%ld requests from %d clients through %d swaps: %ld failed, "
               "%ld wrong; daemon p50 %.0f us, p99 %.0f us\n",
               static_cast<long>(answered.load()), kClients, swaps,
               static_cast<long>(failed.load()),
               static_cast<long>(wrong.load()), status.latency_p50_s() * 1e6,
               status.latency_p99_s() * 1e6);
  EXPECT_EQ(failed.load(), 0) << first_failure;
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(answered.load(), 20 * kClients / 4);
  EXPECT_EQ(status.loads(), 21u);
  EXPECT_EQ(status.reload_failures(), 0u);
  EXPECT_EQ(status.requests(), static_cast<uint64_t>(answered.load()));
}

// TLS and role tokens from the config's security section: a reader token may
// Predict, no token is refused, a worker's token is no key either; health
// needs no token; predict --server --config goes through.
TEST_F(ServeTest, WithTlsAndTokensAReaderPredictsAndNoTokenIsRefused) {
  const std::string certs = dir_ + "/certs";
  {
    auto make = Subprocess::Start(
        "make_certs",
        {testing::BinDir() + "/deploy/make_certs.sh", "--out", certs, "--ps",
         "1", "--standby", "0", "--workers", "1"},
        dir_ + "/make_certs.log");
    ASSERT_TRUE(make.ok()) << make.status();
    ASSERT_EQ((*make)->Wait(absl::Seconds(60)), 0) << (*make)->LogTail(20);
  }
  config_ = testing::WriteConfig(
      "secure.yaml",
      absl::StrCat(
          "security:\n  tls: true\n  mutual_tls: true\n  ca_file: ", certs,
          "/ca.pem\n  cert_file: ", certs, "/{name}.pem\n",
          "  key_file: ", certs, "/{name}.key\n", "  ps_token_file: ", certs,
          "/ps.token\n", "  worker_token_file: ", certs, "/worker.token\n",
          "  admin_token_file: ", certs, "/admin.token\n",
          "  reader_token_file: ", certs, "/reader.token\n"));
  absl::StatusOr<Config> config = LoadConfig(config_);
  ASSERT_THAT(config, IsOk());
  const model::SparseModel m = Model(100, 1, 5);
  ASSERT_THAT(model::WriteSparseModel(model_, m), IsOk());
  const std::string address = StartServe();
  ASSERT_FALSE(address.empty());
  EXPECT_THAT(ReadText(daemons_["serve"]->log_path()),
              HasSubstr("with mutual TLS"));

  auto channel = [&](const std::string& role) {
    auto credentials = ChannelCredentialsFor(
        config->security, "client",
        role.empty() ? "" : absl::StrCat(certs, "/", role, ".token"));
    EXPECT_THAT(credentials, IsOk());
    return grpc::CreateChannel(address, *credentials);
  };
  const data::SparseDataset rows = Rows(100, 3, 3);
  const proto::PredictRequest request = RequestOf(rows, 0, 3);
  proto::PredictResponse reply;
  auto reader = proto::Predictor::NewStub(channel("reader"));
  const grpc::Status ok = Predict(*reader, request, &reply);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(reply.margins(), Bytes(model::Margins(m, rows).data(), 3));
  EXPECT_EQ(Status(*reader).requests(), 1u) << "ServeStatus as reader";
  auto admin = proto::Predictor::NewStub(channel("admin"));
  EXPECT_TRUE(Predict(*admin, request, &reply).ok());

  auto anonymous = proto::Predictor::NewStub(channel(""));
  const grpc::Status none = Predict(*anonymous, request, &reply);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << none.error_message();
  auto worker = proto::Predictor::NewStub(channel("worker"));
  const grpc::Status member = Predict(*worker, request, &reply);
  EXPECT_EQ(member.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << member.error_message();
  EXPECT_THAT(member.error_message(), HasSubstr("only reader, admin"));
  EXPECT_EQ(Health(channel("")), "SERVING");
  // Plaintext does not get through at all.
  auto plain = proto::Predictor::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  EXPECT_FALSE(Predict(*plain, request, &reply, /*wait_for_ready=*/false).ok());

  // predict --server with the config's security (admin token, client cert).
  const std::string data = dir_ + "/data.svm";
  {
    std::ofstream out(data);
    for (int r = 0; r < 3; ++r) {
      out << (r % 2 ? "+1" : "-1");
      for (int64_t i = rows.offsets[r]; i < rows.offsets[r + 1]; ++i) {
        out << " " << rows.keys[i] << ":" << rows.values[i];
      }
      out << "\n";
    }
  }
  const int rc = RunToEnd(
      {testing::BinDir() + "/tools/predict", "--model", model_, "--data", data,
       "--server", address, "--config", config_, "--out", dir_ + "/served.csv"},
      dir_ + "/predict.log");
  EXPECT_EQ(rc, 0) << ReadText(dir_ + "/predict.log");
  const int local =
      RunToEnd({testing::BinDir() + "/tools/predict", "--model", model_,
                "--data", data, "--out", dir_ + "/local.csv"},
               dir_ + "/local.log");
  EXPECT_EQ(local, 0) << ReadText(dir_ + "/local.log");
  EXPECT_EQ(ReadText(dir_ + "/served.csv"), ReadText(dir_ + "/local.csv"));
  EXPECT_THAT(ReadText(dir_ + "/served.csv"), ::testing::StartsWith("p_+1\n"));
}

// A dense model (a multiclass mlp over a CSV file) served: predict --server
// writes what predict writes, byte for byte, and rows of another width are
// refused naming both widths.
TEST_F(ServeTest, ADenseModelIsServedAsPredictScoresIt) {
  Config config;
  config.model.task = Task::kMulticlass;
  config.model.type = ModelType::kMlp;
  config.model.layers = {4, 8, 3};
  config.data.source = DataSource::kCsv;
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec, IsOk());
  model::ExportedModel m;
  m.meta = model::MakeMeta(config, {"a", "b", "c"}, {"f0", "f1", "f2", "f3"},
                           {1, 2, 3, 4}, {0.5f, 1, 2, 3});
  m.meta.set_updates(7);
  m.params = spec->InitAll(5);
  ASSERT_THAT(model::WriteModel(model_, m), IsOk());
  const std::string data = dir_ + "/data.csv";
  {
    std::ofstream out(data);
    out << "f0,f1,f2,f3,label\n";
    std::mt19937_64 rng(3);
    std::normal_distribution<float> normal(2, 3);
    for (int r = 0; r < 300; ++r) {
      for (int d = 0; d < 4; ++d) out << normal(rng) << ",";
      out << "abc"[r % 3] << "\n";
    }
  }
  const std::string address = StartServe();
  ASSERT_FALSE(address.empty());
  const int rc = RunToEnd(
      {testing::BinDir() + "/tools/predict", "--model", model_, "--data", data,
       "--server", address, "--batch", "64", "--out", dir_ + "/served.csv"},
      dir_ + "/predict.log");
  EXPECT_EQ(rc, 0) << ReadText(dir_ + "/predict.log");
  const int local =
      RunToEnd({testing::BinDir() + "/tools/predict", "--model", model_,
                "--data", data, "--out", dir_ + "/local.csv"},
               dir_ + "/local.log");
  EXPECT_EQ(local, 0) << ReadText(dir_ + "/local.log");
  EXPECT_EQ(ReadText(dir_ + "/served.csv"), ReadText(dir_ + "/local.csv"));
  EXPECT_THAT(ReadText(dir_ + "/served.csv"),
              ::testing::StartsWith("p_a,p_b,p_c\n"));
  // The same metrics line on stderr, named after the file.
  EXPECT_THAT(ReadText(dir_ + "/predict.log"),
              HasSubstr("predict: metrics on " + data + " (300 examples): "));

  auto stub = proto::Predictor::NewStub(MakeChannel(address));
  const std::vector<float> row = {1, 2, 3};
  proto::PredictRequest request;
  request.set_dense(Bytes(row.data(), row.size()));
  request.set_features(3);
  proto::PredictResponse reply;
  const grpc::Status refused = Predict(*stub, request, &reply);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("the model takes 4 features per example, the "
                        "request has 3"));
  const proto::ServeStatusResponse status = Status(*stub);
  EXPECT_EQ(status.type(), "mlp");
  EXPECT_EQ(status.updates(), 7u);
  EXPECT_EQ(status.examples(), 300u);
  EXPECT_EQ(status.rejected(), 1u);
}

// heart_scale (data/heart_scale/heart_scale, from deploy/fetch_data.sh) split
// 4:1 by row, or a synthetic LIBSVM file of 64-bit ids when it was not
// fetched (the test says so).
void WriteTrainAndTest(const std::string& train, const std::string& test) {
  const std::string heart = testing::BinDir() + "/data/heart_scale/heart_scale";
  if (!fs::exists(heart)) {
    std::fprintf(stderr,
                 "serve_test: %s not fetched (deploy/fetch_data.sh "
                 "heart_scale): training on synthetic LIBSVM data instead\n",
                 heart.c_str());
    testing::WriteSparseLibsvm(train, 3000, 1);
    testing::WriteSparseLibsvm(test, 600, 2);
    return;
  }
  std::ifstream in(heart);
  std::ofstream tr(train), te(test);
  std::string line;
  for (int i = 0; std::getline(in, line); ++i) {
    (i % 5 == 4 ? te : tr) << line << "\n";
  }
}

// The other target: served predictions equal the worker's
// evaluation bit for bit. One worker trains sparse_linear on 2 ps; psctl
// exports the final checkpoints; the daemon serves the file; the AUC of the
// served margins on the job's test file equals the AUC the worker reported
// exactly, and the margins equal predict's (and model::Margins) bit for bit.
TEST_F(ServeTest, ServedMarginsAreTheWorkersEvaluationAndPredicts) {
  const std::string train = dir_ + "/train.svm";
  const std::string test = dir_ + "/test.svm";
  WriteTrainAndTest(train, test);
  const std::string job_yaml = testing::LoopbackConfig(
      2, 1,
      absl::StrCat("model:\n  type: sparse_linear\n  task: binary\n"
                   "  sparse_buckets: 16\n"
                   "optimizer:\n  type: ftrl\n  learning_rate: 0.3\n"
                   "  l1: 0.1\n  l2: 10\n"
                   "training:\n  batch_size: 16\n  epochs: 8\n"
                   "  eval_every_steps: 0\n  seed: 42\n"
                   "data:\n  source: libsvm\n  path: ",
                   train, "\n  test_path: ", test, "\ncheckpoint:\n  dir: ",
                   dir_, "/ckpt\n  interval_s: 60\n"));
  const std::string job = testing::WriteConfig("job.yaml", job_yaml);
  absl::StatusOr<LaunchSummary> summary = testing::RunJob(job, dir_ + "/run");
  ASSERT_THAT(summary, IsOk());
  ASSERT_EQ(summary->outcome, "succeeded") << summary->failure;
  ASSERT_EQ(summary->workers.size(), 1u);
  const double job_auc = testing::FinalMetric(*summary, "auc");
  ASSERT_GT(job_auc, 0.7) << "the model did not learn: "
                          << summary->stop_reason;
  const auto worker_auc = summary->workers[0].metrics.find("auc");
  ASSERT_NE(worker_auc, summary->workers[0].metrics.end());
  EXPECT_EQ(worker_auc->second, job_auc) << "one worker: its own figure";

  ASSERT_EQ(RunToEnd({testing::BinDir() + "/tools/psctl", "export", "--config",
                      job, "--checkpoint_dir", dir_ + "/ckpt", "--out", model_},
                     dir_ + "/export.log"),
            0)
      << ReadText(dir_ + "/export.log");
  const std::string address = StartServe();
  ASSERT_FALSE(address.empty());
  auto stub = proto::Predictor::NewStub(MakeChannel(address));

  absl::StatusOr<model::SparseModel> exported = model::ReadSparseModel(model_);
  ASSERT_THAT(exported, IsOk());
  absl::StatusOr<data::SparseDataset> rows =
      model::ReadSparseExamples(exported->meta, test, true);
  ASSERT_THAT(rows, IsOk());
  // In requests of at most 25 examples, as a client would send them.
  std::vector<float> served;
  for (int64_t from = 0; from < rows->rows(); from += 25) {
    const int64_t to = std::min<int64_t>(rows->rows(), from + 25);
    proto::PredictResponse reply;
    const grpc::Status status =
        Predict(*stub, RequestOf(*rows, from, to), &reply);
    ASSERT_TRUE(status.ok()) << status.error_message();
    for (float m : Floats(reply.margins())) served.push_back(m);
  }
  ASSERT_EQ(served.size(), static_cast<size_t>(rows->rows()));
  const std::vector<float> offline = model::Margins(*exported, *rows);
  for (size_t i = 0; i < served.size(); ++i) {
    ASSERT_EQ(Bits(served[i]), Bits(offline[i])) << "example " << i;
  }
  const double served_auc = model::Auc(served, rows->y);
  std::fprintf(stderr, "job auc %.17g, served auc %.17g (%ld test rows)\n",
               job_auc, served_auc, static_cast<long>(rows->rows()));
  EXPECT_EQ(served_auc, job_auc);
  const model::Metrics metrics = model::ComputeMetrics(
      Task::kBinary, served.data(), rows->y.data(), rows->rows(), 1);
  for (const auto& [name, value] : summary->workers[0].metrics) {
    EXPECT_EQ(metrics.Get(name), value) << name;
  }

  // predict --server and predict alone write the same file, byte for byte
  // (probabilities computed in double from the float margins and printed with
  // %.17g: equal text is equal margins).
  ASSERT_EQ(RunToEnd({testing::BinDir() + "/tools/predict", "--model", model_,
                      "--data", test, "--server", address, "--batch", "7",
                      "--out", dir_ + "/served.csv"},
                     dir_ + "/served.log"),
            0)
      << ReadText(dir_ + "/served.log");
  ASSERT_EQ(RunToEnd({testing::BinDir() + "/tools/predict", "--model", model_,
                      "--data", test, "--out", dir_ + "/local.csv"},
                     dir_ + "/local.log"),
            0)
      << ReadText(dir_ + "/local.log");
  EXPECT_EQ(ReadText(dir_ + "/served.csv"), ReadText(dir_ + "/local.csv"));
  const std::string served_log = ReadText(dir_ + "/served.log");
  EXPECT_THAT(served_log,
              HasSubstr("predict: metrics on " + test + " (" +
                        std::to_string(rows->rows()) + " examples): auc"));
  EXPECT_THAT(served_log, ::testing::Not(HasSubstr("note:")));
  EXPECT_EQ(testing::Figure(served_log, "auc"),
            testing::Figure(ReadText(dir_ + "/local.log"), "auc"));
}

}  // namespace
}  // namespace downpour

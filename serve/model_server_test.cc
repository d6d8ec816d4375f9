#include "serve/model_server.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_path.h"
#include "data/sparse_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/dense_model.h"
#include "model/export.h"
#include "model/metrics.h"
#include "model/sparse_model.h"
#include "proto/model.pb.h"
#include "proto/serve.pb.h"
#include "serve/examples.h"

namespace downpour::serve {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::downpour::testing::TempPath;
using ::testing::HasSubstr;

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(T));
}

template <typename T>
std::vector<T> Values(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// A sparse_linear model of `n` random keys (every third key of `universe`)
// with weights drawn from `seed`; `updates` goes into its meta.
model::SparseModel RandomModel(const std::vector<uint64_t>& universe,
                               uint64_t seed, uint64_t updates,
                               Task task = Task::kBinary) {
  Config config;
  config.model.task = task;
  config.model.type = ModelType::kSparseLinear;
  config.model.sparse_buckets = 16;
  config.data.source = DataSource::kLibsvm;
  model::SparseModel m;
  m.meta = model::MakeSparseMeta(config,
                                 task == Task::kBinary
                                     ? std::vector<std::string>{"-1", "+1"}
                                     : std::vector<std::string>{},
                                 {});
  m.meta.set_updates(updates);
  m.meta.set_origin(absl::StrCat("test seed ", seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 0.7f);
  m.bias = normal(rng);
  std::vector<uint64_t> keys;
  for (size_t i = 0; i < universe.size(); i += 3) keys.push_back(universe[i]);
  std::sort(keys.begin(), keys.end());
  for (uint64_t k : keys) {
    float w = normal(rng);
    if (w == 0) w = 0.5f;
    m.keys.push_back(k);
    m.weights.push_back(w);
  }
  return m;
}

std::vector<uint64_t> Universe() {
  std::mt19937_64 rng(99);
  std::vector<uint64_t> keys(3000);
  for (uint64_t& k : keys) k = rng();
  return keys;
}

// `rows` examples of 1-40 entries from `universe` (so about two thirds miss
// a model of RandomModel), values of every magnitude.
data::SparseDataset RandomRows(const std::vector<uint64_t>& universe, int rows,
                               uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> count(1, 40);
  std::uniform_int_distribution<size_t> pick(0, universe.size() - 1);
  std::uniform_real_distribution<float> value(-3, 3);
  data::SparseDataset d;
  for (int r = 0; r < rows; ++r) {
    const int n = r % 17 == 0 ? 0 : count(rng);  // some empty examples
    for (int i = 0; i < n; ++i) {
      d.keys.push_back(universe[pick(rng)]);
      d.values.push_back(i % 5 == 0 ? 1.0f : value(rng) * 1e3f);
    }
    d.offsets.push_back(static_cast<int64_t>(d.keys.size()));
    d.y.push_back(r % 2);
  }
  return d;
}

proto::PredictRequest RequestOf(const data::SparseDataset& d) {
  std::vector<uint32_t> offsets(d.offsets.begin(), d.offsets.end());
  proto::PredictRequest request;
  request.set_keys(Bytes(d.keys));
  request.set_values(Bytes(d.values));
  request.set_offsets(Bytes(offsets));
  return request;
}

// A dense model of `task`, `type` and `layers` with parameters and input
// standardization drawn from `seed`; `updates` goes into its meta.
model::ExportedModel RandomDenseModel(Task task, ModelType type,
                                      std::vector<int> layers, uint64_t seed,
                                      uint64_t updates) {
  Config config;
  config.model.task = task;
  config.model.type = type;
  config.model.layers = std::move(layers);
  config.data.source = DataSource::kCsv;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  const int inputs = config.model.layers.front();
  std::vector<float> mean(inputs), std(inputs);
  for (int d = 0; d < inputs; ++d) {
    mean[d] = normal(rng);
    std[d] = 0.5f + std::abs(normal(rng));
  }
  model::ExportedModel m;
  m.meta = model::MakeMeta(config, {}, {}, mean, std);
  m.meta.set_updates(updates);
  // fc{l}.weight [in, out] then fc{l}.bias [out] per layer.
  const std::vector<int>& w = config.model.layers;
  for (size_t l = 0; l + 1 < w.size(); ++l) {
    for (int i = 0; i < w[l] * w[l + 1] + w[l + 1]; ++i) {
      m.params.push_back(normal(rng) / std::sqrt(static_cast<float>(w[l])));
    }
  }
  return m;
}

// `n` rows of `features` raw values.
std::vector<float> DenseRows(int64_t n, int features, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 2);
  std::vector<float> x(static_cast<size_t>(n) * features);
  for (float& v : x) v = normal(rng);
  return x;
}

proto::PredictRequest DenseRequest(const std::vector<float>& x, int features) {
  proto::PredictRequest request;
  request.set_dense(Bytes(x));
  request.set_features(static_cast<uint32_t>(features));
  return request;
}

// What model::DenseScorer computes for `m` on `x` (n x outputs margins).
std::vector<float> DenseMargins(const model::ExportedModel& m,
                                const std::vector<float>& x) {
  absl::StatusOr<std::unique_ptr<model::DenseScorer>> scorer =
      model::DenseScorer::Create(m);
  EXPECT_THAT(scorer, IsOk());
  const int64_t n = static_cast<int64_t>(x.size()) / (*scorer)->features();
  std::vector<float> out(static_cast<size_t>(n) * (*scorer)->outputs());
  (*scorer)->Margins(x.data(), n, out.data());
  return out;
}

class ModelServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempPath(absl::StrCat(
        ::testing::UnitTest::GetInstance()->current_test_info()->name(),
        ".npz"));
    std::remove(path_.c_str());
    universe_ = Universe();
  }

  std::unique_ptr<ModelServer> Create(ModelServer::Options options = {}) {
    options.model_path = path_;
    absl::StatusOr<std::unique_ptr<ModelServer>> server =
        ModelServer::Create(options);
    EXPECT_THAT(server, IsOk());
    return server.ok() ? *std::move(server) : nullptr;
  }

  proto::ServeStatusResponse Status(const ModelServer& server) {
    proto::ServeStatusResponse status;
    server.Status(&status);
    return status;
  }

  std::string path_;
  std::vector<uint64_t> universe_;
};

TEST_F(ModelServerTest, MarginsEqualModelMarginsBitForBit) {
  const model::SparseModel m = RandomModel(universe_, 1, 77);
  ASSERT_THAT(model::WriteSparseModel(path_, m), IsOk());
  std::unique_ptr<ModelServer> server = Create();
  ASSERT_NE(server, nullptr);
  const data::SparseDataset rows = RandomRows(universe_, 500, 2);
  proto::PredictResponse reply;
  ASSERT_THAT(server->Predict(RequestOf(rows), &reply), IsOk());

  const std::vector<float> expected = model::Margins(m, rows);
  const std::vector<float> margins = Values<float>(reply.margins());
  ASSERT_EQ(margins.size(), 500u);
  for (size_t i = 0; i < margins.size(); ++i) {
    ASSERT_EQ(Bits(margins[i]), Bits(expected[i])) << "example " << i;
  }
  const std::vector<float> p = Values<float>(reply.probabilities());
  ASSERT_EQ(p.size(), 500u);
  for (size_t i = 0; i < p.size(); ++i) {
    const float sigmoid =
        static_cast<float>(1 / (1 + std::exp(-double{expected[i]})));
    ASSERT_EQ(Bits(p[i]), Bits(sigmoid)) << "example " << i;
  }
  EXPECT_EQ(reply.snapshot(), 1u);
  EXPECT_EQ(reply.snapshot_updates(), 77u);

  // Misses: the keys the model holds no row for, per request and in total.
  int64_t misses = 0;
  for (uint64_t k : rows.keys) {
    misses += !std::binary_search(m.keys.begin(), m.keys.end(), k);
  }
  ASSERT_GT(misses, 0);
  EXPECT_EQ(reply.misses(), static_cast<uint64_t>(misses));
  const proto::ServeStatusResponse status = Status(*server);
  EXPECT_EQ(status.requests(), 1u);
  EXPECT_EQ(status.examples(), 500u);
  EXPECT_EQ(status.keys(), rows.keys.size());
  EXPECT_EQ(status.misses(), static_cast<uint64_t>(misses));
  EXPECT_DOUBLE_EQ(status.miss_ratio(),
                   static_cast<double>(misses) / rows.keys.size());
  EXPECT_EQ(status.rows(), m.keys.size());
  EXPECT_EQ(status.updates(), 77u);
  EXPECT_EQ(status.origin(), "test seed 1");
  EXPECT_EQ(status.type(), "sparse_linear");
  EXPECT_EQ(status.task(), "binary");
  EXPECT_TRUE(status.loaded());
  EXPECT_GT(status.latency_p99_s(), 0);
}

TEST_F(ModelServerTest, RegressionModelsAnswerMarginsOnly) {
  const model::SparseModel m = RandomModel(universe_, 3, 5, Task::kRegression);
  ASSERT_THAT(model::WriteSparseModel(path_, m), IsOk());
  std::unique_ptr<ModelServer> server = Create();
  ASSERT_NE(server, nullptr);
  const data::SparseDataset rows = RandomRows(universe_, 50, 4);
  proto::PredictResponse reply;
  ASSERT_THAT(server->Predict(RequestOf(rows), &reply), IsOk());
  const std::vector<float> expected = model::Margins(m, rows);
  const std::vector<float> margins = Values<float>(reply.margins());
  ASSERT_EQ(margins.size(), expected.size());
  for (size_t i = 0; i < margins.size(); ++i) {
    ASSERT_EQ(Bits(margins[i]), Bits(expected[i])) << "example " << i;
  }
  EXPECT_TRUE(reply.probabilities().empty());
}

// A model type SparseScorer learns is served without a change here: fm's
// pairwise term (and its initializer for keys without an embedding) comes
// through bit for bit.
TEST_F(ModelServerTest, FmModelsAreServedAsTheScorerScoresThem) {
  model::SparseModel m = RandomModel(universe_, 7, 3);
  Config config;
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kFm;
  config.model.sparse_buckets = 16;
  config.model.fm.dim = 4;
  config.model.fm.init_scale = 0.05;
  config.data.source = DataSource::kLibsvm;
  m.meta = model::MakeSparseMeta(config, {"-1", "+1"}, {});
  std::mt19937_64 rng(8);
  std::normal_distribution<float> normal(0, 0.3f);
  for (size_t i = 0; i < m.keys.size(); i += 2) {  // half have an embedding
    m.embedding_keys.push_back(m.keys[i]);
    for (int d = 0; d < 4; ++d) m.embeddings.push_back(normal(rng));
  }
  ASSERT_THAT(model::WriteSparseModel(path_, m), IsOk());
  std::unique_ptr<ModelServer> server = Create();
  ASSERT_NE(server, nullptr);
  const data::SparseDataset rows = RandomRows(universe_, 200, 9);
  proto::PredictResponse reply;
  ASSERT_THAT(server->Predict(RequestOf(rows), &reply), IsOk());
  absl::StatusOr<model::SparseModel> back = model::ReadSparseModel(path_);
  ASSERT_THAT(back, IsOk());
  const std::vector<float> expected = model::Margins(*back, rows);
  const std::vector<float> margins = Values<float>(reply.margins());
  ASSERT_EQ(margins.size(), expected.size());
  for (size_t i = 0; i < margins.size(); ++i) {
    ASSERT_EQ(Bits(margins[i]), Bits(expected[i])) << "example " << i;
  }
  EXPECT_EQ(Status(*server).type(), "fm");
  EXPECT_EQ(Status(*server).embedding_rows(), m.embedding_keys.size());
}

TEST_F(ModelServerTest, BadRequestsAreRefusedWithTheReason) {
  ASSERT_THAT(model::WriteSparseModel(path_, RandomModel(universe_, 1, 1)),
              IsOk());
  ModelServer::Options options;
  options.max_examples = 4;
  options.max_request_bytes = 200;
  std::unique_ptr<ModelServer> server = Create(options);
  ASSERT_NE(server, nullptr);
  const std::string two_keys = Bytes(std::vector<uint64_t>{1, 2});
  const std::string two_values = Bytes(std::vector<float>{1, 2});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const struct {
    const char* what;
    std::string keys, values, offsets;
    const char* message;
    std::string fields = "";
  } cases[] = {
      {"keys not whole", two_keys.substr(0, 15), two_values,
       Bytes(std::vector<uint32_t>{0, 2}), "multiples of 8, 4 and 4 bytes"},
      {"values not whole", two_keys, two_values + "x",
       Bytes(std::vector<uint32_t>{0, 2}),
       "keys, values and offsets are 16, 9 and 8"},
      {"offsets not whole", two_keys, two_values, "abc",
       "must be uint64, float32 and uint32"},
      {"more keys than values", two_keys, Bytes(std::vector<float>{1}),
       Bytes(std::vector<uint32_t>{0, 2}), "2 keys but 1 values"},
      {"no offsets", two_keys, two_values, "", "offsets is empty"},
      {"fields not one uint16 a key", two_keys, two_values,
       Bytes(std::vector<uint32_t>{0, 2}),
       "fields is 3 bytes; it holds one uint16 per key (4 bytes) or nothing",
       "abc"},
      {"first offset", two_keys, two_values, Bytes(std::vector<uint32_t>{1, 2}),
       "offsets[0] is 1; it must be 0"},
      {"decreasing", two_keys, two_values,
       Bytes(std::vector<uint32_t>{0, 2, 1, 2}),
       "offsets[2] = 1 is below offsets[1] = 2"},
      {"last offset", two_keys, two_values, Bytes(std::vector<uint32_t>{0, 1}),
       "the last offset is 1 but the request holds 2 keys"},
      {"last offset past the keys", two_keys, two_values,
       Bytes(std::vector<uint32_t>{0, 3}), "the last offset is 3"},
      {"NaN", two_keys, Bytes(std::vector<float>{1, nan}),
       Bytes(std::vector<uint32_t>{0, 1, 2}), "value 1 (example 1) is nan"},
      {"infinity", two_keys, Bytes(std::vector<float>{-inf, 1}),
       Bytes(std::vector<uint32_t>{0, 1, 2}), "value 0 (example 0) is -inf"},
      {"too many examples", two_keys, two_values,
       Bytes(std::vector<uint32_t>{0, 1, 1, 1, 2, 2}),
       "holds 5 examples; at most 4 (--max_examples)"},
      {"too many bytes", Bytes(std::vector<uint64_t>(20, 1)),
       Bytes(std::vector<float>(20, 1)), Bytes(std::vector<uint32_t>{0, 20}),
       "holds 248 bytes of keys, values and offsets; at most 200 "
       "(--max_request_bytes)"},
  };
  for (const auto& c : cases) {
    proto::PredictRequest request;
    request.set_keys(c.keys);
    request.set_values(c.values);
    request.set_offsets(c.offsets);
    request.set_fields(c.fields);
    proto::PredictResponse reply;
    EXPECT_THAT(
        server->Predict(request, &reply),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.what;
  }
  const proto::ServeStatusResponse status = Status(*server);
  EXPECT_EQ(status.rejected(), sizeof(cases) / sizeof(cases[0]));
  EXPECT_EQ(status.requests(), 0u);

  // The limits themselves are fine, and so are no examples at all.
  proto::PredictRequest request;
  request.set_keys(two_keys);
  request.set_values(two_values);
  request.set_offsets(Bytes(std::vector<uint32_t>{0, 1, 1, 1, 2}));
  proto::PredictResponse reply;
  EXPECT_THAT(server->Predict(request, &reply), IsOk());
  EXPECT_EQ(reply.margins().size(), 16u);
  request.Clear();
  request.set_offsets(Bytes(std::vector<uint32_t>{0}));
  EXPECT_THAT(server->Predict(request, &reply), IsOk());
  EXPECT_TRUE(reply.margins().empty());
}

TEST_F(ModelServerTest, AMissingFileIsWaitedForThenServed) {
  std::unique_ptr<ModelServer> server = Create();
  ASSERT_NE(server, nullptr);
  const data::SparseDataset rows = RandomRows(universe_, 10, 2);
  proto::PredictResponse reply;
  EXPECT_THAT(server->Predict(RequestOf(rows), &reply),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("no snapshot loaded yet: waiting for " +
                                 path_ + " (psctl export writes it)")));
  EXPECT_THAT(server->ReloadIfChanged(), IsOk()) << "still missing: no error";
  EXPECT_FALSE(Status(*server).loaded());
  EXPECT_EQ(Status(*server).unavailable(), 1u);

  const model::SparseModel m = RandomModel(universe_, 1, 9);
  ASSERT_THAT(model::WriteSparseModel(path_, m), IsOk());
  ASSERT_THAT(server->ReloadIfChanged(), IsOk());
  ASSERT_THAT(server->Predict(RequestOf(rows), &reply), IsOk());
  EXPECT_EQ(reply.snapshot(), 1u);
  const proto::ServeStatusResponse status = Status(*server);
  EXPECT_TRUE(status.loaded());
  EXPECT_EQ(status.loads(), 1u);
  EXPECT_EQ(status.reloads(), 0u) << "nothing was replaced";
}

TEST_F(ModelServerTest, ASwapChangesTheAnswersAndTheCounters) {
  const model::SparseModel a = RandomModel(universe_, 1, 100);
  const model::SparseModel b = RandomModel(universe_, 2, 200);
  ASSERT_THAT(model::WriteSparseModel(path_, a), IsOk());
  std::unique_ptr<ModelServer> server = Create();
  ASSERT_NE(server, nullptr);
  const data::SparseDataset rows = RandomRows(universe_, 100, 5);
  const proto::PredictRequest request = RequestOf(rows);
  proto::PredictResponse reply;
  ASSERT_THAT(server->Predict(request, &reply), IsOk());
  EXPECT_EQ(reply.margins(), Bytes(model::Margins(a, rows)));
  EXPECT_THAT(server->ReloadIfChanged(), IsOk());
  EXPECT_EQ(Status(*server).loads(), 1u) << "the same file is not read again";

  // A request that started before the swap holds the old snapshot.
  const std::shared_ptr<const Snapshot> held = server->current();
  ASSERT_THAT(model::WriteSparseModel(path_, b), IsOk());
  ASSERT_THAT(server->ReloadIfChanged(), IsOk());
  ASSERT_THAT(server->Predict(request, &reply), IsOk());
  EXPECT_EQ(reply.margins(), Bytes(model::Margins(b, rows)));
  EXPECT_EQ(reply.snapshot(), 2u);
  EXPECT_EQ(reply.snapshot_updates(), 200u);
  EXPECT_EQ(held->number, 1u);
  Examples examples;
  ASSERT_THAT(DecodeExamples(request, RequestLimits(), &examples), IsOk());
  std::vector<float> held_margins;
  int64_t misses = 0;
  ASSERT_THAT(held->scorer->Score(examples, &held_margins, &misses), IsOk());
  EXPECT_EQ(Bits(held_margins[0]), Bits(model::Margins(a, rows)[0]));

  const proto::ServeStatusResponse status = Status(*server);
  EXPECT_EQ(status.snapshot(), 2u);
  EXPECT_EQ(status.loads(), 2u);
  EXPECT_EQ(status.reloads(), 1u);
  EXPECT_EQ(status.updates(), 200u);
  EXPECT_EQ(status.origin(), "test seed 2");
  EXPECT_EQ(status.requests(), 2u);
  EXPECT_EQ(status.examples(), 200u);
  EXPECT_EQ(status.reload_failures(), 0u);
}

TEST_F(ModelServerTest, ACorruptReplacementKeepsTheOldSnapshot) {
  const model::SparseModel a = RandomModel(universe_, 1, 100);
  ASSERT_THAT(model::WriteSparseModel(path_, a), IsOk());
  std::unique_ptr<ModelServer> server = Create();
  ASSERT_NE(server, nullptr);
  // A zip entry whose name is not UTF-8 (the reader quotes the name).
  std::string zip("PK\3\4\x14\0\x08\0", 8);  // flags: a streamed entry
  zip += std::string(18, '\0');              // method .. sizes
  zip += std::string("\x03\0\0\0", 4);       // name length 3, no extra
  zip += "\xff\xfe\xc3";
  ASSERT_THAT(WriteFileAtomically(path_, zip), IsOk());
  EXPECT_THAT(server->ReloadIfChanged(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(path_)));
  const data::SparseDataset rows = RandomRows(universe_, 20, 5);
  proto::PredictResponse reply;
  ASSERT_THAT(server->Predict(RequestOf(rows), &reply), IsOk());
  EXPECT_EQ(reply.margins(), Bytes(model::Margins(a, rows)));
  EXPECT_EQ(reply.snapshot(), 1u);
  proto::ServeStatusResponse status = Status(*server);
  EXPECT_EQ(status.reload_failures(), 1u);
  EXPECT_THAT(status.last_reload_error(), HasSubstr(path_));
  EXPECT_GT(status.last_reload_error_unix_s(), 0);
  for (const char c : status.last_reload_error()) {
    ASSERT_LT(static_cast<unsigned char>(c), 0x80)
        << "issue 42: a corrupt file's bytes made ServeStatus invalid UTF-8";
  }
  EXPECT_EQ(status.snapshot(), 1u);

  // The same bad file is reported once, not every interval.
  EXPECT_THAT(server->ReloadIfChanged(), IsOk());
  EXPECT_EQ(Status(*server).reload_failures(), 1u);

  // A good file after it serves.
  const model::SparseModel b = RandomModel(universe_, 2, 300);
  ASSERT_THAT(model::WriteSparseModel(path_, b), IsOk());
  ASSERT_THAT(server->ReloadIfChanged(), IsOk());
  ASSERT_THAT(server->Predict(RequestOf(rows), &reply), IsOk());
  EXPECT_EQ(reply.margins(), Bytes(model::Margins(b, rows)));
  status = Status(*server);
  EXPECT_EQ(status.snapshot(), 2u);
  EXPECT_EQ(status.reload_failures(), 1u);
  EXPECT_EQ(status.reloads(), 1u);
}

TEST_F(ModelServerTest, AnInvalidFileAtStartIsTheReadersError) {
  ASSERT_THAT(WriteFileAtomically(path_, std::string("not a zip")), IsOk());
  ModelServer::Options options;
  options.model_path = path_;
  EXPECT_THAT(ModelServer::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(path_)));
  options.model_path = "";
  EXPECT_THAT(
      ModelServer::Create(options),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--model PATH")));
}

TEST_F(ModelServerTest, SnapshotAgeIsTheFilesAge) {
  ASSERT_THAT(model::WriteSparseModel(path_, RandomModel(universe_, 1, 1)),
              IsOk());
  FakeClock clock(absl::Now());
  ModelServer::Options options;
  options.clock = &clock;
  std::unique_ptr<ModelServer> server = Create(options);
  ASSERT_NE(server, nullptr);
  clock.Advance(absl::Seconds(100));
  const proto::ServeStatusResponse status = Status(*server);
  EXPECT_GE(status.snapshot_age_s(), 99);
  EXPECT_LT(status.snapshot_age_s(), 130);
  EXPECT_NEAR(status.loaded_at_unix_s(),
              absl::ToUnixMicros(clock.Now() - absl::Seconds(100)) / 1e6, 1);
}

TEST_F(ModelServerTest, TheReloadThreadSwapsAChangedFileIn) {
  ASSERT_THAT(model::WriteSparseModel(path_, RandomModel(universe_, 1, 1)),
              IsOk());
  ModelServer::Options options;
  options.reload_interval = absl::Milliseconds(5);
  std::unique_ptr<ModelServer> server = Create(options);
  ASSERT_NE(server, nullptr);
  std::atomic<int> loads{0};
  server->StartReloading([&] { ++loads; });
  ASSERT_THAT(model::WriteSparseModel(path_, RandomModel(universe_, 2, 2)),
              IsOk());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (Status(*server).snapshot() != 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(Status(*server).snapshot(), 2u);
  EXPECT_EQ(loads.load(), 1);
  server->StopReloading();
  server->StopReloading();  // idempotent
}

// Every answer comes whole from one snapshot: a margin row of model A with
// snapshot numbers A was loaded as, B's with B's, while another thread swaps
// A and B back and forth.
TEST_F(ModelServerTest, EveryRequestIsAnsweredByOneSnapshotDuringSwaps) {
  const model::SparseModel a = RandomModel(universe_, 1, 1);
  const model::SparseModel b = RandomModel(universe_, 2, 2);
  ASSERT_THAT(model::WriteSparseModel(path_, a), IsOk());
  std::unique_ptr<ModelServer> server = Create();
  ASSERT_NE(server, nullptr);
  const data::SparseDataset rows = RandomRows(universe_, 30, 6);
  const proto::PredictRequest request = RequestOf(rows);
  const std::string margins_a = Bytes(model::Margins(a, rows));
  const std::string margins_b = Bytes(model::Margins(b, rows));
  ASSERT_NE(margins_a, margins_b);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, failed{0}, answered{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      while (!stop.load()) {
        proto::PredictResponse reply;
        if (!server->Predict(request, &reply).ok()) {
          ++failed;
          continue;
        }
        // Odd snapshots hold A, even ones B (updates says which).
        const std::string& want =
            reply.snapshot_updates() == 1 ? margins_a : margins_b;
        if (reply.margins() != want ||
            (reply.snapshot() % 2 == 1) != (reply.snapshot_updates() == 1)) {
          ++wrong;
        }
        ++answered;
      }
    });
  }
  for (int swap = 0; swap < 40; ++swap) {
    ASSERT_THAT(model::WriteSparseModel(path_, swap % 2 == 0 ? b : a), IsOk());
    ASSERT_THAT(server->ReloadIfChanged(), IsOk());
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(answered.load(), 0);
  EXPECT_EQ(Status(*server).loads(), 41u);
}

TEST_F(ModelServerTest, DenseModelsAreServedAsDenseScorerScoresThem) {
  const struct {
    Task task;
    ModelType type;
    std::vector<int> layers;
  } cases[] = {
      {Task::kMulticlass, ModelType::kMlp, {6, 10, 4}},
      {Task::kBinary, ModelType::kMlp, {6, 5, 1}},
      {Task::kRegression, ModelType::kLinear, {6, 1}},
  };
  for (const auto& c : cases) {
    const model::ExportedModel m =
        RandomDenseModel(c.task, c.type, c.layers, 3, 42);
    ASSERT_THAT(model::WriteModel(path_, m), IsOk());
    std::unique_ptr<ModelServer> server = Create();
    ASSERT_NE(server, nullptr);
    const std::vector<float> x = DenseRows(300, 6, 4);
    proto::PredictResponse reply;
    ASSERT_THAT(server->Predict(DenseRequest(x, 6), &reply), IsOk());
    const int k = c.layers.back();
    EXPECT_EQ(reply.outputs(), static_cast<uint32_t>(k));
    std::vector<float> want = DenseMargins(m, x);
    EXPECT_EQ(reply.margins(), Bytes(want));
    if (c.task == Task::kRegression) {
      EXPECT_TRUE(reply.probabilities().empty());
    } else {
      model::OutputsToPredictions(c.task, 300, k, want.data());
      EXPECT_EQ(reply.probabilities(), Bytes(want));
    }
    EXPECT_EQ(reply.snapshot_updates(), 42u);
    const proto::ServeStatusResponse status = Status(*server);
    EXPECT_EQ(status.type(), ModelTypeName(c.type));
    EXPECT_EQ(status.task(), TaskName(c.task));
    EXPECT_EQ(status.rows(), 0u);
    EXPECT_EQ(status.examples(), 300u);
    EXPECT_EQ(status.keys(), 0u);
  }
}

TEST_F(ModelServerTest, DenseRequestsOfTheWrongShapeAreRefused) {
  ASSERT_THAT(
      model::WriteModel(path_, RandomDenseModel(Task::kBinary, ModelType::kMlp,
                                                {5, 3, 1}, 1, 1)),
      IsOk());
  ModelServer::Options options;
  options.max_examples = 4;
  options.max_request_bytes = 100;
  std::unique_ptr<ModelServer> server = Create(options);
  ASSERT_NE(server, nullptr);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  proto::PredictRequest both = DenseRequest(std::vector<float>(5, 1), 5);
  both.set_offsets(Bytes(std::vector<uint32_t>{0}));
  proto::PredictRequest keys;
  keys.set_keys(Bytes(std::vector<uint64_t>{7}));
  keys.set_values(Bytes(std::vector<float>{1}));
  keys.set_offsets(Bytes(std::vector<uint32_t>{0, 1}));
  const struct {
    const char* what;
    proto::PredictRequest request;
    const char* message;
  } cases[] = {
      {"wrong width", DenseRequest(std::vector<float>(8, 1), 4),
       "the model takes 5 features per example, the request has 4"},
      {"keys for a dense model", keys,
       "a dense model: it takes dense rows of 5 features"},
      {"both forms", both, "send one form"},
      {"no features", DenseRequest(std::vector<float>(5, 1), 0),
       "features is 0"},
      {"not whole rows", DenseRequest(std::vector<float>(7, 1), 5),
       "dense is 28 bytes, not a whole number of examples of 5 float32 "
       "features"},
      {"NaN", DenseRequest({1, 2, 3, 4, 5, 1, 2, nan, 4, 5}, 5),
       "feature 2 of example 1 is nan"},
      {"too many examples", DenseRequest(std::vector<float>(5, 1), 1),
       "holds 5 examples; at most 4 (--max_examples)"},
      {"too many bytes", DenseRequest(std::vector<float>(30, 1), 10),
       "holds 120 bytes of dense rows; at most 100 (--max_request_bytes)"},
  };
  for (const auto& c : cases) {
    proto::PredictResponse reply;
    EXPECT_THAT(
        server->Predict(c.request, &reply),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.what;
  }
  EXPECT_EQ(Status(*server).rejected(), sizeof(cases) / sizeof(cases[0]));
  EXPECT_EQ(Status(*server).requests(), 0u);

  // No rows at all is an empty answer.
  proto::PredictResponse reply;
  ASSERT_THAT(server->Predict(DenseRequest({}, 5), &reply), IsOk());
  EXPECT_TRUE(reply.margins().empty());
}

TEST_F(ModelServerTest, DenseRowsForASparseModelAreRefused) {
  ASSERT_THAT(model::WriteSparseModel(path_, RandomModel(universe_, 1, 1)),
              IsOk());
  std::unique_ptr<ModelServer> server = Create();
  ASSERT_NE(server, nullptr);
  proto::PredictResponse reply;
  EXPECT_THAT(server->Predict(DenseRequest(DenseRows(2, 3, 1), 3), &reply),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a sparse model: it takes keys, values and "
                                 "offsets, got dense rows of 3 features")));
}

TEST_F(ModelServerTest, DenseSnapshotsSwapLikeSparseOnes) {
  const model::ExportedModel a =
      RandomDenseModel(Task::kMulticlass, ModelType::kMlp, {4, 8, 3}, 1, 10);
  const model::ExportedModel b =
      RandomDenseModel(Task::kMulticlass, ModelType::kMlp, {4, 8, 3}, 2, 20);
  ASSERT_THAT(model::WriteModel(path_, a), IsOk());
  std::unique_ptr<ModelServer> server = Create();
  ASSERT_NE(server, nullptr);
  const std::vector<float> x = DenseRows(50, 4, 9);
  const proto::PredictRequest request = DenseRequest(x, 4);
  proto::PredictResponse reply;
  ASSERT_THAT(server->Predict(request, &reply), IsOk());
  EXPECT_EQ(reply.margins(), Bytes(DenseMargins(a, x)));
  const std::shared_ptr<const Snapshot> held = server->current();

  ASSERT_THAT(model::WriteModel(path_, b), IsOk());
  ASSERT_THAT(server->ReloadIfChanged(), IsOk());
  ASSERT_THAT(server->Predict(request, &reply), IsOk());
  EXPECT_EQ(reply.margins(), Bytes(DenseMargins(b, x)));
  EXPECT_EQ(reply.snapshot(), 2u);
  EXPECT_EQ(reply.snapshot_updates(), 20u);
  // The request that took the old snapshot still scores with it.
  Examples examples;
  ASSERT_THAT(DecodeExamples(request, RequestLimits(), &examples), IsOk());
  std::vector<float> held_margins;
  int64_t misses = 0;
  ASSERT_THAT(held->scorer->Score(examples, &held_margins, &misses), IsOk());
  EXPECT_EQ(Bytes(held_margins), Bytes(DenseMargins(a, x)));

  // A model of another width swaps in too; the old width is then refused.
  ASSERT_THAT(
      model::WriteModel(path_, RandomDenseModel(Task::kBinary, ModelType::kMlp,
                                                {6, 2, 1}, 3, 30)),
      IsOk());
  ASSERT_THAT(server->ReloadIfChanged(), IsOk());
  EXPECT_THAT(server->Predict(request, &reply),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the model takes 6 features per example, "
                                 "the request has 4")));
  // And a sparse model after a dense one.
  const model::SparseModel sparse = RandomModel(universe_, 4, 40);
  ASSERT_THAT(model::WriteSparseModel(path_, sparse), IsOk());
  ASSERT_THAT(server->ReloadIfChanged(), IsOk());
  const data::SparseDataset rows = RandomRows(universe_, 20, 5);
  ASSERT_THAT(server->Predict(RequestOf(rows), &reply), IsOk());
  EXPECT_EQ(reply.margins(), Bytes(model::Margins(sparse, rows)));
  EXPECT_EQ(reply.outputs(), 1u);
  EXPECT_EQ(Status(*server).loads(), 4u);
}

}  // namespace
}  // namespace downpour::serve

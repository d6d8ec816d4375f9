#include "model/sparse_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/sparse_keys.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_path.h"
#include "data/feature_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/export.h"
#include "model/npz.h"

namespace downpour::model {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::downpour::testing::TempPath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string WriteText(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

Config CsvConfig() {
  Config config;
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kSparseLinear;
  config.model.sparse_buckets = 64;
  config.data.source = DataSource::kCsv;
  config.data.label_column = "label";
  config.data.delimiter = ";";
  return config;
}

// color categorical, amount bucketized at 10 and 20, notes text, id ignored.
std::vector<data::SparseColumn> CsvColumns() {
  std::vector<data::SparseColumn> columns(4);
  columns[0].name = "color";
  columns[0].kind = data::SparseColumnKind::kCategorical;
  columns[1].name = "amount";
  columns[1].kind = data::SparseColumnKind::kNumeric;
  columns[1].boundaries = {10, 20.5};
  columns[2].name = "notes";
  columns[2].kind = data::SparseColumnKind::kText;
  columns[3].name = "id";
  columns[3].kind = data::SparseColumnKind::kIgnore;
  return columns;
}

SparseModel ThreeRows(const proto::ModelMeta& meta) {
  SparseModel model;
  model.meta = meta;
  model.bias = -0.5f;
  model.keys = {3, 1000, (uint64_t{1} << 63) + 1};
  model.weights = {0.25f, -2, 1.5f};
  return model;
}

TEST(SparseModelTest, RoundTripsBiasKeysWeightsAndTheCsvColumns) {
  const Config config = CsvConfig();
  SparseModel model =
      ThreeRows(MakeSparseMeta(config, {"no", "yes"}, CsvColumns()));
  const std::string path = TempPath("sparse.npz");
  ASSERT_THAT(WriteSparseModel(path, model), IsOk());

  absl::StatusOr<SparseModel> back = ReadSparseModel(path);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->bias, -0.5f);
  EXPECT_EQ(back->keys, model.keys);
  EXPECT_EQ(back->weights, model.weights);
  const proto::ModelMeta& meta = back->meta;
  EXPECT_EQ(meta.type(), "sparse_linear");
  EXPECT_EQ(meta.task(), "binary");
  EXPECT_EQ(meta.output(), "sigmoid");
  EXPECT_EQ(meta.sparse_buckets(), 64u);
  EXPECT_THAT(meta.class_names(), ElementsAre("no", "yes"));
  EXPECT_THAT(meta.tensors(), ElementsAre("bias", "keys", "weights"));
  EXPECT_EQ(meta.data().source(), "csv");
  EXPECT_EQ(meta.data().label_column(), "label");
  EXPECT_EQ(meta.data().delimiter(), ";");
  ASSERT_EQ(meta.data().columns_size(), 4);
  EXPECT_EQ(meta.data().columns(1).name(), "amount");
  EXPECT_EQ(meta.data().columns(1).kind(), "numeric");
  EXPECT_THAT(meta.data().columns(1).boundaries(), ElementsAre(10, 20.5));
  EXPECT_EQ(meta.data().columns(2).kind(), "text");
  EXPECT_EQ(meta.data().columns(3).kind(), "ignore");

  // The arrays as NumPy sees them.
  absl::StatusOr<std::vector<NpyArray>> arrays = ReadNpz(path);
  ASSERT_THAT(arrays, IsOk());
  ASSERT_EQ(arrays->size(), 4u);
  EXPECT_EQ((*arrays)[1].name, "keys");
  EXPECT_TRUE((*arrays)[1].is_uint64);
  EXPECT_THAT((*arrays)[2].shape, ElementsAre(3));

  EXPECT_EQ(back->Weight(1000), -2);
  EXPECT_EQ(back->Weight((uint64_t{1} << 63) + 1), 1.5f);
  EXPECT_EQ(back->Weight(4), 0) << "a key absent from the model weighs 0";
  EXPECT_EQ(back->Weight(~uint64_t{0}), 0);
}

TEST(SparseModelTest, WriteRefusesRowsThatBreakTheLayout) {
  const proto::ModelMeta meta = MakeSparseMeta(CsvConfig(), {}, {});
  struct Case {
    const char* what;
    std::vector<uint64_t> keys;
    std::vector<float> weights;
    const char* message;
  };
  const Case cases[] = {
      {"unsorted", {5, 3}, {1, 1}, "key 3 (index 1) follows 5"},
      {"repeated", {5, 5}, {1, 1}, "strictly ascending"},
      {"zero", {5, 6}, {1, 0}, "key 6 has weight 0"},
      {"nan", {5}, {NAN}, "key 5 has weight nan"},
      {"sizes", {5, 6}, {1}, "2 keys but 1 weights"},
  };
  for (const Case& c : cases) {
    SparseModel model;
    model.meta = meta;
    model.keys = c.keys;
    model.weights = c.weights;
    EXPECT_THAT(
        WriteSparseModel(TempPath("bad.npz"), model),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.what;
  }
  SparseModel dense;
  dense.meta.set_type("linear");
  EXPECT_THAT(WriteSparseModel(TempPath("bad.npz"), dense),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not linear (WriteModel")));
}

TEST(SparseModelTest, FmRoundTripsAndScoresMissingEmbeddingsByTheInitializer) {
  Config config = CsvConfig();
  config.model.type = ModelType::kFm;
  config.model.fm.dim = 2;
  config.model.fm.init_scale = 0.1;
  SparseModel model = ThreeRows(MakeSparseMeta(config, {"no", "yes"}, {}));
  EXPECT_EQ(model.meta.type(), "fm");
  EXPECT_EQ(model.meta.fm_dim(), 2);
  model.embedding_keys = {3, 7};
  model.embeddings = {0.5f, -1.0f, 2.0f, 0.25f};
  const std::string path = TempPath("fm.npz");
  ASSERT_THAT(WriteSparseModel(path, model), IsOk());
  absl::StatusOr<SparseModel> back = ReadSparseModel(path);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->embedding_keys, model.embedding_keys);
  EXPECT_EQ(back->embeddings, model.embeddings);
  EXPECT_EQ(back->meta.fm_init_seed(), model.meta.fm_init_seed());

  // Keys 3 (weight 0.25, embedding [0.5, -1]), 7 (no weight, [2, 0.25]) and
  // 1000 (weight -2, no embedding: the initializer's values).
  const uint64_t keys[] = {3, 7, 1000};
  const float x[] = {1.0f, 2.0f, 0.5f};
  const uint64_t seed = back->meta.fm_init_seed();
  const double v1000[] = {SparseInitialValue(seed, 0.1, 1000, 0),
                          SparseInitialValue(seed, 0.1, 1000, 1)};
  ASSERT_NE(v1000[0], 0.0);
  const double v[3][2] = {{0.5, -1.0}, {2.0, 0.25}, {v1000[0], v1000[1]}};
  double want = -0.5 + 0.25 * 1.0 + (-2.0) * 0.5;
  for (int i = 0; i < 3; ++i) {
    for (int j = i + 1; j < 3; ++j) {
      want += (v[i][0] * v[j][0] + v[i][1] * v[j][1]) * x[i] * x[j];
    }
  }
  const SparseScorer scorer(*back);
  int64_t misses = 0;
  EXPECT_NEAR(scorer.Margin(keys, x, 3, &misses), want, 1e-6);
  EXPECT_EQ(misses, 1) << "key 1000 has no embedding";

  // An embedding array of the wrong width is refused.
  SparseModel wrong = model;
  wrong.embeddings.pop_back();
  EXPECT_THAT(WriteSparseModel(TempPath("bad.npz"), wrong),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("embedding values of dim 2")));
}

// wide_deep: the MLP's tensors (ModelSpec's layout of meta.layers) round
// trip, the scorer adds the MLP of the per-field pooled embeddings to the
// weights' sum, and an MLP that does not fit the meta is refused.
TEST(SparseModelTest, WideDeepRoundTripsItsMlpAndScoresPerField) {
  Config config = CsvConfig();
  config.model.type = ModelType::kWideDeep;
  config.model.wide_deep.dim = 2;
  config.model.wide_deep.hidden = {};
  config.model.wide_deep.pooling = Pooling::kSum;
  config.model.wide_deep.fields = 3;  // color, amount, notes (id ignored)
  SparseModel model =
      ThreeRows(MakeSparseMeta(config, {"no", "yes"}, CsvColumns()));
  model.bias = 0;
  EXPECT_EQ(model.meta.type(), "wide_deep");
  EXPECT_THAT(model.meta.layers(), ElementsAre(6, 1));
  model.embedding_keys = {3, 7};
  model.embeddings = {0.5f, -1.0f, 2.0f, 0.25f};
  // fc1.weight [6, 1], then fc1.bias [1].
  model.mlp = {1, 2, 3, 4, 5, 6, 0.125f};
  const std::string path = TempPath("wide_deep.npz");
  ASSERT_THAT(WriteSparseModel(path, model), IsOk());
  absl::StatusOr<SparseModel> back = ReadSparseModel(path);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->mlp, model.mlp);
  // Key 3 (weight 0.25, embedding [0.5, -1]) in field 0 and key 7 (no
  // weight, [2, 0.25]) in field 2, values 1 and 2: pools [0.5, -1], [0, 0],
  // [4, 0.5]; the MLP gives 0.5*1 - 1*2 + 4*5 + 0.5*6 + 0.125.
  const uint64_t keys[] = {3, 7};
  const float x[] = {1.0f, 2.0f};
  const uint16_t fields[] = {0, 2};
  const SparseScorer scorer(*back);
  EXPECT_EQ(scorer.fields(), 3);
  EXPECT_FLOAT_EQ(scorer.Margin(keys, x, 2, nullptr, fields),
                  0.25f + (0.5f - 2.0f + 20.0f + 3.0f + 0.125f));

  SparseModel short_mlp = model;
  short_mlp.mlp.pop_back();
  EXPECT_THAT(WriteSparseModel(TempPath("bad.npz"), short_mlp),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the MLP of meta.layers needs 7 parameters, "
                                 "got 6")));
  SparseModel wide_inputs = model;
  wide_inputs.meta.set_layers(0, 8);
  wide_inputs.mlp.resize(9);
  EXPECT_THAT(WriteSparseModel(TempPath("bad.npz"), wide_inputs),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the MLP takes 8 inputs, but the data's 3 "
                                 "fields of fm_dim 2 make 6")));
  SparseModel two_outputs = model;
  two_outputs.meta.set_layers(1, 2);
  EXPECT_THAT(WriteSparseModel(TempPath("bad.npz"), two_outputs),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a wide_deep model's meta.layers")));
  SparseModel pooling = model;
  pooling.meta.set_pooling("max");
  EXPECT_THAT(WriteSparseModel(TempPath("bad.npz"), pooling),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("meta.pooling is 'max'")));
}

TEST(SparseModelTest, DenseAndSparseReadersRefuseEachOthersFiles) {
  const std::string sparse_path = TempPath("s.npz");
  ASSERT_THAT(WriteSparseModel(sparse_path,
                               ThreeRows(MakeSparseMeta(CsvConfig(), {}, {}))),
              IsOk());
  EXPECT_THAT(ReadModel(sparse_path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds a sparse_linear model")));
  absl::StatusOr<std::vector<NpyArray>> arrays = ReadNpz(sparse_path);
  ASSERT_THAT(arrays, IsOk());
  absl::StatusOr<proto::ModelMeta> meta = MetaFromArrays(sparse_path, *arrays);
  ASSERT_THAT(meta, IsOk());
  EXPECT_TRUE(IsSparseMeta(*meta));
  EXPECT_THAT(SparseModelFromArrays(sparse_path, *std::move(arrays)), IsOk());

  Config config;
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kLinear;
  config.model.layers = {2, 1};
  config.data.source = DataSource::kCsv;
  ExportedModel dense;
  dense.meta = MakeMeta(config, {"a", "b"}, {"x", "y"}, {0, 0}, {1, 1});
  dense.params = {1, 2, 3};
  const std::string dense_path = TempPath("d.npz");
  ASSERT_THAT(WriteModel(dense_path, dense), IsOk());
  EXPECT_THAT(ReadSparseModel(dense_path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds a linear model, not a sparse one")));
  EXPECT_FALSE(IsSparseMeta(dense.meta));

  // A sparse meta without its keys.
  NpzWriter npz;
  npz.AddFloat32("bias", {1}, {0});
  npz.AddFloat32("weights", {0}, {});
  npz.AddString("meta", MetaText(MakeSparseMeta(CsvConfig(), {}, {})));
  const std::string no_keys = TempPath("nokeys.npz");
  ASSERT_THAT(npz.WriteTo(no_keys), IsOk());
  EXPECT_THAT(ReadSparseModel(no_keys),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("needs 'keys', a uint64 ('<u8') vector")));
}

TEST(SparseModelTest, ReadsACsvIntoTheKeysTrainingUsed) {
  const proto::ModelMeta meta =
      MakeSparseMeta(CsvConfig(), {"no", "yes"}, CsvColumns());
  const std::string labelled = WriteText("l.csv",
                                         "id;color;amount;notes;label\n"
                                         "1;red;5;Big deal;yes\n"
                                         "2;blue;20.5;;no\n");
  absl::StatusOr<data::SparseDataset> rows =
      ReadSparseExamples(meta, labelled, true);
  ASSERT_THAT(rows, IsOk());
  ASSERT_EQ(rows->rows(), 2);
  EXPECT_THAT(rows->y, ElementsAre(1, 0));
  std::vector<uint64_t> first(rows->keys.begin() + rows->offsets[0],
                              rows->keys.begin() + rows->offsets[1]);
  std::vector<uint64_t> want = {
      data::FeatureKey("color", "red"), data::FeatureKey("amount", "b0"),
      data::FeatureKey("notes", "big"), data::FeatureKey("notes", "deal")};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(first, want);
  std::vector<uint64_t> second(rows->keys.begin() + rows->offsets[1],
                               rows->keys.end());
  want = {data::FeatureKey("color", "blue"), data::FeatureKey("amount", "b2")};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(second, want) << "20.5 is at the second boundary: bucket 2";

  const std::string unlabelled =
      WriteText("u.csv", "id;color;amount;notes\n3;red;11;x\n");
  EXPECT_THAT(ReadSparseExamples(meta, unlabelled, true),
              StatusIs(absl::StatusCode::kInvalidArgument));
  rows = ReadSparseExamples(meta, unlabelled, false);
  ASSERT_THAT(rows, IsOk());
  EXPECT_EQ(rows->rows(), 1);
  EXPECT_TRUE(std::isnan(rows->y[0]));
  EXPECT_EQ(rows->entries(), 3);

  proto::ModelMeta broken = meta;
  broken.mutable_data()->mutable_columns(0)->set_kind("color");
  EXPECT_THAT(ReadSparseExamples(broken, labelled, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the model's column color: unknown column "
                                 "kind 'color'")));
  broken = meta;
  broken.mutable_data()->set_source("mnist");
  EXPECT_THAT(ReadSparseExamples(broken, labelled, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("reads libsvm, criteo or csv files")));
}

TEST(SparseModelTest, MarginsOfLibsvmRowsWeighAbsentKeysZero) {
  Config config = CsvConfig();
  config.data.source = DataSource::kLibsvm;
  SparseModel model = ThreeRows(MakeSparseMeta(config, {"-1", "+1"}, {}));
  const std::string path =
      WriteText("t.svm", absl::StrCat("+1 3:2 9223372036854775809:1 77:5\n"
                                      "-1 1000:0.5\n"
                                      "-1\n"));
  absl::StatusOr<data::SparseDataset> rows =
      ReadSparseExamples(model.meta, path, true);
  ASSERT_THAT(rows, IsOk());
  EXPECT_THAT(rows->y, ElementsAre(1, 0, 0));
  EXPECT_THAT(Margins(model, *rows),
              ElementsAre(-0.5f + 0.25f * 2 + 1.5f, -0.5f - 2 * 0.5f, -0.5f));

  config.model.task = Task::kRegression;
  model.meta = MakeSparseMeta(config, {}, {});
  EXPECT_EQ(model.meta.output(), "identity");
  rows = ReadSparseExamples(model.meta, path, true);
  ASSERT_THAT(rows, IsOk());
  EXPECT_THAT(rows->y, ElementsAre(1, -1, -1)) << "regression reads values";
}

}  // namespace
}  // namespace downpour::model

#include "model/export.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_path.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/npz.h"

namespace downpour::model {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::downpour::testing::TempPath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ExportTest, RoundTripsTensorsAndMeta) {
  Config config;
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kMlp;
  config.model.layers = {3, 2, 1};
  config.data.source = DataSource::kCsv;
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec, IsOk());
  ExportedModel model;
  model.meta =
      MakeMeta(config, {"no", "sí"}, {"a", "b", "c"}, {1, 2, 3}, {0.5f, 1, 2});
  model.params = spec->InitAll(7);
  const std::string path = TempPath("model.npz");
  ASSERT_THAT(WriteModel(path, model), IsOk());

  absl::StatusOr<ExportedModel> back = ReadModel(path);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->params, model.params);
  EXPECT_EQ(back->meta.task(), "binary");
  EXPECT_EQ(back->meta.output(), "sigmoid");
  EXPECT_THAT(back->meta.layers(), ElementsAre(3, 2, 1));
  EXPECT_THAT(back->meta.tensors(),
              ElementsAre("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"));
  EXPECT_THAT(back->meta.class_names(), ElementsAre("no", "sí"));
  EXPECT_THAT(back->meta.input_std(), ElementsAre(0.5f, 1, 2));

  absl::StatusOr<std::vector<NpyArray>> arrays = ReadNpz(path);
  ASSERT_THAT(arrays, IsOk());
  ASSERT_EQ(arrays->size(), 7u);
  EXPECT_EQ((*arrays)[0].name, "fc1.weight");
  EXPECT_THAT((*arrays)[0].shape, ElementsAre(3, 2));
  EXPECT_EQ((*arrays)[6].name, "meta");
  EXPECT_THAT((*arrays)[6].text, HasSubstr("\\u00ed"));  // "sí", escaped
}

TEST(ExportTest, SpecOfTheMeta) {
  Config config;
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kMlp;
  config.model.layers = {3, 2, 1};
  proto::ModelMeta meta =
      MakeMeta(config, {"no", "yes"}, {"a", "b", "c"}, {1, 2, 3}, {0.5f, 1, 2});
  absl::StatusOr<ModelSpec> spec = SpecOf(meta);
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->num_params(), 3 * 2 + 2 + 2 * 1 + 1);
  meta.set_task("astrology");
  EXPECT_THAT(SpecOf(meta), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ExportTest, RefusesWhatIsNotAModel) {
  const std::string path = TempPath("junk.npz");
  std::ofstream(path) << "PK this is not a zip";
  EXPECT_THAT(ReadModel(path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(path)));
  EXPECT_THAT(ReadModel(TempPath("missing.npz")),
              StatusIs(absl::StatusCode::kNotFound));
  NpzWriter npz;
  npz.AddFloat32("fc1.weight", {2, 2}, {1, 2, 3, 4});
  ASSERT_THAT(npz.WriteTo(path), IsOk());
  EXPECT_THAT(ReadModel(path), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("holds no 'meta'")));
}

}  // namespace
}  // namespace downpour::model

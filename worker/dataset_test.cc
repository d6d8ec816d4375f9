#include "worker/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "zlib.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fresh folder under TEST_TMPDIR for each test.
std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(root != nullptr ? root : "/tmp", "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  std::fwrite(contents.data(), 1, contents.size(), file);
  std::fclose(file);
}

// Pixel p of image i of `digit` in the fixtures, a value in [0, 1).
float FixturePixel(int digit, int i, int p) {
  return static_cast<float>((digit * 31 + i * 7 + p) % 256) / 256.0f;
}

// dir/0.json .. dir/9.json with `per_digit` images each, in the npm layout.
void WriteMnistJson(const std::string& dir, int per_digit) {
  for (int digit = 0; digit < 10; ++digit) {
    std::string text = "{ \"data\": [";
    for (int i = 0; i < per_digit; ++i) {
      for (int p = 0; p < kMnistDim; ++p) {
        if (i + p > 0) text += ",";
        absl::StrAppend(&text,
                        absl::StrFormat("%.9g", FixturePixel(digit, i, p)));
      }
    }
    text += "]}";
    WriteFile(absl::StrCat(dir, "/", digit, ".json"), text);
  }
}

std::string BigEndian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
          static_cast<char>(v >> 8), static_cast<char>(v)};
}

void WriteIdxImages(const std::string& path, const std::vector<int>& pixels,
                    int count, int rows, int cols) {
  std::string text = BigEndian32(0x803) + BigEndian32(count) +
                     BigEndian32(rows) + BigEndian32(cols);
  for (int p : pixels) text += static_cast<char>(p);
  WriteFile(path, text);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), bytes.size()),
            static_cast<int>(bytes.size()));
  gzclose(file);
}

void WriteIdxLabels(const std::string& path, const std::vector<int>& labels) {
  std::string text = BigEndian32(0x801) + BigEndian32(labels.size());
  for (int y : labels) text += static_cast<char>(y);
  WriteFile(path, text);
}

TEST(LoadMnistJsonTest, ReadsEveryDigitFile) {
  const std::string dir = TempDir("mnist_ok");
  WriteMnistJson(dir, 3);
  absl::StatusOr<Dataset> data = LoadMnistJson(dir);
  ASSERT_THAT(data, IsOk());
  EXPECT_EQ(data->dim, 784);
  EXPECT_EQ(data->classes, 10);
  ASSERT_EQ(data->size(), 30);
  ASSERT_EQ(data->x.size(), 30u * 784);
  for (int e = 0; e < 30; ++e) {
    const int digit = e / 3, i = e % 3;
    EXPECT_EQ(data->y[e], digit);
    for (int p = 0; p < kMnistDim; p += 97) {
      EXPECT_EQ(data->x[e * 784 + p], FixturePixel(digit, i, p));
    }
  }
}

TEST(LoadMnistJsonTest, AcceptsWhitespaceExponentsAndEmptyFiles) {
  const std::string dir = TempDir("mnist_forms");
  WriteMnistJson(dir, 1);
  std::string text = "{\n  \"data\" : [\n";
  for (int p = 0; p < kMnistDim; ++p) {
    absl::StrAppend(&text, p == 0 ? "" : " ,\n", p == 5 ? "2.5e-1" : "0");
  }
  WriteFile(dir + "/4.json", text + "\n]\n}\n");
  WriteFile(dir + "/7.json", "{\"data\":[]}");
  absl::StatusOr<Dataset> data = LoadMnistJson(dir);
  ASSERT_THAT(data, IsOk());
  ASSERT_EQ(data->size(), 9);
  EXPECT_EQ(data->y[4], 4);
  EXPECT_EQ(data->x[4 * 784 + 5], 0.25f);
  EXPECT_EQ(data->y[7], 8);  // no 7s
}

TEST(LoadMnistJsonTest, MissingFileIsNotFoundAndSaysHowToFetch) {
  const std::string dir = TempDir("mnist_missing");
  WriteMnistJson(dir, 1);
  std::remove((dir + "/3.json").c_str());
  EXPECT_THAT(LoadMnistJson(dir),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr(dir + "/3.json"),
                             HasSubstr("./deploy/fetch_mnist.sh"),
                             HasSubstr("data.path"))));
}

TEST(LoadMnistJsonTest, LengthNotAMultipleOf784IsInvalid) {
  const std::string dir = TempDir("mnist_length");
  WriteMnistJson(dir, 1);
  WriteFile(dir + "/2.json", "{ \"data\": [0.5, 0.25, 1]}");
  EXPECT_THAT(LoadMnistJson(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(dir + "/2.json"), HasSubstr("3 floats"),
                             HasSubstr("784"))));
}

TEST(LoadMnistJsonTest, MalformedFilesAreInvalid) {
  const std::string dir = TempDir("mnist_malformed");
  WriteMnistJson(dir, 1);
  for (const std::string text :
       {"", "[0, 1]", "{ \"pixels\": [0] }", "{ \"data\": [0, 1 }",
        "{ \"data\": [0, , 1] }", "{ \"data\": [0, x] }",
        "{ \"data\": [0] } trailing", "{ \"data\": [0, 1e99] }"}) {
    WriteFile(dir + "/0.json", text);
    EXPECT_THAT(LoadMnistJson(dir), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr(dir + "/0.json")))
        << text;
  }
}

TEST(LoadIdxTest, ReadsTrainThenTestAndScalesPixels) {
  const std::string dir = TempDir("idx_ok");
  WriteIdxImages(dir + "/train-images-idx3-ubyte",
                 {0, 255, 51, 102, 1, 2, 3, 4}, 2, 2, 2);
  WriteIdxLabels(dir + "/train-labels-idx1-ubyte", {3, 1});
  WriteIdxImages(dir + "/t10k-images-idx3-ubyte", {255, 0, 0, 0}, 1, 2, 2);
  WriteIdxLabels(dir + "/t10k-labels-idx1-ubyte", {7});
  absl::StatusOr<Dataset> data = LoadIdx(dir);
  ASSERT_THAT(data, IsOk());
  EXPECT_EQ(data->dim, 4);
  EXPECT_EQ(data->classes, 8);
  EXPECT_THAT(data->y, ElementsAre(3, 1, 7));
  EXPECT_THAT(data->x,
              ElementsAre(0.0f, 1.0f, 0.2f, 0.4f, 1 / 255.0f, 2 / 255.0f,
                          3 / 255.0f, 4 / 255.0f, 1.0f, 0.0f, 0.0f, 0.0f));
}

TEST(LoadIdxTest, TestFilesAreOptional) {
  const std::string dir = TempDir("idx_train_only");
  WriteIdxImages(dir + "/train-images-idx3-ubyte", {1, 2}, 2, 1, 1);
  WriteIdxLabels(dir + "/train-labels-idx1-ubyte", {0, 1});
  absl::StatusOr<Dataset> data = LoadIdx(dir);
  ASSERT_THAT(data, IsOk());
  EXPECT_EQ(data->size(), 2);
  // But one without the other is an error.
  WriteIdxLabels(dir + "/t10k-labels-idx1-ubyte", {0});
  EXPECT_THAT(LoadIdx(dir), StatusIs(absl::StatusCode::kNotFound,
                                     HasSubstr("t10k-images-idx3-ubyte")));
}

TEST(LoadIdxTest, MissingFileIsNotFoundAndMentionsGzip) {
  const std::string dir = TempDir("idx_missing");
  EXPECT_THAT(LoadIdx(dir),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr(dir + "/train-images-idx3-ubyte"),
                             HasSubstr("gzipped or not"))));
}

// Debian's dataset-fashion-mnist ships *-ubyte.gz: read by content.
TEST(LoadIdxTest, ReadsGzippedFilesAndRefusesCorruptOnes) {
  const std::string dir = TempDir("idx_gz");
  WriteIdxImages(dir + "/plain", {0, 255, 51, 102}, 1, 2, 2);
  WriteGzip(dir + "/train-images-idx3-ubyte.gz", ReadAll(dir + "/plain"));
  WriteIdxLabels(dir + "/train-labels-idx1-ubyte", {3});
  absl::StatusOr<Dataset> data = LoadIdx(dir);
  ASSERT_THAT(data, IsOk());
  EXPECT_THAT(data->y, ElementsAre(3));
  EXPECT_THAT(data->x, ElementsAre(0.0f, 1.0f, 0.2f, 0.4f));
  WriteFile(dir + "/train-images-idx3-ubyte.gz", "\x1f\x8b\x08junk");
  EXPECT_THAT(LoadIdx(dir), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("train-images-idx3-ubyte.gz")));
}

TEST(LoadIdxTest, BadFilesAreInvalid) {
  const std::string dir = TempDir("idx_bad");
  const std::string images = dir + "/train-images-idx3-ubyte";
  const std::string labels = dir + "/train-labels-idx1-ubyte";
  WriteIdxLabels(labels, {0, 1});

  WriteFile(images, BigEndian32(0x801) + std::string(12, '\0'));
  EXPECT_THAT(LoadIdx(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(images), HasSubstr("0x00000803"))));
  // Gzip is read by content, whatever the name; a corrupt stream says so.
  WriteFile(images, "\x1f\x8b\x08\x00 compressed");
  EXPECT_THAT(LoadIdx(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(images)));
  WriteIdxImages(images, {1, 2, 3}, 2, 2, 1);  // one pixel short
  EXPECT_THAT(LoadIdx(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(images), HasSubstr("truncated"))));
  WriteIdxImages(images, {1, 2, 3}, 3, 1, 1);  // three images, two labels
  EXPECT_THAT(LoadIdx(dir), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("3 images")));
}

TEST(MakeSyntheticTest, IsDeterministicAndBalanced) {
  const Dataset a = MakeSynthetic(30, 5, 3, 9);
  const Dataset b = MakeSynthetic(30, 5, 3, 9);
  const Dataset c = MakeSynthetic(30, 5, 3, 10);
  EXPECT_EQ(a.x, b.x);
  EXPECT_NE(a.x, c.x);
  EXPECT_EQ(a.dim, 5);
  EXPECT_EQ(a.classes, 3);
  ASSERT_EQ(a.size(), 30);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(a.y[i], i % 3);
}

TEST(SeededPermutationTest, IsTheSameEverywhere) {
  // Fixed by the mt19937_64 standard and our own draws; a change here would
  // change every split, so it must be deliberate.
  EXPECT_THAT(SeededPermutation(10, 42),
              ElementsAre(1, 7, 9, 0, 3, 8, 4, 2, 5, 6));
  std::vector<int> sorted = SeededPermutation(1000, 7);
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_TRUE(SeededPermutation(0, 1).empty());
}

DataSection MnistSection(const std::string& dir, int train, int test) {
  DataSection section;
  section.source = DataSource::kMnist;
  section.path = dir;
  section.train_examples = train;
  section.test_examples = test;
  section.normalize = false;
  return section;
}

TEST(LoadDataTest, SplitIsDeterministicFromTheSeed) {
  const std::string dir = TempDir("split");
  WriteMnistJson(dir, 4);
  const DataSection section = MnistSection(dir, 25, 10);
  absl::StatusOr<DataSplit> a = LoadData(section, 42);
  absl::StatusOr<DataSplit> b = LoadData(section, 42);
  absl::StatusOr<DataSplit> c = LoadData(section, 43);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(a->train.size(), 25);
  EXPECT_EQ(a->test.size(), 10);
  EXPECT_EQ(a->train.x.size(), 25u * 784);
  EXPECT_EQ(a->train.x, b->train.x);
  EXPECT_EQ(a->test.y, b->test.y);
  EXPECT_NE(a->train.x, c->train.x);

  // The split is SeededPermutation applied to the file order.
  absl::StatusOr<Dataset> all = LoadMnistJson(dir);
  ASSERT_THAT(all, IsOk());
  const std::vector<int> order = SeededPermutation(40, 42);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(a->test.y[i], all->y[order[25 + i]]);
    EXPECT_EQ(a->test.x[i * 784 + 100], all->x[order[25 + i] * 784 + 100]);
  }
}

TEST(LoadDataTest, NotEnoughExamplesIsInvalid) {
  const std::string dir = TempDir("too_few");
  WriteMnistJson(dir, 1);
  EXPECT_THAT(
      LoadData(MnistSection(dir, 8, 3), 1),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(absl::StrCat("data.train_examples + data.test_examples"
                                      " = 11 but ",
                                      dir, " holds 10 examples"))));
  EXPECT_THAT(LoadData(MnistSection(dir, 0, 3), 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LoadData(MnistSection(dir, 8, 2), 1), IsOk());
}

TEST(LoadDataTest, PassesReaderErrorsThrough) {
  DataSection section = MnistSection(TempDir("empty"), 1, 0);
  EXPECT_THAT(LoadData(section, 1), StatusIs(absl::StatusCode::kNotFound));
  section.source = static_cast<DataSource>(99);  // none of the sources
  EXPECT_THAT(LoadData(section, 1), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("data.source")));
  section.source = DataSource::kIdx;
  EXPECT_THAT(LoadData(section, 1, Task::kRegression),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.task must be multiclass")));
}

TEST(LoadDataTest, NormalizeUsesTrainStatistics) {
  DataSection section;
  section.source = DataSource::kSynthetic;
  section.train_examples = 200;
  section.test_examples = 50;
  section.normalize = true;
  absl::StatusOr<DataSplit> split = LoadData(section, 5);
  ASSERT_THAT(split, IsOk());
  EXPECT_EQ(split->train.dim, kMnistDim);
  EXPECT_EQ(split->train.classes, kMnistClasses);
  double sum = 0, sum_sq = 0;
  for (float v : split->train.x) {
    sum += v;
    sum_sq += v * v;
  }
  const double n = split->train.x.size();
  EXPECT_NEAR(sum / n, 0.0, 1e-4);
  EXPECT_NEAR(sum_sq / n, 1.0, 1e-3);
  // The test split used the same transform, so its statistics are only close.
  double test_sum = 0;
  for (float v : split->test.x) test_sum += v;
  EXPECT_NEAR(test_sum / split->test.x.size(), 0.0, 0.1);
}

// A CSV of n rows: x0 = i, x1 = 2 i + 1, label "yes" for odd i else "no".
std::string TableCsv(int n) {
  std::string text = "x0,x1,label\n";
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&text, i, ",", 2 * i + 1, ",", i % 2 ? "yes" : "no", "\n");
  }
  return text;
}

// The standard split of MNIST-shaped files: train-* for training, t10k-* for
// test (Fashion-MNIST as Debian ships it).
TEST(LoadDataTest, IdxWithTestPathKeepsTheT10kFilesForTest) {
  const std::string dir = TempDir("idx_split");
  WriteIdxImages(dir + "/train-images-idx3-ubyte", {1, 2, 3, 4, 5, 6}, 3, 2, 1);
  WriteIdxLabels(dir + "/train-labels-idx1-ubyte", {0, 1, 2});
  WriteIdxImages(dir + "/t10k-images-idx3-ubyte", {7, 8}, 1, 2, 1);
  WriteIdxLabels(dir + "/t10k-labels-idx1-ubyte", {4});
  DataSection data;
  data.source = DataSource::kIdx;
  data.path = dir;
  data.test_path = dir;
  data.normalize = false;
  absl::StatusOr<DataSplit> split = LoadData(data, 3);
  ASSERT_THAT(split, IsOk());
  EXPECT_EQ(split->train.size(), 3);
  ASSERT_EQ(split->test.size(), 1);
  EXPECT_EQ(split->test.y[0], 4);
  EXPECT_THAT(split->test.x, ElementsAre(7 / 255.0f, 8 / 255.0f));
  EXPECT_EQ(split->train.classes, 5);
}

TEST(LoadTableTest, CsvSplitsByFractionAndStandardizesPerFeature) {
  const std::string dir = TempDir("csv_split");
  WriteFile(dir + "/d.csv", TableCsv(50));
  DataSection data;
  data.source = DataSource::kCsv;
  data.path = dir + "/d.csv";
  data.train_examples = 0;  // all (what the config loader sets for csv)
  data.test_examples = -1;  // test_fraction
  data.test_fraction = 0.2;
  absl::StatusOr<DataSplit> split = LoadData(data, 42, Task::kBinary);
  ASSERT_THAT(split, IsOk());
  EXPECT_EQ(split->train.size(), 40);
  EXPECT_EQ(split->test.size(), 10);
  EXPECT_EQ(split->train.dim, 2);
  EXPECT_EQ(split->train.classes, 2);
  EXPECT_THAT(split->train.class_names, ElementsAre("no", "yes"));
  EXPECT_THAT(split->train.feature_names, ElementsAre("x0", "x1"));
  ASSERT_EQ(split->mean.size(), 2u);
  // Per feature: x1 = 2 x0 + 1, so its mean and std follow x0's.
  EXPECT_NEAR(split->mean[1], 2 * split->mean[0] + 1, 1e-3);
  EXPECT_NEAR(split->std[1], 2 * split->std[0], 1e-3);
  double sum0 = 0;
  for (int i = 0; i < split->train.size(); ++i) sum0 += split->train.x[2 * i];
  EXPECT_NEAR(sum0, 0.0, 1e-3);
  // The label follows the row: "yes" (class 1) for odd x0.
  for (int i = 0; i < split->test.size(); ++i) {
    const double x0 = split->test.x[2 * i] * split->std[0] + split->mean[0];
    EXPECT_EQ(split->test.y[i], static_cast<int>(std::lround(x0)) % 2) << i;
  }
}

TEST(LoadTableTest, TestPathUsesTheTrainClassesAndColumns) {
  const std::string dir = TempDir("csv_test_path");
  WriteFile(dir + "/train.csv", TableCsv(20));
  WriteFile(dir + "/test.csv", "x0,x1,label\n3,7,yes\n4,9,no\n");
  DataSection data;
  data.source = DataSource::kCsv;
  data.path = dir + "/train.csv";
  data.test_path = dir + "/test.csv";
  data.train_examples = 0;
  data.test_examples = -1;
  data.normalize = false;
  absl::StatusOr<DataSplit> split = LoadData(data, 1, Task::kMulticlass);
  ASSERT_THAT(split, IsOk());
  EXPECT_EQ(split->train.size(), 20);
  EXPECT_THAT(split->test.y, ElementsAre(1, 0));
  EXPECT_THAT(split->test.x, ElementsAre(3, 7, 4, 9));
  WriteFile(dir + "/test.csv", "x0,x1,label\n3,7,maybe\n");
  EXPECT_THAT(LoadData(data, 1, Task::kMulticlass),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("maybe")));
}

TEST(LoadTableTest, BinaryNeedsTwoClassesAndModelMustFit) {
  const std::string dir = TempDir("csv_fit");
  WriteFile(dir + "/three.csv", "a,b\n1,x\n2,y\n3,z\n4,x\n5,y\n");
  DataSection data;
  data.source = DataSource::kCsv;
  data.path = dir + "/three.csv";
  data.train_examples = 0;
  data.test_examples = -1;
  EXPECT_THAT(LoadData(data, 1, Task::kBinary),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("exactly 2 label values, found 3")));
  absl::StatusOr<DataSplit> split = LoadData(data, 1, Task::kMulticlass);
  ASSERT_THAT(split, IsOk());
  ModelSection model;
  model.type = ModelType::kLinear;
  model.layers = {1, 2};
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(model);
  ASSERT_THAT(spec, IsOk());
  EXPECT_THAT(CheckDataFitsModel(*split, *spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("3 classes (x, y, z) but the model has 2")));
  model.layers = {2, 3};
  spec = ModelSpec::Create(model);
  EXPECT_THAT(CheckDataFitsModel(*split, *spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("set model.layers to [1, ...]")));
}

TEST(PartitionTest, TakesEveryNumPartsExample) {
  const Dataset data = MakeSynthetic(10, 2, 5, 1);
  const Dataset part = Partition(data, 1, 3);  // examples 1, 4, 7
  EXPECT_EQ(part.dim, 2);
  EXPECT_EQ(part.classes, 5);
  EXPECT_THAT(part.y, ElementsAre(1, 4, 2));
  EXPECT_THAT(part.x, ElementsAre(data.x[2], data.x[3], data.x[8], data.x[9],
                                  data.x[14], data.x[15]));
  int total = 0;
  for (int p = 0; p < 3; ++p) total += Partition(data, p, 3).size();
  EXPECT_EQ(total, 10);
  EXPECT_EQ(Partition(data, 0, 1).x, data.x);
}

}  // namespace
}  // namespace downpour::worker

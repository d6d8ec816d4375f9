#include "worker/sparse_stream.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/testing/status_matchers.h"
#include "data/feature_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// A Criteo line for example `i`: C1 names it ("%08x" of i), the label is
// i % 4 == 0, I1 is i % 50, the other fields are empty but C2.
std::string Line(int i) {
  std::string line = absl::StrCat(i % 4 == 0 ? 1 : 0, "\t", i % 50);
  for (int f = 2; f <= 13; ++f) line += "\t";
  absl::StrAppendFormat(&line, "\t%08x\t%s", i, i % 2 ? "a" : "b");
  for (int f = 3; f <= 26; ++f) line += "\t";
  return line + "\n";
}

// Writes rows [from, to) of Line and returns the path.
std::string WriteCriteo(const std::string& name, int from, int to,
                        const std::string& bad_line_at = "") {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary);
  for (int i = from; i < to; ++i) {
    if (!bad_line_at.empty() && i == to / 2) out << bad_line_at;
    out << Line(i);
  }
  return path;
}

class SparseStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_.source = DataSource::kCriteo;
    data_.path = WriteCriteo("train.txt", 0, kRows);
    data_.paths = {data_.path};
    data_.test_path = WriteCriteo("test.txt", kRows, kRows + 300);
    data_.eval_rows = 100;
    absl::StatusOr<StreamSource> source =
        OpenStreamSource(data_, Task::kBinary);
    ASSERT_TRUE(source.ok()) << source.status();
    source_ = *std::move(source);
    for (int i = 0; i < kRows + 300; ++i) {
      ids_[data::FeatureKey("C1", absl::StrFormat("%08x", i))] = i;
    }
  }

  StreamOptions Options(int parts, int epochs, size_t window) {
    StreamOptions o;
    o.files = source_.train_files;
    o.plan = data::PlanParts(o.files, parts);
    o.parse = source_.parse;
    o.epochs = epochs;
    o.shuffle_window = window;
    o.seed = 3;
    o.buffer_bytes = 4096;  // many chunks
    return o;
  }

  // The example ids of a batch, from their C1 keys.
  std::vector<int> Ids(const data::SparseDataset& batch) {
    std::vector<int> ids;
    for (int64_t r = 0; r < batch.rows(); ++r) {
      for (int64_t e = batch.offsets[r]; e < batch.offsets[r + 1]; ++e) {
        auto it = ids_.find(batch.keys[e]);
        if (it != ids_.end()) ids.push_back(it->second);
      }
    }
    return ids;
  }

  // Draws batches of 32 until the stream ends: the ids by epoch.
  std::map<int, std::vector<int>> Drain(StreamingBatches* batches) {
    std::map<int, std::vector<int>> by_epoch;
    data::SparseDataset batch;
    std::vector<int32_t> epochs;
    while (true) {
      absl::StatusOr<bool> next = batches->Next(32, &batch, &epochs);
      EXPECT_TRUE(next.ok()) << next.status();
      if (!next.ok() || !*next) break;
      const std::vector<int> ids = Ids(batch);
      EXPECT_EQ(ids.size(), epochs.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        by_epoch[epochs[i]].push_back(ids[i]);
      }
    }
    return by_epoch;
  }

  static constexpr int kRows = 5000;
  DataSection data_;
  StreamSource source_;
  std::map<uint64_t, int> ids_;
};

TEST_F(SparseStreamTest, PartsTogetherReadEveryRowOnceAnEpoch) {
  std::vector<int> counts(kRows, 0);
  for (int part = 0; part < 3; ++part) {
    StreamingBatches batches(Options(3, 2, 500));
    ASSERT_TRUE(batches.SetParts({{part}}).ok());
    std::map<int, std::vector<int>> by_epoch = Drain(&batches);
    ASSERT_EQ(by_epoch.size(), 2u);
    EXPECT_EQ(by_epoch[0].size(), by_epoch[1].size());
    for (int id : by_epoch[0]) ++counts[id];
    EXPECT_EQ(batches.bytes_read(), batches.bytes_total());
    const std::vector<PartProgress> done = batches.Positions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].epoch, 2);  // both epochs read
  }
  for (int i = 0; i < kRows; ++i) ASSERT_EQ(counts[i], 1) << "row " << i;
}

TEST_F(SparseStreamTest, WindowShufflesAndZeroKeepsFileOrder) {
  StreamingBatches ordered(Options(1, 1, 0));
  ASSERT_TRUE(ordered.SetParts({{0}}).ok());
  std::vector<int> in_order = Drain(&ordered)[0];
  ASSERT_EQ(in_order.size(), static_cast<size_t>(kRows));
  for (int i = 0; i < kRows; ++i) ASSERT_EQ(in_order[i], i);
  StreamingBatches shuffled(Options(1, 1, 1000));
  ASSERT_TRUE(shuffled.SetParts({{0}}).ok());
  std::vector<int> mixed = Drain(&shuffled)[0];
  EXPECT_NE(mixed, in_order);
  std::sort(mixed.begin(), mixed.end());
  EXPECT_EQ(mixed, in_order);
}

TEST_F(SparseStreamTest, ResumedPartReadsOnFromItsPosition) {
  StreamingBatches first(Options(2, 1, 0));
  ASSERT_TRUE(first.SetParts({{1}}).ok());
  data::SparseDataset batch;
  std::vector<int32_t> epochs;
  std::vector<int> trained;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(*first.Next(32, &batch, &epochs));
    for (int id : Ids(batch)) trained.push_back(id);
  }
  const std::vector<PartProgress> saved = first.Positions();
  ASSERT_EQ(saved.size(), 1u);
  ASSERT_GT(saved[0].examples, 0);
  first.Stop();
  StreamingBatches second(Options(2, 1, 0));
  ASSERT_TRUE(second.SetParts(saved).ok());
  const std::vector<int> rest = Drain(&second)[0];
  // Part 1 is the upper half of the rows; the first reader had read
  // `examples` of them (the trained ones, the queue's and the window's).
  ASSERT_FALSE(rest.empty());
  const int start = trained.front();
  EXPECT_EQ(rest.front(), start + saved[0].examples);
  EXPECT_EQ(rest.back(), kRows - 1);
  for (size_t i = 1; i < rest.size(); ++i) ASSERT_EQ(rest[i], rest[i - 1] + 1);
}

TEST_F(SparseStreamTest, AdoptedPartIsReadFromItsPositionAlongside) {
  StreamingBatches batches(Options(2, 1, 0));
  ASSERT_TRUE(batches.SetParts({{0}}).ok());
  // Part 1's reader (a worker that died) had read 1000 rows or more: go on
  // from there, so every row but those is read once.
  StreamingBatches other(Options(2, 1, 0));
  ASSERT_TRUE(other.SetParts({{1}}).ok());
  data::SparseDataset batch;
  std::vector<int32_t> epochs;
  while (other.Positions()[0].examples < 1000) {
    ASSERT_TRUE(*other.Next(32, &batch, &epochs));
  }
  const PartProgress adopted = other.Positions()[0];
  other.Stop();
  ASSERT_TRUE(batches.SetParts({{0}, adopted}).ok());
  EXPECT_THAT(batches.parts(), ::testing::ElementsAre(0, 1));
  const std::vector<int> ids = Drain(&batches)[0];
  std::vector<int> counts(kRows, 0);
  for (int id : ids) ++counts[id];
  int read = 0;
  for (int c : counts) {
    EXPECT_LE(c, 1);
    read += c;
  }
  EXPECT_EQ(read, kRows - adopted.examples);
}

TEST_F(SparseStreamTest, APositionTheFilesDoNotHaveChangesNothing) {
  StreamingBatches batches(Options(2, 1, 0));
  ASSERT_TRUE(batches.SetParts({{0}}).ok());
  PartProgress moved;
  moved.part = 1;
  moved.position.segment = 0;
  moved.position.offset = 5;  // not a line start (the input changed)
  EXPECT_THAT(batches.SetParts({moved}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("data part 1 cannot go on from its saved "
                                 "position (epoch 0, segment 0, byte 5)")));
  EXPECT_THAT(batches.parts(), ::testing::ElementsAre(0));
  // Part 0 still reads every row of its own.
  EXPECT_GT(Drain(&batches)[0].size(), 2000u);
}

TEST_F(SparseStreamTest, BadLineStopsWithItsFileLineAndNothingAfter) {
  data_.path = WriteCriteo("bad.txt", 0, 4000, "1\tx\n");
  data_.paths = {data_.path};
  absl::StatusOr<StreamSource> source = OpenStreamSource(data_, Task::kBinary);
  ASSERT_TRUE(source.ok());
  source_ = *std::move(source);
  StreamingBatches batches(Options(3, 1, 0));
  ASSERT_TRUE(batches.SetParts({{1}}).ok());
  data::SparseDataset batch;
  std::vector<int32_t> epochs;
  absl::StatusOr<bool> next = true;
  int rows = 0;
  while (next.ok() && *next) {
    next = batches.Next(32, &batch, &epochs);
    if (next.ok() && *next) rows += static_cast<int>(batch.rows());
  }
  // Line 2001 of the file (the bad one is written before row 2000).
  EXPECT_THAT(next.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat(data_.path, ":2001:"))));
  EXPECT_LT(rows, 2000);
}

TEST_F(SparseStreamTest, TestSetKeepsTheSampleAndStreamsEveryRow) {
  EXPECT_EQ(source_.test->sample().rows(), 100);
  int64_t rows = 0;
  ASSERT_TRUE(source_.test
                  ->ForEachChunk([&](const data::SparseDataset& chunk) {
                    rows += chunk.rows();
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(rows, 300);
}

TEST_F(SparseStreamTest, MissingFilesAreNamedByTheirKey) {
  DataSection data = data_;
  data.test_path = TempPath("no-such-test.txt");
  EXPECT_THAT(OpenStreamSource(data, Task::kBinary).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("data.test_path: cannot read '")));
  data = data_;
  data.paths = {TempPath("day_*.txt")};
  data.path = data.paths[0];
  EXPECT_THAT(OpenStreamSource(data, Task::kBinary).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("data.path: no file matches")));
}

TEST(SparseStreamConfigTest, LibsvmNeedsItsClassesListed) {
  DataSection data;
  data.source = DataSource::kLibsvm;
  EXPECT_THAT(MakeLineParser(data, Task::kBinary, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("set data.classes")));
  data.classes = {"-1", "+1"};
  EXPECT_TRUE(MakeLineParser(data, Task::kBinary, {}).ok());
  data.source = DataSource::kCriteo;
  EXPECT_THAT(MakeLineParser(data, Task::kRegression, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.task: binary")));
}

}  // namespace
}  // namespace downpour::worker

#include "server/checkpoint.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

// A fresh folder per test under Bazel's TEST_TMPDIR.
std::string TestDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  fs::path dir =
      fs::path(root != nullptr ? root : fs::temp_directory_path().string()) /
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
}

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Checkpoint Sample() {
  Checkpoint c;
  c.shard_index = 3;
  c.placement_epoch = 0x0123456789ABCDEFull;
  c.optimizer = "adam";
  c.sequences = {{0, SequenceWindow(5, 0b1011)},
                 {7, SequenceWindow(std::numeric_limits<uint64_t>::max(), 0)}};
  // Only a bit-exact round trip keeps -0, a denormal and a NaN payload.
  c.blocks.push_back({2,
                      41,
                      {1.5f, -0.0f, FromBits(0x00000001), FromBits(0x7FC01234)},
                      {0.25f, 0, 0, 0, 1e-30f, 0, 0, 3}});
  // Larger than the writer's 1 MiB buffer, so it takes the direct-write path.
  BlockStore::BlockSnapshot big{9, 7, std::vector<float>(300000), {}};
  for (size_t i = 0; i < big.values.size(); ++i)
    big.values[i] = 0.001f * i - 17.0f;
  big.state.assign(2 * big.values.size(), 0.5f);
  c.blocks.push_back(std::move(big));
  return c;
}

void ExpectEqual(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.shard_index, b.shard_index);
  EXPECT_EQ(a.placement_epoch, b.placement_epoch);
  EXPECT_EQ(a.optimizer, b.optimizer);
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (const auto& [worker, window] : a.sequences) {
    ASSERT_TRUE(b.sequences.count(worker)) << worker;
    EXPECT_EQ(window.base(), b.sequences.at(worker).base());
    EXPECT_EQ(window.mask(), b.sequences.at(worker).mask());
  }
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    EXPECT_EQ(a.blocks[i].id, b.blocks[i].id);
    EXPECT_EQ(a.blocks[i].version, b.blocks[i].version);
    EXPECT_TRUE(SameBits(a.blocks[i].values, b.blocks[i].values))
        << "block " << i;
    EXPECT_TRUE(SameBits(a.blocks[i].state, b.blocks[i].state))
        << "block " << i;
  }
}

// Writes a small checkpoint and returns its path.
std::string WriteSmall(const std::string& dir) {
  Checkpoint c;
  c.shard_index = 1;
  c.optimizer = "sgd";
  c.sequences = {{2, SequenceWindow(9, 0)}};
  c.blocks.push_back({0, 3, {1, 2, 3}, {}});
  std::string path = CheckpointPath(dir, 1);
  EXPECT_THAT(WriteCheckpoint(path, c), IsOk());
  return path;
}

TEST(CheckpointTest, RoundTripIsBitExact) {
  const std::string path = CheckpointPath(TestDir(), 3);
  const Checkpoint written = Sample();
  ASSERT_THAT(WriteCheckpoint(path, written), IsOk());
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_THAT(read, IsOk());
  ExpectEqual(*read, written);
}

TEST(CheckpointTest, EmptyCheckpointRoundTrips) {
  const std::string path = CheckpointPath(TestDir(), 0);
  ASSERT_THAT(WriteCheckpoint(path, Checkpoint{}), IsOk());
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_THAT(read, IsOk());
  ExpectEqual(*read, Checkpoint{});
}

TEST(CheckpointTest, StoreSnapshotRestoresThroughAFile) {
  OptimizerSection section;
  section.type = "momentum";
  BlockStore store(Optimizer::Create(section).value());
  ASSERT_THAT(store.AddBlock(4, {1, 2, 3}), IsOk());
  const std::vector<float> g = {0.5f, -1, 2};
  ASSERT_THAT(store.Push(4, g.data(), 12, 0), IsOk());
  Checkpoint c;
  c.blocks = store.Snapshot();
  c.optimizer = store.optimizer().name();
  const std::string path = CheckpointPath(TestDir(), 0);
  ASSERT_THAT(WriteCheckpoint(path, c), IsOk());

  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->optimizer, "momentum");
  BlockStore restored(Optimizer::Create(section).value());
  for (BlockStore::BlockSnapshot& b : read->blocks) {
    ASSERT_THAT(restored.AddBlock(b.id, b.values, b.version, b.state), IsOk());
  }
  uint64_t v1 = 0, v2 = 0;
  EXPECT_EQ(store.BlockCrc32c(4, &v1), restored.BlockCrc32c(4, &v2));
  EXPECT_EQ(v2, 1u);
}

TEST(CheckpointTest, MissingFileIsNotFound) {
  const std::string path = CheckpointPath(TestDir(), 5);
  EXPECT_THAT(ReadCheckpoint(path),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(path)));
}

TEST(CheckpointTest, TruncatedFileIsDataLoss) {
  const std::string path = CheckpointPath(TestDir(), 3);
  ASSERT_THAT(WriteCheckpoint(path, Sample()), IsOk());
  const std::string whole = ReadBytes(path);
  for (size_t length : {size_t{0}, size_t{5}, size_t{23}, size_t{100},
                        whole.size() / 2, whole.size() - 1}) {
    WriteBytes(path, whole.substr(0, length));
    EXPECT_THAT(
        ReadCheckpoint(path),
        StatusIs(absl::StatusCode::kDataLoss,
                 AllOf(HasSubstr("'" + path + "' is corrupt (truncated"),
                       HasSubstr("move it away to start from fresh "
                                 "parameters, or restore a good copy"))))
        << "length " << length;
  }
}

TEST(CheckpointTest, FlippedByteIsDataLossWithBothChecksums) {
  const std::string path = CheckpointPath(TestDir(), 3);
  ASSERT_THAT(WriteCheckpoint(path, Sample()), IsOk());
  std::string bytes = ReadBytes(path);
  bytes[bytes.size() / 2] ^= 0x04;
  WriteBytes(path, bytes);
  EXPECT_THAT(
      ReadCheckpoint(path),
      StatusIs(
          absl::StatusCode::kDataLoss,
          ::testing::MatchesRegex(
              "checkpoint '.*' is corrupt \\(checksum mismatch: stored "
              "0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\\); move it away .*")));
}

TEST(CheckpointTest, EveryFlippedByteIsDetected) {
  const std::string path = WriteSmall(TestDir());
  const std::string good = ReadBytes(path);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    WriteBytes(path, bad);
    absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
    // Bytes 8-11 hold the format version, which is checked before the checksum.
    const absl::StatusCode expected =
        (i >= 8 && i < 12) ? absl::StatusCode::kFailedPrecondition
                           : absl::StatusCode::kDataLoss;
    EXPECT_THAT(read, StatusIs(expected)) << "byte " << i;
  }
}

TEST(CheckpointTest, BadMagicIsDataLoss) {
  const std::string path = CheckpointPath(TestDir(), 0);
  WriteBytes(path, "model.weights: not what you think it is\n");
  EXPECT_THAT(
      ReadCheckpoint(path),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr("'" + path + "' is not a Downpour checkpoint")));
}

TEST(CheckpointTest, TrailingBytesAreDataLoss) {
  const std::string path = WriteSmall(TestDir());
  WriteBytes(path, ReadBytes(path) + "extra");
  EXPECT_THAT(ReadCheckpoint(path), StatusIs(absl::StatusCode::kDataLoss,
                                             HasSubstr("but its header says")));
}

TEST(CheckpointTest, FutureFormatIsFailedPrecondition) {
  const std::string path = WriteSmall(TestDir());
  std::string bytes = ReadBytes(path);
  bytes[8] = 7;  // the little-endian format version at offset 8
  WriteBytes(path, bytes);
  EXPECT_THAT(
      ReadCheckpoint(path),
      StatusIs(
          absl::StatusCode::kFailedPrecondition,
          HasSubstr("was written by format 7, this build reads formats 1-2")));
}

TEST(CheckpointTest, Format1IsReadWithoutItsSequences) {
  // A format 1 file with no sequences is a format 2 file with another
  // version number (entries differ only when there are sequences).
  Checkpoint c = Sample();
  c.sequences.clear();
  const std::string path = CheckpointPath(TestDir(), 0);
  ASSERT_TRUE(WriteCheckpoint(path, c).ok());
  std::string bytes = ReadBytes(path);
  bytes[8] = 1;
  const uint32_t crc = Crc32c(bytes.data(), bytes.size() - 4);
  std::memcpy(&bytes[bytes.size() - 4], &crc, 4);
  WriteBytes(path, bytes);
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->blocks.size(), c.blocks.size());
  EXPECT_TRUE(read->sequences.empty());
}

TEST(CheckpointTest, OverwriteKeepsTheNewContentAndLeavesNoTempFiles) {
  const std::string dir = TestDir();
  const std::string path = CheckpointPath(dir, 3);
  Checkpoint first = Sample();
  ASSERT_THAT(WriteCheckpoint(path, first), IsOk());
  Checkpoint second = Sample();
  second.placement_epoch = 2;
  second.blocks[0].version = 42;
  second.blocks[0].values[0] = -8.0f;
  second.sequences[1] = SequenceWindow(77, 0);
  ASSERT_THAT(WriteCheckpoint(path, second), IsOk());

  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_THAT(read, IsOk());
  ExpectEqual(*read, second);
  std::set<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::set<std::string>{"ps-3.ckpt"});
}

TEST(CheckpointTest, CreatesMissingParentDirectories) {
  const std::string path = CheckpointPath(TestDir() + "/run/checkpoints", 2);
  ASSERT_THAT(WriteCheckpoint(path, Sample()), IsOk());
  EXPECT_THAT(ReadCheckpoint(path), IsOk());
}

TEST(CheckpointTest, WriteErrorNamesThePathAndTheErrnoText) {
  const std::string dir = TestDir();
  WriteBytes(dir + "/file", "a file where a directory should be");
  const std::string path = CheckpointPath(dir + "/file/sub", 0);
  absl::Status status = WriteCheckpoint(path, Sample());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(
      std::string(status.message()),
      AllOf(HasSubstr(dir + "/file/sub"), HasSubstr("Not a directory")));
  std::set<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::set<std::string>{"file"});
}

TEST(CheckpointTest, CheckpointPathNamesTheShard) {
  EXPECT_EQ(CheckpointPath("run/checkpoints", 3), "run/checkpoints/ps-3.ckpt");
  EXPECT_EQ(CheckpointPath("/var/lib/downpour/", 0),
            "/var/lib/downpour/ps-0.ckpt");
}

}  // namespace
}  // namespace downpour::server

#include "server/checkpoint.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
  c.model_fingerprint = 0xFEEDFACECAFEBEEFull;
  c.generation = 12;
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
  // A sparse table of dim 2 with FTRL's two state slots: 3 rows.
  SparseTable::Rows rows;
  rows.dim = 2;
  rows.state_slots = 2;
  rows.optimizer = SparseOptimizerType::kFtrl;
  rows.keys = {1, 1ull << 40, std::numeric_limits<uint64_t>::max()};
  rows.versions = {1, 7, 4000000000u};
  for (int i = 0; i < 3 * 2 * 3; ++i) rows.data.push_back(0.5f * i - 3.0f);
  rows.data[4] = FromBits(0x7FC01234);
  // Format 5: the table's clocks and figures, and tombstones.
  rows.clocks = {5, 9, 1ull << 50};
  rows.clock = 1ull << 51;
  rows.evicted_versions = 123456789012ull;
  rows.evicted_keys = {3, 8};
  c.sparse_tables.emplace_back(0, std::move(rows));
  c.kind = CheckpointKind::kDelta;
  c.base_generation = 10;
  c.parent_generation = 11;
  return c;
}

void ExpectEqual(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.shard_index, b.shard_index);
  EXPECT_EQ(a.placement_epoch, b.placement_epoch);
  EXPECT_EQ(a.model_fingerprint, b.model_fingerprint);
  EXPECT_EQ(a.generation, b.generation);
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
  ASSERT_EQ(a.sparse_tables.size(), b.sparse_tables.size());
  for (size_t i = 0; i < a.sparse_tables.size(); ++i) {
    const SparseTable::Rows& x = a.sparse_tables[i].second;
    const SparseTable::Rows& y = b.sparse_tables[i].second;
    EXPECT_EQ(a.sparse_tables[i].first, b.sparse_tables[i].first);
    EXPECT_EQ(x.dim, y.dim);
    EXPECT_EQ(x.state_slots, y.state_slots);
    EXPECT_EQ(x.optimizer, y.optimizer);
    EXPECT_EQ(x.keys, y.keys);
    EXPECT_EQ(x.versions, y.versions);
    EXPECT_TRUE(SameBits(x.data, y.data)) << "sparse table " << i;
    EXPECT_EQ(x.clocks, y.clocks);
    EXPECT_EQ(x.clock, y.clock);
    EXPECT_EQ(x.evicted_versions, y.evicted_versions);
    EXPECT_EQ(x.evicted_keys, y.evicted_keys);
  }
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.base_generation, b.base_generation);
  EXPECT_EQ(a.parent_generation, b.parent_generation);
}

// What a file of `format` holds of `c`: formats before 5 lack the kind, the
// chain and the tables' clocks, figures and tombstones.
Checkpoint AsFormat(Checkpoint c, uint32_t format) {
  if (format < 5) {
    c.kind = CheckpointKind::kFull;
    c.base_generation = c.parent_generation = 0;
    for (auto& [id, rows] : c.sparse_tables) {
      rows.clocks.clear();
      rows.clock = rows.evicted_versions = 0;
      rows.evicted_keys.clear();
    }
  }
  return c;
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
  section.type = OptimizerType::kMomentum;
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
    // Bytes 8-11 hold the format version, which is checked before the
    // checksum: a version this build does not read is FailedPrecondition.
    const uint32_t flipped = kCheckpointFormat ^ 1;  // byte 8, bit 0
    const bool known_format =
        i == 8 && flipped >= 1 && flipped <= kCheckpointFormat;
    const absl::StatusCode expected =
        (i >= 8 && i < 12 && !known_format)
            ? absl::StatusCode::kFailedPrecondition
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
          HasSubstr("was written by format 7, this build reads formats 1-5")));
}

TEST(CheckpointTest, Format1IsReadWithoutItsSequences) {
  const Checkpoint c = Sample();
  const std::string path = CheckpointPath(TestDir(), 0);
  ASSERT_THAT(WriteCheckpointInFormatForTest(path, c, 1), IsOk());
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->format, 1u);
  EXPECT_EQ(read->blocks.size(), c.blocks.size());
  EXPECT_TRUE(read->sequences.empty());
  EXPECT_EQ(read->model_fingerprint, 0u);
}

TEST(CheckpointTest, Format2IsReadWithoutFingerprintOrGeneration) {
  Checkpoint c = Sample();
  const std::string path = CheckpointPath(TestDir(), 0);
  ASSERT_THAT(WriteCheckpointInFormatForTest(path, c, 2), IsOk());
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->format, 2u);
  c.model_fingerprint = 0;  // not in format 2
  c.generation = 0;
  c.sparse_tables.clear();  // nor sparse tables (format 4)
  ExpectEqual(*read, AsFormat(c, 2));
}

TEST(CheckpointTest, Format3IsReadWithoutSparseTables) {
  Checkpoint c = Sample();
  const std::string path = CheckpointPath(TestDir(), 0);
  ASSERT_THAT(WriteCheckpointInFormatForTest(path, c, 3), IsOk());
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->format, 3u);
  c.sparse_tables.clear();
  ExpectEqual(*read, AsFormat(c, 3));
}

TEST(CheckpointTest, Format4IsReadWithoutClocksOrChain) {
  const Checkpoint c = Sample();
  const std::string path = CheckpointPath(TestDir(), 0);
  ASSERT_THAT(WriteCheckpointInFormatForTest(path, c, 4), IsOk());
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->format, 4u);
  ExpectEqual(*read, AsFormat(c, 4));
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

// --- Generations (ShardCheckpoints) -----------------------------------------

constexpr uint64_t kModel = 0x1234567890abcdefull;

ShardCheckpoints Files(const std::string& dir, int shard = 0,
                       uint64_t model = kModel, int keep = 3) {
  return ShardCheckpoints({dir, shard, model, keep});
}

// A small checkpoint whose block 0 has version `version`.
Checkpoint AtVersion(uint64_t epoch, uint64_t version) {
  Checkpoint c;
  c.placement_epoch = epoch;
  c.optimizer = "sgd";
  c.blocks.push_back({0, version, {1, 2, 3}, {}});
  return c;
}

std::vector<std::string> Names(const std::string& folder) {
  std::set<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    names.insert(entry.path().filename().string());
  }
  return {names.begin(), names.end()};
}

void FlipByte(const std::string& path, size_t at) {
  std::string bytes = ReadBytes(path);
  bytes[at] ^= 0x10;
  WriteBytes(path, bytes);
}

TEST(ShardCheckpointsTest, EachWriteIsANewGenerationAndOnlyTheNewestKStay) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Files(dir, 2, kModel, /*keep=*/3);
  for (uint64_t v = 1; v <= 5; ++v) {
    absl::StatusOr<ShardCheckpoints::Written> written =
        files.Write(AtVersion(7, v));
    ASSERT_THAT(written, IsOk());
    EXPECT_EQ(written->path,
              absl::StrCat(dir, "/ps-2/", GenerationFileName(7, v)));
    EXPECT_EQ(written->removed.size(), v > 3 ? 1u : 0u);
  }
  EXPECT_EQ(Names(dir + "/ps-2"),
            (std::vector<std::string>{"e000000000007-g000000000003.ckpt",
                                      "e000000000007-g000000000004.ckpt",
                                      "e000000000007-g000000000005.ckpt"}));
  absl::StatusOr<ShardCheckpoints::Loaded> loaded = files.ReadNewest();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->checkpoint.blocks[0].version, 5u);
  EXPECT_EQ(loaded->checkpoint.shard_index, 2);
  EXPECT_EQ(loaded->checkpoint.model_fingerprint, kModel);
  EXPECT_EQ(loaded->checkpoint.generation, 5u);
  EXPECT_TRUE(loaded->skipped.empty());
}

TEST(ShardCheckpointsTest, CorruptNewestFallsBackToTheNextNewestGoodOne) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Files(dir);
  std::vector<std::string> paths;
  for (uint64_t v = 1; v <= 3; ++v) {
    paths.push_back(files.Write(AtVersion(4, 10 * v)).value().path);
  }
  FlipByte(paths[2], 60);                                   // checksum mismatch
  WriteBytes(paths[1], ReadBytes(paths[1]).substr(0, 30));  // truncated
  absl::StatusOr<ShardCheckpoints::Loaded> loaded = files.ReadNewest();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->path, paths[0]);
  EXPECT_EQ(loaded->checkpoint.blocks[0].version, 10u);
  ASSERT_EQ(loaded->skipped.size(), 2u);
  EXPECT_THAT(loaded->skipped[0],
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(paths[2]), HasSubstr("checksum"))));
  EXPECT_THAT(loaded->skipped[1],
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(paths[1]), HasSubstr("truncated"))));
}

TEST(ShardCheckpointsTest, NoGoodGenerationIsDataLossNamingTheNewest) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Files(dir);
  std::vector<std::string> paths;
  for (uint64_t v = 1; v <= 2; ++v) {
    paths.push_back(files.Write(AtVersion(1, v)).value().path);
  }
  for (const std::string& path : paths) FlipByte(path, 50);
  EXPECT_THAT(files.ReadNewest(),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("'" + paths[1] + "' is corrupt"),
                             HasSubstr("restore a good copy"),
                             HasSubstr("the 1 older generations in " + dir +
                                       "/ps-0 are bad too"))));
}

TEST(ShardCheckpointsTest, NothingWrittenIsNotFound) {
  EXPECT_THAT(Files(TestDir()).ReadNewest(),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(ShardCheckpointsTest, AnotherShardsFileIsRefusedNotLoaded) {
  const std::string dir = TestDir();
  const std::string theirs =
      Files(dir, 1).Write(AtVersion(3, 1409)).value().path;
  // Shard 0 has an older file of its own; shard 1's newer one is put in its
  // folder (copied by hand, or a wrong volume mounted).
  ASSERT_THAT(Files(dir, 0).Write(AtVersion(2, 5)), IsOk());
  const std::string misplaced = dir + "/ps-0/" + GenerationFileName(3, 9);
  fs::copy_file(theirs, misplaced);
  EXPECT_THAT(Files(dir, 0).ReadNewest(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("'" + misplaced +
                                       "' holds shard 1, but this "
                                       "is ps 0"),
                             HasSubstr("move it back to " + dir + "/ps-1/"))));
}

TEST(ShardCheckpointsTest, AnotherModelsFileIsRefused) {
  const std::string dir = TestDir();
  ASSERT_THAT(Files(dir, 0, /*model=*/0xaaaa).Write(AtVersion(1, 1)), IsOk());
  EXPECT_THAT(
      Files(dir, 0, /*model=*/0xbbbb).ReadNewest(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("fingerprint 000000000000aaaa"),
                     HasSubstr("model has fingerprint 000000000000bbbb"),
                     HasSubstr("restore the model section"))));
  // Fingerprint 0: a reader that accepts any model.
  EXPECT_THAT(Files(dir, 0, /*model=*/0).ReadNewest(), IsOk());
}

TEST(ShardCheckpointsTest, WriterOfAnOlderEpochIsRefusedAndTouchesNothing) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Files(dir, 1, kModel, /*keep=*/1);
  ASSERT_THAT(files.Write(AtVersion(4, 100)), IsOk());
  // The new owner, at epoch 5.
  ASSERT_THAT(files.Write(AtVersion(5, 120)), IsOk());
  const std::vector<std::string> before = Names(dir + "/ps-1");
  // The replaced daemon wakes up, still at epoch 4.
  EXPECT_THAT(files.Write(AtVersion(4, 110)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("shard 1 was taken over at placement epoch 5 "
                                 "by another daemon")));
  EXPECT_THAT(files.Write(AtVersion(4, 110)).status().message(),
              HasSubstr("this ps (epoch 4) must not write"));
  EXPECT_EQ(Names(dir + "/ps-1"), before);
  // The same epoch and newer ones may write.
  EXPECT_THAT(files.Write(AtVersion(5, 130)), IsOk());
  EXPECT_THAT(files.Write(AtVersion(6, 140)), IsOk());
}

TEST(ShardCheckpointsTest, ReadersPreferTheHighestEpoch) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Files(dir, 0, kModel, /*keep=*/5);
  ASSERT_THAT(files.Write(AtVersion(3, 30)), IsOk());
  // A file of an older epoch with a higher generation number (say, written
  // late by a replaced daemon before the guard saw the new owner's file).
  const std::string late = dir + "/ps-0/" + GenerationFileName(2, 50);
  ASSERT_THAT(WriteCheckpoint(late,
                              [] {
                                Checkpoint c = AtVersion(2, 20);
                                c.model_fingerprint = kModel;
                                return c;
                              }()),
              IsOk());
  absl::StatusOr<ShardCheckpoints::Loaded> loaded = files.ReadNewest();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->checkpoint.placement_epoch, 3u);
  EXPECT_EQ(loaded->checkpoint.blocks[0].version, 30u);
  // The next generation number is past every one in the folder.
  EXPECT_EQ(files.Write(AtVersion(3, 31)).value().path,
            dir + "/ps-0/" + GenerationFileName(3, 51));
}

TEST(ShardCheckpointsTest, FailedCheckBeforeRenameLeavesNoFile) {
  const std::string dir = TestDir();
  const std::string path = dir + "/ps-0/" + GenerationFileName(1, 1);
  EXPECT_THAT(
      WriteCheckpoint(path, AtVersion(1, 1),
                      [] { return absl::FailedPreconditionError("no"); }),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(Names(dir + "/ps-0").empty());
}

TEST(ShardCheckpointsTest, StaleTemporariesOfThisShardAreRemoved) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Files(dir, 0);
  ASSERT_THAT(files.Write(AtVersion(1, 1)), IsOk());
  const std::string folder = dir + "/ps-0/";
  WriteBytes(folder + GenerationFileName(1, 2) + ".tmp.4242", "half");
  WriteBytes(dir + "/ps-0.ckpt.tmp.77", "half of a legacy file");
  WriteBytes(dir + "/ps-1.ckpt.tmp.78", "shard 1's: not ours");
  WriteBytes(folder + "README", "an operator's note");
  absl::StatusOr<std::vector<std::string>> removed =
      files.RemoveStaleTemporaries();
  ASSERT_THAT(removed, IsOk());
  EXPECT_EQ(
      std::set<std::string>(removed->begin(), removed->end()),
      (std::set<std::string>{folder + GenerationFileName(1, 2) + ".tmp.4242",
                             dir + "/ps-0.ckpt.tmp.77"}));
  EXPECT_EQ(Names(folder),
            (std::vector<std::string>{"README", GenerationFileName(1, 1)}));
  EXPECT_EQ(Names(dir), (std::vector<std::string>{"ps-0", "ps-1.ckpt.tmp.78"}));
}

TEST(ShardCheckpointsTest, LegacyFileIsReadUntilAGenerationExists) {
  const std::string dir = TestDir();
  for (uint32_t format : {1u, 2u}) {
    Checkpoint legacy = AtVersion(6, 60 + format);
    legacy.shard_index = 0;
    ASSERT_THAT(
        WriteCheckpointInFormatForTest(CheckpointPath(dir, 0), legacy, format),
        IsOk());
    absl::StatusOr<ShardCheckpoints::Loaded> loaded = Files(dir).ReadNewest();
    ASSERT_THAT(loaded, IsOk()) << "format " << format;
    EXPECT_EQ(loaded->path, CheckpointPath(dir, 0));
    EXPECT_EQ(loaded->checkpoint.blocks[0].version, 60 + format);
  }
  // A legacy file has no model fingerprint, but its shard index is checked.
  EXPECT_THAT(Files(dir, 3).ReadNewest(),
              StatusIs(absl::StatusCode::kNotFound));
  fs::copy_file(CheckpointPath(dir, 0), CheckpointPath(dir, 3));
  EXPECT_THAT(Files(dir, 3).ReadNewest(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("holds shard 0, but this is ps 3")));
  // The first generation written takes over.
  ASSERT_THAT(Files(dir).Write(AtVersion(7, 70)), IsOk());
  EXPECT_EQ(Files(dir).ReadNewest()->checkpoint.blocks[0].version, 70u);
}

TEST(ShardCheckpointsTest, OtherFilesInTheFolderAreIgnored) {
  const std::string dir = TestDir();
  ASSERT_THAT(Files(dir).Write(AtVersion(1, 1)), IsOk());
  for (const char* name : {"e1-g2.ckpt", "e000000000009-g00000000000x.ckpt",
                           "e000000000009-g000000000009.ckpt.bak", "notes"}) {
    WriteBytes(dir + "/ps-0/" + name, "not a generation");
  }
  absl::StatusOr<std::vector<ShardCheckpoints::Generation>> list =
      Files(dir).List();
  ASSERT_THAT(list, IsOk());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_THAT(Files(dir).ReadNewest(), IsOk());
}

// --- Incremental chains ------------------------------------------------------

// Rows of a dim-1 sgd table: `keys` with value `value` + key, version 1.
SparseTable::Rows TableRows(const std::vector<uint64_t>& keys, float value,
                            const std::vector<uint64_t>& evicted = {}) {
  SparseTable::Rows rows;
  rows.dim = 1;
  rows.state_slots = 0;
  rows.optimizer = SparseOptimizerType::kSgd;
  rows.keys = keys;
  for (uint64_t key : keys) {
    rows.data.push_back(value + static_cast<float>(key));
    rows.versions.push_back(1);
    rows.clocks.push_back(key * 10);
  }
  rows.clock = 1000 + static_cast<uint64_t>(value);
  rows.evicted_versions = evicted.size();
  rows.evicted_keys = evicted;
  return rows;
}

Checkpoint SparseCut(uint64_t version, SparseTable::Rows rows) {
  Checkpoint c = AtVersion(1, version);
  c.sparse_tables.emplace_back(0, std::move(rows));
  return c;
}

Checkpoint DeltaCut(uint64_t version, SparseTable::Rows rows, uint64_t base,
                    uint64_t parent) {
  Checkpoint c = SparseCut(version, std::move(rows));
  c.kind = CheckpointKind::kDelta;
  c.base_generation = base;
  c.parent_generation = parent;
  return c;
}

ShardCheckpoints Incremental(const std::string& dir, int keep = 3) {
  ShardCheckpoints::Options options;
  options.dir = dir;
  options.model_fingerprint = kModel;
  options.keep = keep;
  options.incremental = true;
  return ShardCheckpoints(options);
}

// A full cut (g1) and two deltas (g2, g3): {1,2,3,4}; then 3 evicted, 2 and
// 5 changed; then 1 and 2 evicted, 2 created again, 6 new.
std::vector<std::string> WriteChain(const ShardCheckpoints& files) {
  std::vector<std::string> paths;
  for (Checkpoint c : {SparseCut(10, TableRows({1, 2, 3, 4}, 1)),
                       DeltaCut(11, TableRows({2, 5}, 2, {3}), 1, 1),
                       DeltaCut(12, TableRows({2, 6}, 3, {1, 2}), 1, 2)}) {
    absl::StatusOr<ShardCheckpoints::Written> written = files.Write(c);
    EXPECT_THAT(written, IsOk());
    if (written.ok()) paths.push_back(written->path);
  }
  return paths;
}

// key -> value of the restored table 0.
std::map<uint64_t, float> Values(const Checkpoint& c) {
  std::map<uint64_t, float> values;
  const SparseTable::Rows& rows = c.sparse_tables.at(0).second;
  for (size_t i = 0; i < rows.keys.size(); ++i)
    values[rows.keys[i]] = rows.data[i];
  return values;
}

TEST(ShardCheckpointsTest, AChainRestoresItsFullCutWithEveryDeltaApplied) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Incremental(dir);
  const std::vector<std::string> paths = WriteChain(files);
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[1], dir + "/ps-0/" + DeltaFileName(1, 2));
  absl::StatusOr<ShardCheckpoints::Loaded> loaded = files.ReadNewest();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->path, paths[0]);
  EXPECT_EQ(loaded->deltas, (std::vector<std::string>{paths[1], paths[2]}));
  EXPECT_TRUE(loaded->chain_ended.empty());
  const Checkpoint& c = loaded->checkpoint;
  EXPECT_EQ(c.kind, CheckpointKind::kFull);
  EXPECT_EQ(c.generation, 3u);
  EXPECT_EQ(c.blocks[0].version, 12u) << "the blocks of the last delta";
  EXPECT_EQ(Values(c), (std::map<uint64_t, float>{
                           {2, 5.0f}, {4, 5.0f}, {5, 7.0f}, {6, 9.0f}}));
  const SparseTable::Rows& rows = c.sparse_tables[0].second;
  EXPECT_EQ(rows.clocks, (std::vector<uint64_t>{20, 40, 50, 60}));
  EXPECT_EQ(rows.clock, 1003u);
  EXPECT_EQ(rows.evicted_versions, 2u) << "the last delta's figure";
  EXPECT_TRUE(rows.evicted_keys.empty()) << "applied";
  // The tools read the same state.
  absl::StatusOr<Checkpoint> tools = ReadNewestCheckpoint(dir, 0);
  ASSERT_THAT(tools, IsOk());
  EXPECT_EQ(Values(*tools), Values(c));
  // The chain's manifests: the newest and the one before it.
  EXPECT_EQ(Names(dir + "/ps-0"),
            (std::vector<std::string>{"e000000000001-g000000000001.ckpt",
                                      "e000000000001-g000000000002.delta",
                                      "e000000000001-g000000000002.manifest",
                                      "e000000000001-g000000000003.delta",
                                      "e000000000001-g000000000003.manifest"}));
}

// A bad delta ends the chain at the file before it, said in chain_ended,
// and the restore goes on: never a failure, never a silent skip.
TEST(ShardCheckpointsTest, ADamagedDeltaEndsTheChainAtTheOneBefore) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Incremental(dir);
  const std::vector<std::string> paths = WriteChain(files);
  ASSERT_EQ(paths.size(), 3u);
  FlipByte(paths[2], 90);
  absl::StatusOr<ShardCheckpoints::Loaded> loaded = files.ReadNewest();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->deltas, std::vector<std::string>{paths[1]});
  ASSERT_EQ(loaded->chain_ended.size(), 1u);
  EXPECT_THAT(loaded->chain_ended[0].message(),
              AllOf(HasSubstr(paths[2]), HasSubstr("checksum mismatch"),
                    HasSubstr(absl::StrCat("ends at ", paths[1])),
                    HasSubstr("not restored")));
  EXPECT_EQ(
      Values(loaded->checkpoint),
      (std::map<uint64_t, float>{{1, 2.0f}, {2, 4.0f}, {4, 5.0f}, {5, 7.0f}}));
  EXPECT_EQ(loaded->checkpoint.blocks[0].version, 11u);
  // A delta gone altogether: the full cut alone.
  fs::remove(paths[1]);
  loaded = files.ReadNewest();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_TRUE(loaded->deltas.empty());
  ASSERT_EQ(loaded->chain_ended.size(), 1u);
  EXPECT_THAT(loaded->chain_ended[0].message(),
              AllOf(HasSubstr(paths[1]), HasSubstr("does not exist")));
  EXPECT_EQ(Values(loaded->checkpoint).size(), 4u);
}

TEST(ShardCheckpointsTest, ADamagedManifestFallsBackToThePreviousOne) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Incremental(dir);
  ASSERT_EQ(WriteChain(files).size(), 3u);
  const std::string newest = dir + "/ps-0/" + ManifestFileName(1, 3);
  FlipByte(newest, 30);
  absl::StatusOr<ShardCheckpoints::Loaded> loaded = files.ReadNewest();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->deltas.size(), 1u) << "the older manifest's chain";
  ASSERT_EQ(loaded->chain_ended.size(), 1u);
  EXPECT_THAT(loaded->chain_ended[0].message(),
              AllOf(HasSubstr(newest), HasSubstr("checksum mismatch")));
  EXPECT_EQ(loaded->checkpoint.blocks[0].version, 11u);
  // A crash between a delta and its manifest: the delta is not listed, so
  // the chain ends before it (no complaint: nothing was damaged).
  fs::remove(newest);
  loaded = files.ReadNewest();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->deltas.size(), 1u);
  EXPECT_TRUE(loaded->chain_ended.empty());
}

TEST(ShardCheckpointsTest, KeepCountsFullCutsAndRemovesAChainWhole) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Incremental(dir, /*keep=*/2);
  ASSERT_EQ(WriteChain(files).size(), 3u);  // g1, g2, g3
  ASSERT_THAT(files.Write(SparseCut(20, TableRows({7}, 1))), IsOk());  // g4
  ASSERT_THAT(files.Write(DeltaCut(21, TableRows({8}, 1), 4, 4)), IsOk());
  EXPECT_EQ(Names(dir + "/ps-0").size(), 9u) << "two chains";
  absl::StatusOr<ShardCheckpoints::Written> third =
      files.Write(SparseCut(30, TableRows({9}, 1)));  // g6
  ASSERT_THAT(third, IsOk());
  EXPECT_EQ(third->removed.size(), 5u) << "g1's full cut, deltas and manifests";
  EXPECT_EQ(Names(dir + "/ps-0"),
            (std::vector<std::string>{"e000000000001-g000000000004.ckpt",
                                      "e000000000001-g000000000004.manifest",
                                      "e000000000001-g000000000005.delta",
                                      "e000000000001-g000000000005.manifest",
                                      "e000000000001-g000000000006.ckpt",
                                      "e000000000001-g000000000006.manifest"}));
  // A corrupt newest full cut falls back to the previous chain, deltas and all.
  FlipByte(third->path, 70);
  absl::StatusOr<ShardCheckpoints::Loaded> loaded = files.ReadNewest();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->skipped.size(), 1u);
  EXPECT_EQ(loaded->deltas.size(), 1u);
  EXPECT_EQ(loaded->checkpoint.blocks[0].version, 21u);
}

TEST(ShardCheckpointsTest, ADeltaOffTheEndOfItsChainIsRefused) {
  const std::string dir = TestDir();
  const ShardCheckpoints files = Incremental(dir);
  ASSERT_EQ(WriteChain(files).size(), 3u);
  EXPECT_THAT(files.Write(DeltaCut(13, TableRows({1}, 1), 1, 2)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("ends at g3, not at g2"),
                             HasSubstr("write a full cut"))));
  EXPECT_THAT(files.Write(DeltaCut(13, TableRows({1}, 1), 4, 4)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no manifest")));
  EXPECT_EQ(Names(dir + "/ps-0").size(), 5u) << "nothing written";
}

}  // namespace
}  // namespace downpour::server

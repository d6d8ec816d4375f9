#include "server/shard.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/push_key.h"
#include "common/push_sequence.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "common/wire_encoding.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    config_.model.layers = {6, 4, 3};
    config_.model.block_size = 8;
    config_.cluster.workers.assign(4, "127.0.0.1:0");  // worker ids 0 to 3
    config_.optimizer.type = OptimizerType::kSgd;
    config_.optimizer.learning_rate = 1.0;
    config_.checkpoint.dir = dir_;
    auto spec = ModelSpec::Create(config_.model);
    ASSERT_TRUE(spec.ok());
    num_blocks_ = spec->blocks().size();
    spec_ = std::make_unique<ModelSpec>(*spec);
  }

  std::unique_ptr<Shard> MakeShard() {
    auto shard = Shard::Create(config_, 0, &counters_);
    EXPECT_THAT(shard, IsOk());
    return shard.ok() ? *std::move(shard) : nullptr;
  }

  std::vector<uint32_t> AllBlocks() const {
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < num_blocks_; ++i) ids.push_back(i);
    return ids;
  }

  proto::PushRequest OnesPush(uint32_t block, uint64_t sequence) const {
    proto::PushRequest request;
    request.set_placement_epoch(1);
    request.set_worker_id(3);
    request.set_sequence(sequence);
    proto::BlockData* data = request.add_blocks();
    data->set_block_id(block);
    const int64_t length =
        block < spec_->blocks().size() ? spec_->blocks()[block].length : 8;
    std::vector<float> ones(length, 1.0f);
    data->set_data(ones.data(), ones.size() * 4);
    return request;
  }

  std::string dir_;
  Config config_;
  Counters counters_;
  size_t num_blocks_ = 0;
  std::unique_ptr<ModelSpec> spec_;
};

// A push of `value` everywhere on block 0 by `worker`.
proto::PushRequest ValuePush(const ModelSpec& spec, int worker,
                             uint64_t sequence, float value) {
  proto::PushRequest request;
  request.set_placement_epoch(1);
  request.set_worker_id(worker);
  request.set_sequence(sequence);
  proto::BlockData* data = request.add_blocks();
  data->set_block_id(0);
  std::vector<float> values(spec.blocks()[0].length, value);
  data->set_data(values.data(), values.size() * 4);
  return request;
}

// Shard::Pull's status alone.
absl::Status PullOf(const Shard& shard, const proto::PullRequest& pull) {
  proto::PullResponse response;
  return shard.Pull(pull, &response);
}

std::vector<float> PullBlock0(const Shard& shard, uint64_t* version) {
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(0);
  proto::PullResponse response;
  EXPECT_THAT(shard.Pull(pull, &response), IsOk());
  const std::string& bytes = response.blocks(0).data();
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  *version = response.blocks(0).version();
  return values;
}

TEST_F(ShardTest, SspPushIsHeldUntilTheSlowestWorkerPushes) {
  config_.training.consistency = ConsistencyMode::kSsp;
  config_.training.max_staleness = 0;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  shard->SetActiveWorkers({0, 1});
  proto::PushResponse response;
  ASSERT_THAT(shard->Push(ValuePush(*spec_, 0, 1, 1), &response), IsOk());
  // Worker 0 is a push ahead: its next one waits, and says for whom.
  EXPECT_THAT(shard->Push(ValuePush(*spec_, 0, 2, 1), &response,
                          absl::Now() + absl::Milliseconds(600)),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("ssp: worker 0's push to block 0 waits for "
                                 "worker 1 (clock 0 vs 1, max_staleness 0)")));
  std::atomic<bool> done{false};
  absl::Status held;
  std::thread pusher([&] {
    proto::PushResponse r;
    held = shard->Push(ValuePush(*spec_, 0, 2, 1), &r,
                       absl::Now() + absl::Seconds(30));
    done = true;
  });
  EXPECT_TRUE(downpour::testing::WaitUntil(
      [&] { return counters_.Get("ssp_waits") >= 2; }, absl::Seconds(10)));
  EXPECT_FALSE(done.load());
  ASSERT_THAT(shard->Push(ValuePush(*spec_, 1, 1, 1), &response), IsOk());
  pusher.join();
  EXPECT_THAT(held, IsOk());
  EXPECT_EQ(counters_.Get("ssp_max_lead"), 0);
  uint64_t version = 0;
  PullBlock0(*shard, &version);
  EXPECT_EQ(version, 3u);  // every push applied once
}

TEST_F(ShardTest, SspWaitEndsWhenTheSlowWorkerDropsOut) {
  config_.training.consistency = ConsistencyMode::kSsp;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  shard->SetActiveWorkers({0, 1});
  proto::PushResponse response;
  ASSERT_THAT(shard->Push(ValuePush(*spec_, 0, 1, 1), &response), IsOk());
  absl::Status held;
  std::thread pusher([&] {
    proto::PushResponse r;
    held = shard->Push(ValuePush(*spec_, 0, 2, 1), &r,
                       absl::Now() + absl::Seconds(30));
  });
  EXPECT_TRUE(downpour::testing::WaitUntil(
      [&] { return counters_.Get("ssp_waits") >= 1; }, absl::Seconds(10)));
  shard->SetActiveWorkers({0});  // worker 1 died
  pusher.join();
  EXPECT_THAT(held, IsOk());
}

TEST_F(ShardTest, ReleasedHoldsAnswerUnavailableAtOnce) {
  config_.training.consistency = ConsistencyMode::kBsp;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  shard->SetActiveWorkers({0, 1});
  absl::Status held;
  std::thread pusher([&] {
    proto::PushResponse r;
    held = shard->Push(ValuePush(*spec_, 0, 1, 1), &r, absl::InfiniteFuture());
  });
  EXPECT_TRUE(downpour::testing::WaitUntil(
      [&] { return counters_.Get("bsp_waits") >= 1; }, absl::Seconds(10)));
  shard->ReleaseHeldPushes();  // the ps is stopping
  pusher.join();
  EXPECT_THAT(held, StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(ShardTest, BspRoundOfTwoWorkersAppliesTheMeanOnce) {
  config_.training.consistency = ConsistencyMode::kBsp;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  shard->SetActiveWorkers({0, 1});
  uint64_t version = 0;
  const std::vector<float> initial = PullBlock0(*shard, &version);
  ASSERT_EQ(version, 0u);
  absl::Status first, retry;
  proto::PushResponse first_response;
  std::thread pusher0([&] {
    first = shard->Push(ValuePush(*spec_, 0, 1, 1.0f), &first_response,
                        absl::Now() + absl::Seconds(30));
  });
  EXPECT_TRUE(downpour::testing::WaitUntil(
      [&] { return counters_.Get("bsp_waits") >= 1; }, absl::Seconds(10)));
  // A retry of the pending contribution (its first try timed out) waits
  // again without counting twice.
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(ValuePush(*spec_, 0, 1, 1.0f), &response,
                          absl::Now() + absl::Milliseconds(600)),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("missing workers [1]")));
  PullBlock0(*shard, &version);
  EXPECT_EQ(version, 0u);  // nothing applied before the round completes
  proto::PushResponse second_response;
  ASSERT_THAT(shard->Push(ValuePush(*spec_, 1, 1, 3.0f), &second_response,
                          absl::Now() + absl::Seconds(30)),
              IsOk());
  pusher0.join();
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first_response.versions(0), 1u);
  EXPECT_EQ(second_response.versions(0), 1u);
  const std::vector<float> after = PullBlock0(*shard, &version);
  EXPECT_EQ(version, 1u);  // one update for the round
  // sgd, learning rate 1: w - 1 * mean(1, 3) = w - 2.
  for (size_t i = 0; i < after.size(); ++i) {
    ASSERT_FLOAT_EQ(after[i], initial[i] - 2.0f) << "at " << i;
  }
  EXPECT_EQ(counters_.Get("bsp_rounds"), 1);
  // A retry after the round applied is a duplicate.
  ASSERT_THAT(shard->Push(ValuePush(*spec_, 0, 1, 1.0f), &response), IsOk());
  EXPECT_TRUE(response.duplicate());
}

TEST_F(ShardTest, BspRoundCompletesWhenAWorkerDiesMidStep) {
  config_.training.consistency = ConsistencyMode::kBsp;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  shard->SetActiveWorkers({0, 1, 2});
  absl::Status a, b;
  std::thread t0([&] {
    proto::PushResponse r;
    a = shard->Push(ValuePush(*spec_, 0, 1, 1), &r,
                    absl::Now() + absl::Seconds(30));
  });
  std::thread t1([&] {
    proto::PushResponse r;
    b = shard->Push(ValuePush(*spec_, 1, 1, 1), &r,
                    absl::Now() + absl::Seconds(30));
  });
  EXPECT_TRUE(downpour::testing::WaitUntil(
      [&] { return counters_.Get("bsp_waits") >= 2; }, absl::Seconds(10)));
  shard->SetActiveWorkers({0, 1});  // worker 2 is dead
  t0.join();
  t1.join();
  EXPECT_THAT(a, IsOk());
  EXPECT_THAT(b, IsOk());
  EXPECT_EQ(counters_.Get("bsp_rounds"), 1);
}

TEST_F(ShardTest, RefusesRequestsBeforePlacementAndFromOtherEpochs) {
  auto shard = MakeShard();
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(0);
  proto::PullResponse response;
  EXPECT_THAT(
      shard->Pull(pull, &response),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no blocks yet")));
  ASSERT_THAT(shard->Assign(2, AllBlocks()), IsOk());
  EXPECT_THAT(shard->Pull(pull, &response),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("stale placement epoch 1")));
  pull.set_placement_epoch(3);
  EXPECT_THAT(shard->Pull(pull, &response),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(ShardTest, RejectedPushChangesNothing) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0, 1}), IsOk());
  const proto::ChecksumResponse before = shard->Checksums();
  proto::PushRequest request = OnesPush(0, 1);
  // Second block poisoned: the whole request is refused, block 0 included.
  proto::BlockData* bad = request.add_blocks();
  bad->set_block_id(1);
  std::vector<float> values(spec_->blocks()[1].length, 0.0f);
  values[2] = NAN;
  bad->set_data(values.data(), values.size() * 4);
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(request, &response),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NaN")));
  EXPECT_EQ(shard->Checksums().DebugString(), before.DebugString());
  request = OnesPush(num_blocks_ + 1, 2);
  EXPECT_THAT(
      shard->Push(request, &response),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown block")));
}

// Issue 12: a finite gradient past optimizer.max_gradient_value in any block
// refuses the whole push, as NaN does.
TEST_F(ShardTest, PushBeyondMaxGradientValueChangesNothing) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0, 1}), IsOk());
  const proto::ChecksumResponse before = shard->Checksums();
  proto::PushRequest request = OnesPush(0, 1);
  proto::BlockData* bad = request.add_blocks();
  bad->set_block_id(1);
  std::vector<float> values(spec_->blocks()[1].length, 0.0f);
  values[3] = 1e38f;
  bad->set_data(values.data(), values.size() * 4);
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(request, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("block 1 gradient element 3")));
  EXPECT_EQ(shard->Checksums().DebugString(), before.DebugString());
  EXPECT_EQ(counters_.Get("rejected_pushes"), 1);
}

// With the bound off, the second block's update would overflow: it is
// refused and left as it was; the first block of the push was applied and
// the sequence is used up, so a retry cannot apply it twice.
TEST_F(ShardTest, OverflowingBlockIsRefusedAndTheSequenceUsedUp) {
  config_.optimizer.max_gradient_value = 0;
  config_.optimizer.learning_rate = 1e30;  // past the config bound: a test
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0, 1}), IsOk());
  proto::PushRequest request = OnesPush(0, 1);
  proto::BlockData* bad = request.add_blocks();
  bad->set_block_id(1);
  std::vector<float> values(spec_->blocks()[1].length, 1e30f);
  bad->set_data(values.data(), values.size() * 4);
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(request, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("block 1 update would overflow"),
                             HasSubstr("1 of 2 blocks applied before it"))));
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(0);
  pull.add_block_ids(1);
  proto::PullResponse pulled;
  ASSERT_THAT(shard->Pull(pull, &pulled), IsOk());
  EXPECT_EQ(pulled.blocks(0).version(), 1u);
  EXPECT_EQ(pulled.blocks(1).version(), 0u);
  EXPECT_EQ(counters_.Get("refused_overflows"), 1);
  // The retry is a duplicate: nothing applied again.
  EXPECT_THAT(shard->Push(request, &response), IsOk());
  ASSERT_THAT(shard->Pull(pull, &pulled), IsOk());
  EXPECT_EQ(pulled.blocks(0).version(), 1u);
}

// A push of `value` everywhere on block 0 by `worker`, in `encoding`.
proto::PushRequest EncodedPush(const ModelSpec& spec, int worker,
                               uint64_t sequence, float value,
                               WireEncoding encoding) {
  proto::PushRequest request = ValuePush(spec, worker, sequence, value);
  proto::BlockData* block = request.mutable_blocks(0);
  const std::vector<float> values(spec.blocks()[0].length, value);
  std::string bytes(values.size() * BytesPerElement(encoding), '\0');
  EncodeFloats(values.data(), values.size(), encoding, bytes.data());
  block->set_data(bytes);
  block->set_encoding(static_cast<proto::Encoding>(encoding));
  return request;
}

TEST_F(ShardTest, EncodedPushIsDecodedAndPullsAnswerInTheAskedEncoding) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  uint64_t version = 0;
  const std::vector<float> initial = PullBlock0(*shard, &version);
  proto::PushResponse response;
  // 0.375 is exact in bf16 and fp16; sgd with learning rate 1.
  ASSERT_THAT(
      shard->Push(EncodedPush(*spec_, 3, 1, 0.375f, WireEncoding::kBf16),
                  &response),
      IsOk());
  ASSERT_THAT(shard->Push(EncodedPush(*spec_, 3, 2, 0.25f, WireEncoding::kFp16),
                          &response),
              IsOk());
  const std::vector<float> after = PullBlock0(*shard, &version);
  EXPECT_EQ(version, 2u);
  for (size_t i = 0; i < after.size(); ++i) {
    ASSERT_FLOAT_EQ(after[i], initial[i] - 0.625f) << "at " << i;
  }
  EXPECT_EQ(counters_.Get("bytes_in"),
            2 * 2 * static_cast<int64_t>(after.size()));
  for (WireEncoding encoding : {WireEncoding::kBf16, WireEncoding::kFp16}) {
    proto::PullRequest pull;
    pull.set_placement_epoch(1);
    pull.add_block_ids(0);
    pull.set_encoding(static_cast<proto::Encoding>(encoding));
    proto::PullResponse pulled;
    ASSERT_THAT(shard->Pull(pull, &pulled), IsOk());
    const proto::BlockData& block = pulled.blocks(0);
    EXPECT_EQ(block.encoding(), static_cast<proto::Encoding>(encoding));
    EXPECT_EQ(block.version(), 2u);
    std::string expected(after.size() * 2, '\0');
    EncodeFloats(after.data(), after.size(), encoding, expected.data());
    EXPECT_EQ(block.data(), expected) << WireEncodingName(encoding);
  }
}

TEST_F(ShardTest, UnknownEncodingIsRefusedAndChangesNothing) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  const proto::ChecksumResponse before = shard->Checksums();
  proto::PushRequest request = OnesPush(0, 1);
  request.mutable_blocks(0)->set_encoding(static_cast<proto::Encoding>(7));
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(request, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown encoding 7")));
  EXPECT_EQ(shard->Checksums().DebugString(), before.DebugString());
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(0);
  pull.set_encoding(static_cast<proto::Encoding>(7));
  proto::PullResponse pulled;
  EXPECT_THAT(shard->Pull(pull, &pulled),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown encoding 7")));
}

TEST_F(ShardTest, BspRoundAveragesDecodedPushes) {
  config_.training.consistency = ConsistencyMode::kBsp;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  shard->SetActiveWorkers({0, 1});
  uint64_t version = 0;
  const std::vector<float> initial = PullBlock0(*shard, &version);
  absl::Status first;
  std::thread pusher0([&] {
    proto::PushResponse r;
    first = shard->Push(EncodedPush(*spec_, 0, 1, 1.0f, WireEncoding::kBf16),
                        &r, absl::Now() + absl::Seconds(30));
  });
  EXPECT_TRUE(downpour::testing::WaitUntil(
      [&] { return counters_.Get("bsp_waits") >= 1; }, absl::Seconds(10)));
  proto::PushResponse response;
  ASSERT_THAT(shard->Push(EncodedPush(*spec_, 1, 1, 3.0f, WireEncoding::kFp16),
                          &response, absl::Now() + absl::Seconds(30)),
              IsOk());
  pusher0.join();
  ASSERT_THAT(first, IsOk());
  const std::vector<float> after = PullBlock0(*shard, &version);
  EXPECT_EQ(version, 1u);
  // sgd, learning rate 1: w - mean(1, 3).
  for (size_t i = 0; i < after.size(); ++i) {
    ASSERT_FLOAT_EQ(after[i], initial[i] - 2.0f) << "at " << i;
  }
}

TEST_F(ShardTest, RetriedPushIsAppliedOnce) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  proto::PushResponse first, retry;
  ASSERT_THAT(shard->Push(OnesPush(0, 10), &first), IsOk());
  ASSERT_THAT(shard->Push(OnesPush(0, 10), &retry), IsOk());
  EXPECT_FALSE(first.duplicate());
  EXPECT_TRUE(retry.duplicate());
  EXPECT_EQ(first.versions(0), 1u);
  EXPECT_EQ(counters_.Get("duplicate_pushes"), 1);
}

TEST_F(ShardTest, PushesInFlightMayArriveInAnyOrderAndApplyOnce) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  // Requests 3, 1, 2 of incarnation 5, then retries of each.
  for (uint64_t n : {3, 1, 2, 3, 1, 2}) {
    proto::PushResponse response;
    ASSERT_THAT(shard->Push(OnesPush(0, MakeSequence(5, n)), &response),
                IsOk());
  }
  uint64_t version = 0;
  PullBlock0(*shard, &version);
  EXPECT_EQ(version, 3u);
  EXPECT_EQ(counters_.Get("duplicate_pushes"), 3);
  // A request of an older incarnation (a replaced process) is refused and
  // changes nothing.
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(OnesPush(0, MakeSequence(4, 9)), &response),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr("incarnation 4 was replaced")));
  PullBlock0(*shard, &version);
  EXPECT_EQ(version, 3u);
}

// Issue 25: an empty push (which once moved a worker's window, freezing it)
// is refused in a coordinated job and leaves the window as it was.
TEST_F(ShardTest, AnEmptyPushMovesNoWindow) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  shard->LearnWorkerIncarnations({{3, 1, PushKeyDigest(3, 1, 0xfeed)}});
  proto::PushRequest empty = OnesPush(0, MakeSequence(1, 1000));
  empty.clear_blocks();
  empty.set_push_key(0xfeed);
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(empty, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("without blocks")));
  proto::PushRequest first = OnesPush(0, MakeSequence(1, 1));
  first.set_push_key(0xfeed);
  ASSERT_THAT(shard->Push(first, &response), IsOk());
  EXPECT_FALSE(response.duplicate()) << "the window did not move to 1000";
  EXPECT_EQ(counters_.Get("sequence_window_skips"), 0);
}

TEST_F(ShardTest, AnInvalidPushUsesUpItsSequence) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  proto::PushRequest bad = OnesPush(0, 1);
  bad.mutable_blocks(0)->mutable_data()->resize(3);
  proto::PushResponse response;
  ASSERT_THAT(shard->Push(bad, &response),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Sequence 2 then 66 (beyond 1 + the window) apply without skipping any
  // sequence: 1 counts as used up.
  ASSERT_THAT(shard->Push(OnesPush(0, 2), &response), IsOk());
  ASSERT_THAT(shard->Push(OnesPush(0, 2 + SequenceWindow::kWidth), &response),
              IsOk());
  EXPECT_EQ(counters_.Get("sequence_window_skips"), 0);
}

// Issue 25: once workers 0 and 1 have pushed, worker 2's gradient far beyond
// their norms is refused (nothing applied, the sequence used up), and one
// moderately beyond them is clipped to robustness.norm_clip_factor (10) times
// their typical norm.
TEST_F(ShardTest, AGradientFarBeyondTheOtherWorkersIsRefusedOrClipped) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  proto::PushResponse response;
  for (int i = 0; i < 20; ++i) {
    for (int worker : {0, 1}) {
      ASSERT_THAT(shard->Push(ValuePush(*spec_, worker, 0, 0.01f), &response),
                  IsOk());
    }
  }
  uint64_t version = 0;
  const std::vector<float> before = PullBlock0(*shard, &version);
  // Refused: a verdict (OK, PushResponse.refused), not an error to retry.
  response.Clear();
  ASSERT_THAT(shard->Push(ValuePush(*spec_, 2, 1, 1e3f), &response), IsOk());
  EXPECT_THAT(response.refused(),
              AllOf(HasSubstr("block 0"), HasSubstr("worker 2"),
                    HasSubstr("robustness.norm_refuse_factor")));
  EXPECT_FALSE(response.duplicate());
  EXPECT_EQ(response.versions_size(), 0);
  uint64_t unchanged = 0;
  EXPECT_EQ(PullBlock0(*shard, &unchanged), before);
  EXPECT_EQ(unchanged, version);
  EXPECT_EQ(counters_.Get("suspect_pushes_worker_2"), 1);
  // Its retry (a lost reply) gets the same answer, never "duplicate": the
  // worker must not count it as applied.
  proto::PushResponse again;
  ASSERT_THAT(shard->Push(ValuePush(*spec_, 2, 1, 1e3f), &again), IsOk());
  EXPECT_EQ(again.refused(), response.refused());
  EXPECT_FALSE(again.duplicate());
  response.Clear();
  // Sequence 1 was used up: 2 applies without a skip.
  ASSERT_THAT(shard->Push(ValuePush(*spec_, 2, 2, 0.5f), &response), IsOk());
  const std::vector<float> after = PullBlock0(*shard, &version);
  for (size_t i = 0; i < after.size(); ++i) {
    // sgd, lr 1: 0.5 clipped to 10 x 0.01 per element.
    EXPECT_NEAR(after[i], before[i] - 0.1f, 1e-5) << i;
  }
  EXPECT_EQ(counters_.Get("clipped_blocks_worker_2"), 1);
  EXPECT_EQ(counters_.Get("sequence_window_skips"), 0);
  EXPECT_EQ(counters_.Get("suspect_pushes_worker_0"), 0);
}

// Attack: one push with sequence 2^64-1 (even without blocks) made every
// later push of that worker a "duplicate", for good (the window is
// checkpointed). Now it is refused and leaves no trace.
TEST_F(ShardTest, AForgedSequenceCannotFreezeAWorker) {
  for (const bool learned : {false, true}) {
    std::filesystem::remove_all(dir_);
    auto shard = MakeShard();
    ASSERT_THAT(shard->Assign(1, {0}), IsOk());
    if (learned) shard->LearnWorkerIncarnations({{3, 1}});
    proto::PushRequest forged = OnesPush(0, ~uint64_t{0});
    forged.clear_blocks();
    proto::PushResponse response;
    EXPECT_THAT(shard->Push(forged, &response),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << (learned ? "incarnation never issued" : "too far past the window");
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
    auto restarted = MakeShard();
    ASSERT_THAT(restarted->Assign(1, {0}), IsOk());
    if (learned) restarted->LearnWorkerIncarnations({{3, 1}});
    for (Shard* s : {shard.get(), restarted.get()}) {
      proto::PushResponse applied;
      ASSERT_THAT(s->Push(OnesPush(0, MakeSequence(1, 1)), &applied), IsOk());
      EXPECT_FALSE(applied.duplicate());
      ASSERT_EQ(applied.versions_size(), 1);
      EXPECT_EQ(applied.versions(0), 1u) << "the worker's push applies";
    }
  }
}

TEST_F(ShardTest, WorkerIdsOutsideTheConfigAreRefused) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
  const proto::ChecksumResponse before = shard->Checksums();
  for (const int32_t worker : {-2, -1, 4, 1 << 30}) {
    proto::PushRequest push = OnesPush(0, 1);
    push.set_worker_id(worker);
    proto::PushResponse response;
    EXPECT_THAT(shard->Push(push, &response),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not a configured worker (4 worker "
                                   "slots in cluster.workers and "
                                   "cluster.max_workers: 0 to 3)")))
        << worker;
    proto::PullRequest pull;
    pull.set_placement_epoch(1);
    pull.set_worker_id(worker);
    pull.add_block_ids(0);
    if (worker == -1) {
      EXPECT_THAT(PullOf(*shard, pull), IsOk()) << "a tool's pull";
    } else {
      EXPECT_THAT(PullOf(*shard, pull),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr("pull: worker_id")))
          << worker;
    }
  }
  EXPECT_EQ(shard->Checksums().DebugString(), before.DebugString());
  EXPECT_EQ(shard->CutForReplica(false).sequences.size(), 0u)
      << "no per-worker state for a stranger";
}

TEST_F(ShardTest, WorkersInTheSlotsOfMaxWorkersPullAndPush) {
  config_.cluster.max_workers = 6;  // slots 4 and 5: workers that --join
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
  for (const int32_t worker : {4, 5}) {
    proto::PushRequest push = OnesPush(0, 1);
    push.set_worker_id(worker);
    proto::PushResponse response;
    EXPECT_THAT(shard->Push(push, &response), IsOk()) << worker;
    proto::PullRequest pull;
    pull.set_placement_epoch(1);
    pull.set_worker_id(worker);
    pull.add_block_ids(0);
    EXPECT_THAT(PullOf(*shard, pull), IsOk()) << worker;
  }
  proto::PushRequest beyond = OnesPush(0, 1);
  beyond.set_worker_id(6);
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(beyond, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(6 worker slots in cluster.workers and "
                                 "cluster.max_workers: 0 to 5)")));
}

TEST_F(ShardTest, ABlockTwiceInOneRequestIsRefused) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
  proto::PushRequest push = OnesPush(1, 1);
  *push.add_blocks() = push.blocks(0);
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(push, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("block 1 appears more than once")));
  uint64_t version = 0;
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(0);
  pull.add_block_ids(1);
  pull.add_block_ids(0);
  EXPECT_THAT(PullOf(*shard, pull),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("block 0 appears more than once")));
  PullBlock0(*shard, &version);
  EXPECT_EQ(version, 0u);
}

TEST_F(ShardTest, CheckpointRoundTripKeepsValuesVersionsAndSequences) {
  proto::ChecksumResponse before;
  {
    auto shard = MakeShard();
    ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
    proto::PushResponse response;
    ASSERT_THAT(shard->Push(OnesPush(1, 5), &response), IsOk());
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
    before = shard->Checksums();
  }
  auto restarted = MakeShard();
  ASSERT_THAT(restarted->Assign(1, AllBlocks()), IsOk());
  EXPECT_EQ(restarted->Checksums().DebugString(), before.DebugString());
  proto::PushResponse response;
  ASSERT_THAT(restarted->Push(OnesPush(1, 5), &response), IsOk());
  EXPECT_TRUE(response.duplicate())
      << "sequence 5 was applied before the restart";
}

// Flips a byte in the middle of `path`.
void Corrupt(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, 60, SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, 60, SEEK_SET);
  std::fputc(c ^ 0x5a, f);
  std::fclose(f);
}

TEST_F(ShardTest, CorruptCheckpointWithNothingOlderIsRefusedAtStart) {
  {
    auto shard = MakeShard();
    ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
  }
  const std::string path = dir_ + "/ps-0/" + GenerationFileName(1, 1);
  Corrupt(path);
  EXPECT_THAT(Shard::Create(config_, 0, &counters_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path)));
}

TEST_F(ShardTest, CorruptNewestCheckpointFallsBackToTheOlderGoodOne) {
  proto::ChecksumResponse older;
  {
    auto shard = MakeShard();
    ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
    proto::PushResponse response;
    ASSERT_THAT(shard->Push(OnesPush(1, 1), &response), IsOk());
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
    older = shard->Checksums();
    ASSERT_THAT(shard->Push(OnesPush(1, 2), &response), IsOk());
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
  }
  Corrupt(dir_ + "/ps-0/" + GenerationFileName(1, 2));
  auto restarted = MakeShard();
  ASSERT_NE(restarted, nullptr);
  EXPECT_EQ(counters_.Get("checkpoint_fallbacks"), 1);
  ASSERT_THAT(restarted->Assign(2, AllBlocks()), IsOk());
  EXPECT_EQ(restarted->Checksums().DebugString(), older.DebugString());
  // Its next checkpoint is the newest, past the corrupt one.
  ASSERT_THAT(restarted->WriteCheckpoint(), IsOk());
  EXPECT_TRUE(
      std::filesystem::exists(dir_ + "/ps-0/" + GenerationFileName(2, 3)));
}

TEST_F(ShardTest, CheckpointOfAnotherModelIsRefusedAtStart) {
  {
    auto shard = MakeShard();
    ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
  }
  config_.model.layers = {6, 5, 3};
  EXPECT_THAT(Shard::Create(config_, 0, &counters_),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("model.layers, model.type or model.block_size "
                                 "changed?")));
}

TEST_F(ShardTest, StaleTemporaryFilesAreRemovedAtStart) {
  std::filesystem::create_directories(dir_ + "/ps-0");
  const std::string stale =
      dir_ + "/ps-0/" + GenerationFileName(1, 1) + ".tmp.999";
  std::FILE* f = std::fopen(stale.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  ASSERT_NE(MakeShard(), nullptr);
  EXPECT_FALSE(std::filesystem::exists(stale));
}

TEST_F(ShardTest, WriteIsAbandonedWhenTheShardIsLostWhileWriting) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
  ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
  int asked = 0;
  EXPECT_THAT(shard->WriteCheckpoint([&] {
    ++asked;
    return absl::AbortedError("replaced meanwhile");
  }),
              StatusIs(absl::StatusCode::kAborted, "replaced meanwhile"));
  EXPECT_EQ(asked, 1);
  std::vector<std::string> names;
  for (const auto& entry :
       std::filesystem::directory_iterator(dir_ + "/ps-0")) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{GenerationFileName(1, 1)})
      << "no second generation, no temporary file";
}

TEST_F(ShardTest, WriterAtAnEpochBelowTheNewOwnersIsRefused) {
  auto old_owner = MakeShard();
  ASSERT_THAT(old_owner->Assign(1, AllBlocks()), IsOk());
  ASSERT_THAT(old_owner->WriteCheckpoint(), IsOk());
  // A standby takes the shard over at epoch 2 and checkpoints.
  auto new_owner = MakeShard();
  ASSERT_THAT(new_owner->Assign(2, AllBlocks()), IsOk());
  ASSERT_THAT(new_owner->WriteCheckpoint(), IsOk());
  EXPECT_THAT(old_owner->WriteCheckpoint(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("taken over at placement epoch 2")));
  EXPECT_EQ(ReadNewestCheckpoint(dir_, 0)->placement_epoch, 2u);
}

// SGD with lr 1 and gradients of ones is exact in float, so any lost or torn
// update shows up as a wrong value; the checkpoints taken meanwhile must each
// pair a block's version with the sequence of the push that made it.
// The shard tells the store who pulled and who pushed, so DC-ASGD finds the
// values a stale push was computed on. sgd lr 1, lambda 0.5, g = 1: worker 1's
// fresh push moves w by -1; worker 0's push on the same version 0 is
// compensated to 1 + 0.5 * 1 * (w_now - w_pulled) = 1 + 0.5 * -1 = 0.5.
TEST_F(ShardTest, DelayCompensationKnowsWhichWorkerPulled) {
  config_.cluster.workers = {"127.0.0.1:0", "127.0.0.1:0"};
  config_.optimizer.delay_compensation = 0.5;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  float w0 = 0;
  for (int32_t worker : {0, 1}) {
    proto::PullRequest pull;
    pull.set_placement_epoch(1);
    pull.set_worker_id(worker);
    pull.add_block_ids(0);
    proto::PullResponse pulled;
    ASSERT_THAT(shard->Pull(pull, &pulled), IsOk());
    std::memcpy(&w0, pulled.blocks(0).data().data(), sizeof(w0));
  }
  for (int32_t worker : {1, 0}) {
    proto::PushRequest push = OnesPush(0, 0);
    push.set_worker_id(worker);
    push.mutable_blocks(0)->set_version(0);
    proto::PushResponse response;
    ASSERT_THAT(shard->Push(push, &response), IsOk());
  }
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(0);
  proto::PullResponse after;
  ASSERT_THAT(shard->Pull(pull, &after), IsOk());
  float w = 0;
  std::memcpy(&w, after.blocks(0).data().data(), sizeof(w));
  EXPECT_FLOAT_EQ(w, w0 - 1.5f);
  EXPECT_EQ(counters_.Get("dc_misses"), 0);
}

TEST_F(ShardTest, ConcurrentPushesPullsAndCheckpointsAgree) {
  constexpr int kThreads = 4;
  constexpr int kPushesPerThread = 200;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 1; k <= kPushesPerThread; ++k) {
        // Thread t alone pushes block 1 + t (with its sequence); all share
        // block 0.
        proto::PushRequest own = OnesPush(1 + t, k);
        own.set_worker_id(t);
        proto::PushRequest shared = OnesPush(0, 0);
        proto::PushResponse response;
        EXPECT_THAT(shard->Push(own, &response), IsOk());
        EXPECT_THAT(shard->Push(shared, &response), IsOk());
        proto::PullRequest pull;
        pull.set_placement_epoch(1);
        pull.add_block_ids(0);
        proto::PullResponse pulled;
        EXPECT_THAT(shard->Pull(pull, &pulled), IsOk());
      }
    });
  }
  for (int c = 0; c < 5; ++c) {
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
    absl::StatusOr<Checkpoint> checkpoint = ReadNewestCheckpoint(dir_, 0);
    ASSERT_THAT(checkpoint, IsOk());
    for (const BlockStore::BlockSnapshot& block : checkpoint->blocks) {
      if (block.id < 1 || block.id > kThreads) continue;
      const int worker = block.id - 1;
      // Each thread pushes in order, so its window has no holes.
      const auto it = checkpoint->sequences.find(worker);
      const uint64_t sequence =
          it == checkpoint->sequences.end() ? 0 : it->second.base();
      EXPECT_EQ(block.version, sequence) << "block " << block.id;
    }
  }
  for (std::thread& thread : threads) thread.join();

  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  for (uint32_t id = 0; id <= kThreads; ++id) pull.add_block_ids(id);
  proto::PullResponse pulled;
  ASSERT_THAT(shard->Pull(pull, &pulled), IsOk());
  std::vector<float> initial(spec_->blocks()[0].length);
  for (uint32_t id = 0; id <= kThreads; ++id) {
    const proto::BlockData& block = pulled.blocks(id);
    const int pushes = id == 0 ? kThreads * kPushesPerThread : kPushesPerThread;
    EXPECT_EQ(block.version(), static_cast<uint64_t>(pushes)) << "block " << id;
    const BlockSpec& spec = spec_->blocks()[id];
    initial.resize(spec.length);
    spec_->InitBlock(spec, config_.model.init_seed, initial.data());
    std::vector<float> values(spec.length);
    std::memcpy(values.data(), block.data().data(), block.data().size());
    for (int64_t i = 0; i < spec.length; ++i) {
      float expected = initial[i];
      for (int k = 0; k < pushes; ++k) expected -= 1.0f;
      ASSERT_EQ(values[i], expected) << "block " << id << " index " << i;
    }
  }
}

// Replication by gradient: with the log on, a cut carries Adam's updates (1x
// the gradient) instead of the blocks (values and two state slots, 3x),
// until the updates of a block add up to its bytes; SGD with float32 pushes
// sends the block at once (the same bytes, and nothing for the backup to
// apply); delay compensation keeps the log off.
TEST_F(ShardTest, ACutCarriesUpdatesWhileTheyAreFewerBytesThanTheirBlocks) {
  config_.optimizer.type = OptimizerType::kAdam;
  config_.optimizer.learning_rate = 0.01;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
  shard->SetReplicaLog(true);
  shard->CutForReplica(true);
  proto::PushResponse response;
  ASSERT_THAT(shard->Push(OnesPush(0, 1), &response), IsOk());
  ASSERT_THAT(shard->Push(OnesPush(1, 2), &response), IsOk());
  ASSERT_THAT(shard->Push(OnesPush(0, 3), &response), IsOk());
  Shard::ReplicaCut cut = shard->CutForReplica(false, /*checks=*/true);
  EXPECT_TRUE(cut.blocks.empty());
  ASSERT_EQ(cut.updates.size(), 3u);
  EXPECT_EQ(cut.updates[0].update.id, 0u);
  EXPECT_EQ(cut.updates[0].update.version, 0u);
  EXPECT_EQ(cut.updates[1].update.id, 1u);
  EXPECT_EQ(cut.updates[2].update.id, 0u);
  EXPECT_EQ(cut.updates[2].update.version, 1u);
  EXPECT_EQ(cut.updates[2].update.worker_id, 3);
  EXPECT_EQ(cut.updates[2].gradient.size(), spec_->blocks()[0].length * 4);
  EXPECT_EQ(cut.checks.size(), num_blocks_);
  // A third update of block 0 in one cut is as many bytes as the block.
  for (uint64_t seq = 4; seq <= 6; ++seq) {
    ASSERT_THAT(shard->Push(OnesPush(0, seq), &response), IsOk());
  }
  cut = shard->CutForReplica(false);
  ASSERT_EQ(cut.blocks.size(), 1u);
  EXPECT_EQ(cut.blocks[0].id, 0u);
  EXPECT_EQ(cut.blocks[0].version, 5u);
  EXPECT_TRUE(cut.updates.empty());
  EXPECT_TRUE(cut.checks.empty());
  // Off: blocks again.
  shard->SetReplicaLog(false);
  ASSERT_THAT(shard->Push(OnesPush(1, 7), &response), IsOk());
  cut = shard->CutForReplica(false);
  EXPECT_EQ(cut.blocks.size(), 1u);
  EXPECT_TRUE(cut.updates.empty());

  for (const bool dc : {false, true}) {
    config_.optimizer.type = dc ? OptimizerType::kAdam : OptimizerType::kSgd;
    config_.optimizer.delay_compensation = dc ? 0.1 : 0.0;
    config_.checkpoint.dir = "";
    auto other = MakeShard();
    ASSERT_THAT(other->Assign(1, AllBlocks()), IsOk());
    other->SetReplicaLog(true);
    other->CutForReplica(true);
    ASSERT_THAT(other->Push(OnesPush(0, 1), &response), IsOk());
    cut = other->CutForReplica(false);
    EXPECT_EQ(cut.blocks.size(), 1u) << (dc ? "delay compensation" : "sgd");
    EXPECT_TRUE(cut.updates.empty());
  }
}

}  // namespace
}  // namespace downpour::server

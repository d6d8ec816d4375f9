#include "server/pull_reply.h"

#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/shard.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

class PullReplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.model.layers = {6, 4, 3};
    config_.model.block_size = 8;
    config_.cluster.workers.assign(4, "127.0.0.1:0");
    config_.optimizer.type = OptimizerType::kSgd;
    config_.optimizer.learning_rate = 1.0;
    absl::StatusOr<std::unique_ptr<Shard>> shard =
        Shard::Create(config_, 0, &counters_);
    ASSERT_THAT(shard, IsOk());
    shard_ = *std::move(shard);
    absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config_.model);
    ASSERT_THAT(spec, IsOk());
    for (uint32_t id = 0; id < spec->blocks().size(); ++id) {
      all_blocks_.push_back(id);
    }
    ASSERT_THAT(shard_->Assign(1, all_blocks_), IsOk());
    // Block 1 differs from its initial values and is at version 1.
    proto::PushRequest push;
    push.set_placement_epoch(1);
    push.set_worker_id(3);
    push.set_sequence(1);
    proto::BlockData* data = push.add_blocks();
    data->set_block_id(1);
    std::vector<float> ones(spec->blocks()[1].length, 1.0f);
    data->set_data(ones.data(), ones.size() * sizeof(float));
    proto::PushResponse response;
    ASSERT_THAT(shard_->Push(push, &response), IsOk());
  }

  proto::PullRequest PullAll(proto::Encoding encoding) const {
    proto::PullRequest pull;
    pull.set_placement_epoch(1);
    pull.set_encoding(encoding);
    for (uint32_t id : all_blocks_) pull.add_block_ids(id);
    return pull;
  }

  Config config_;
  Counters counters_;
  std::unique_ptr<Shard> shard_;
  std::vector<uint32_t> all_blocks_;
};

// The bytes of a reply, and how many slices held them.
std::string Flatten(const grpc::ByteBuffer& buffer, size_t* num_slices) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  *num_slices = slices.size();
  std::string flat;
  for (const grpc::Slice& slice : slices) {
    flat.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return flat;
}

TEST_F(PullReplyTest, IsTheProtobufPullReplyInOneSlice) {
  for (const proto::Encoding encoding :
       {proto::FLOAT32, proto::BF16, proto::FP16}) {
    const proto::PullRequest pull = PullAll(encoding);
    proto::PullResponse want;
    ASSERT_THAT(shard_->Pull(pull, &want), IsOk());
    ASSERT_EQ(want.blocks_size(), static_cast<int>(all_blocks_.size()));
    EXPECT_EQ(want.blocks(1).version(), 1u);
    absl::StatusOr<grpc::ByteBuffer> bytes = BuildPullReply(*shard_, pull);
    ASSERT_THAT(bytes, IsOk());
    size_t num_slices = 0;
    EXPECT_EQ(Flatten(*bytes, &num_slices), want.SerializeAsString())
        << encoding;
    EXPECT_EQ(num_slices, 1u) << "the values are copied once, into one slice";
  }
}

TEST_F(PullReplyTest, ShardErrorsComeThrough) {
  proto::PullRequest pull = PullAll(proto::FLOAT32);
  pull.add_block_ids(all_blocks_.size() + 5);
  EXPECT_THAT(BuildPullReply(*shard_, pull),
              StatusIs(absl::StatusCode::kNotFound));
  pull = PullAll(proto::FLOAT32);
  pull.add_block_ids(0);
  EXPECT_THAT(BuildPullReply(*shard_, pull),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("block 0 appears more than once")));
  pull = PullAll(proto::FLOAT32);
  pull.set_placement_epoch(2);
  EXPECT_THAT(BuildPullReply(*shard_, pull),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(PullReplyTest, AReplyOverTheMessageLimitIsRefusedBeforeItIsBuilt) {
  const proto::PullRequest pull = PullAll(proto::FLOAT32);
  absl::StatusOr<grpc::ByteBuffer> bytes = BuildPullReply(*shard_, pull);
  ASSERT_THAT(bytes, IsOk());
  size_t num_slices = 0;
  const size_t size = Flatten(*bytes, &num_slices).size();
  const double pulls = counters_.Get("pulls");
  EXPECT_THAT(BuildPullReply(*shard_, pull, /*max_bytes=*/size / 2),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("-byte message limit: ask for fewer blocks "
                                 "per request")));
  EXPECT_EQ(counters_.Get("pulls"), pulls) << "nothing was pulled";
}

}  // namespace
}  // namespace downpour::server

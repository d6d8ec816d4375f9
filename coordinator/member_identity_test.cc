#include "coordinator/member_identity.h"

#include <set>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

TEST(MemberIdentityTest, KeysAre128BitHexAndDoNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = NewMemberKey();
    ASSERT_EQ(key.size(), 32u);
    EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_TRUE(seen.insert(key).second) << "repeated key " << key;
  }
}

TEST(MemberIdentityTest, SameKeyNeedsTheWholeNonEmptyKey) {
  const std::string key = NewMemberKey();
  EXPECT_TRUE(SameKey(key, key));
  EXPECT_FALSE(SameKey("", ""));
  EXPECT_FALSE(SameKey("", key));
  EXPECT_FALSE(SameKey(key.substr(0, 31), key));
  std::string other = key;
  other[31] = other[31] == '0' ? '1' : '0';
  EXPECT_FALSE(SameKey(other, key));
}

TEST(MemberIdentityTest, BoundsNameTheFieldAndTheLimit) {
  proto::HeartbeatRequest beat;
  beat.set_role("worker");
  beat.set_address("127.0.0.1:1");
  EXPECT_THAT(CheckHeartbeatBounds(beat), IsOk());
  beat.mutable_report()->set_device(std::string(kMaxDeviceBytes, 'd'));
  EXPECT_THAT(CheckHeartbeatBounds(beat), IsOk());
  beat.mutable_report()->set_device(std::string(kMaxDeviceBytes + 1, 'd'));
  EXPECT_THAT(CheckHeartbeatBounds(beat),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("report.device is 257 bytes, over the limit "
                                 "of 256")));
  proto::RegisterWorkerRequest worker;
  EXPECT_THAT(CheckRegisterBounds(worker),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("address is empty")));
  worker.set_address(std::string(kMaxAddressBytes + 1, 'a'));
  EXPECT_THAT(CheckRegisterBounds(worker),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("address is 257 bytes")));
}

}  // namespace
}  // namespace downpour::coordinator

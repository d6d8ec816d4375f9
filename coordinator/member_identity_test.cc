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

// Issue 42 attack 5: field fuzzing stored "%s%n%x" and "../../etc/passwd" as
// backup members' addresses. Only what a daemon can be dialled at is stored.
TEST(MemberIdentityTest, OnlyDialableAddressesAreStored) {
  proto::RegisterServerRequest request;
  for (const char* good :
       {"127.0.0.1:7001", "ps-0.downpour.svc.cluster.local:7001", "[::1]:7000",
        "[fe80::1]:1", "localhost:65535", "my_host:80"}) {
    request.set_address(good);
    EXPECT_THAT(CheckRegisterBounds(request), IsOk()) << good;
  }
  for (const char* bad :
       {"%s%n%x", "../../etc/passwd", "%s%n%x:7001", "../..:7001", "host:0",
        "host:65536", "host:", ":7001", "host", "a b:1", "-host:1", "host..x:1",
        "[::1%eth0]:1", "[zz]:1", "host:+80", "h\x01st:1", "unix:/tmp/sock",
        "host/x:1"}) {
    request.set_address(bad);
    EXPECT_THAT(CheckRegisterBounds(request),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not host:port")))
        << bad;
  }
  proto::RegisterWorkerRequest worker;
  worker.set_address("%s%n%x");
  EXPECT_THAT(CheckRegisterBounds(worker),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace downpour::coordinator

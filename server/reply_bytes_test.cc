#include "server/reply_bytes.h"

#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ReplyBytesTest, HoldsAreBoundedAndReleased) {
  ReplyBytes replies(100);
  EXPECT_THAT(replies.Take(101, "lookup").status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("ask for fewer keys")));
  {
    auto a = replies.Take(60, "lookup");
    ASSERT_THAT(a.status(), IsOk());
    EXPECT_EQ(replies.held(), 60);
    EXPECT_THAT(
        replies.Take(41, "lookup").status(),
        StatusIs(absl::StatusCode::kUnavailable, HasSubstr("retry shortly")));
    auto b = replies.Take(40, "lookup");
    ASSERT_THAT(b.status(), IsOk());
    ReplyBytes::Hold moved = std::move(*b);
    EXPECT_EQ(replies.held(), 100);
  }
  EXPECT_EQ(replies.held(), 0);
}

TEST(ReplyBytesTest, AWaitEndsWhenRoomIsFreed) {
  ReplyBytes replies(100);
  auto a = replies.Take(80, "pull");
  ASSERT_THAT(a.status(), IsOk());
  std::thread release([&] {
    absl::SleepFor(absl::Milliseconds(50));
    *a = ReplyBytes::Hold();
  });
  auto b = replies.Take(50, "pull", absl::Now() + absl::Seconds(30));
  release.join();
  EXPECT_THAT(b.status(), IsOk());
}

}  // namespace
}  // namespace downpour::server

#include "common/json.h"

#include <cmath>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/status.pb.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

TEST(JsonTest, MessageRoundTrips) {
  proto::GetStatusResponse status;
  status.set_role("ps");
  status.set_loss(NAN);
  const std::string json = ToJson(status);
  EXPECT_THAT(json, HasSubstr("\"role\": \"ps\""));
  EXPECT_THAT(json, HasSubstr("\"loss\": \"NaN\""));
  proto::GetStatusResponse back;
  ASSERT_THAT(FromJson(json, "s.json", &back), IsOk());
  EXPECT_EQ(back.role(), "ps");
  EXPECT_THAT(
      FromJson("{\"nope\": 1}", "s.json", &back),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("s.json")));
}

TEST(JsonTest, StringsAreEscaped) {
  EXPECT_EQ(JsonString("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST(JsonTest, NumbersAreNullWhenNotFinite) {
  EXPECT_EQ(JsonNumber(0.25), "0.25");
  EXPECT_EQ(JsonNumber(1234567.0), "1.23457e+06");
  EXPECT_EQ(JsonNumber(NAN), "null");
  EXPECT_EQ(JsonNumber(INFINITY), "null");
}

}  // namespace
}  // namespace downpour

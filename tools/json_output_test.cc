#include "tools/json_output.h"

#include <cmath>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::tools {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

TEST(JsonOutputTest, HistoryRoundTripsWithNaN) {
  proto::GetHistoryResponse history;
  history.set_interval_seconds(1);
  proto::HistorySample* s = history.add_samples();
  s->set_time_seconds(2.5);
  proto::MemberSample* m = s->add_members();
  m->set_role("worker");
  m->mutable_report()->set_loss(NAN);
  m->mutable_report()->set_step(7);
  const std::string json = ToJson(history);
  EXPECT_THAT(json, HasSubstr("\"time_seconds\": 2.5"));
  EXPECT_THAT(json, HasSubstr("\"loss\": \"NaN\""));
  proto::GetHistoryResponse back;
  ASSERT_THAT(FromJson(json, "history.json", &back), IsOk());
  EXPECT_EQ(back.samples(0).members(0).report().step(), 7u);
  EXPECT_TRUE(std::isnan(back.samples(0).members(0).report().loss()));
}

TEST(JsonOutputTest, BadJsonNamesTheFile) {
  proto::GetHistoryResponse back;
  EXPECT_THAT(
      FromJson("{\"nope\": 1}", "run/history.json", &back),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("run/history.json is not a GetHistoryResponse")));
}

TEST(JsonOutputTest, StatusJsonHasEveryMember) {
  proto::ClusterStatusResponse cluster;
  proto::MemberStatus* ps = cluster.add_members();
  ps->set_role("ps");
  ps->set_address("127.0.0.1:7001");
  proto::MemberStatus* w = cluster.add_members();
  w->set_role("worker");
  w->set_index(1);
  MemberStatuses statuses;
  proto::GetStatusResponse s;
  (*s.mutable_rates())["pulls"] = 12.5;
  s.set_staleness_p99(7);
  statuses.push_back(s);
  statuses.push_back(absl::UnavailableError("refused \"x\""));
  std::vector<absl::StatusOr<std::string>> health = {
      std::string("SERVING"), absl::UnavailableError("down")};
  const std::string json =
      StatusJson("127.0.0.1:7000", cluster, statuses, health);
  EXPECT_THAT(json, HasSubstr("\"coordinator\": \"127.0.0.1:7000\""));
  EXPECT_THAT(json, HasSubstr("\"health\": \"SERVING\""));
  EXPECT_THAT(json, HasSubstr("\"pulls\": 12.5"));
  EXPECT_THAT(json, HasSubstr("\"staleness_p99\": 7"));
  EXPECT_THAT(json, HasSubstr("\"status_error\": \"refused \\\"x\\\"\""));
  EXPECT_THAT(json, HasSubstr("\"health\": \"error: down\""));
}

TEST(JsonStringTest, Escapes) {
  EXPECT_EQ(JsonString("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

}  // namespace
}  // namespace downpour::tools

#include "coordinator/metrics_history.h"

#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

proto::ClusterStatusResponse Status(double uptime, uint64_t step) {
  proto::ClusterStatusResponse status;
  status.set_uptime_seconds(uptime);
  proto::MemberStatus* worker = status.add_members();
  worker->set_role("worker");
  worker->set_index(0);
  worker->set_registered(true);
  worker->set_alive(true);
  worker->mutable_report()->set_step(step);
  worker->mutable_report()->set_loss(0.5);
  worker->mutable_report()->set_staleness_p50(1);
  worker->mutable_report()->set_staleness_p99(4);
  worker->mutable_report()->set_staleness_max(6);
  proto::MemberStatus* never = status.add_members();
  never->set_role("ps");
  never->set_index(1);
  never->set_registered(false);
  return status;
}

MetricsHistory::Options Options(int capacity) {
  MetricsHistory::Options options;
  options.capacity = capacity;
  options.interval_s = 0.5;
  options.clock = [] { return absl::FromUnixSeconds(1700000000); };
  return options;
}

TEST(MetricsHistoryTest, KeepsRegisteredMembersOfEachSample) {
  MetricsHistory history(Options(10));
  history.Record(Status(1.0, 10));
  proto::GetHistoryResponse got = history.Get(0);
  ASSERT_EQ(got.samples_size(), 1);
  EXPECT_EQ(got.interval_seconds(), 0.5);
  EXPECT_EQ(got.capacity(), 10);
  const proto::HistorySample& s = got.samples(0);
  EXPECT_EQ(s.time_seconds(), 1.0);
  EXPECT_EQ(s.unix_seconds(), 1700000000);
  ASSERT_EQ(s.members_size(), 1);  // the never-registered ps is left out
  EXPECT_EQ(s.members(0).role(), "worker");
  EXPECT_EQ(s.members(0).report().step(), 10u);
  EXPECT_EQ(s.members(0).report().staleness_p50(), 1);
  EXPECT_EQ(s.members(0).report().staleness_p99(), 4);
  EXPECT_EQ(s.members(0).report().staleness_max(), 6);
  EXPECT_TRUE(s.members(0).alive());
}

TEST(MetricsHistoryTest, BoundedDropsTheOldest) {
  MetricsHistory history(Options(3));
  for (int i = 1; i <= 5; ++i) history.Record(Status(i, i * 100));
  proto::GetHistoryResponse got = history.Get(0);
  ASSERT_EQ(got.samples_size(), 3);
  EXPECT_EQ(got.samples(0).time_seconds(), 3);
  EXPECT_EQ(got.samples(2).time_seconds(), 5);
  EXPECT_EQ(got.dropped(), 2u);
  EXPECT_EQ(history.size(), 3u);
}

TEST(MetricsHistoryTest, SinceReturnsOnlyNewerSamples) {
  MetricsHistory history(Options(10));
  for (int i = 1; i <= 4; ++i) history.Record(Status(i, i));
  proto::GetHistoryResponse got = history.Get(2.0);
  ASSERT_EQ(got.samples_size(), 2);
  EXPECT_EQ(got.samples(0).time_seconds(), 3);
}

TEST(MetricsHistoryTest, NowSampleIsAddedButNotKept) {
  MetricsHistory history(Options(10));
  history.Record(Status(1, 1));
  const proto::ClusterStatusResponse now = Status(1.5, 7);
  proto::GetHistoryResponse got = history.Get(0, &now);
  ASSERT_EQ(got.samples_size(), 2);
  EXPECT_EQ(got.samples(1).members(0).report().step(), 7u);
  EXPECT_EQ(history.size(), 1u);
  const proto::ClusterStatusResponse stale = Status(0.5, 7);
  EXPECT_EQ(history.Get(0, &stale).samples_size(), 1);
}

TEST(HistorySamplerTest, SamplesAtStartAndStopsOnDestruction) {
  MetricsHistory history(Options(10));
  int calls = 0;
  {
    HistorySampler sampler(
        &history, [&] { return Status(++calls, 1); }, absl::Hours(1));
  }
  EXPECT_EQ(history.size(), 1u);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace downpour::coordinator

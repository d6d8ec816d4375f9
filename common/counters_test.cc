#include "common/counters.h"

#include "gtest/gtest.h"

namespace downpour {
namespace {

// A clock the test moves by hand.
struct FakeClock {
  absl::Time now = absl::FromUnixSeconds(1000);
  std::function<absl::Time()> Fn() {
    return [this] { return now; };
  }
};

Counters::Options WithClock(FakeClock& clock) {
  Counters::Options options;
  options.clock = clock.Fn();
  options.window = absl::Seconds(10);
  return options;
}

TEST(LatencyHistogramTest, EmptyHasZeroQuantiles) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Quantile(0.5), 0);
}

TEST(LatencyHistogramTest, QuantilesWithinBucketError) {
  LatencyHistogram h;
  // 1..1000 ms, uniformly.
  for (int ms = 1; ms <= 1000; ++ms) h.Record(ms / 1000.0);
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_NEAR(h.Quantile(0.5), 0.5, 0.5 * 0.19);
  EXPECT_NEAR(h.Quantile(0.99), 0.99, 0.99 * 0.19);
  EXPECT_LE(h.Quantile(1.0), 1.0);
  EXPECT_DOUBLE_EQ(h.max(), 1.0);
}

TEST(LatencyHistogramTest, HugeTinyAndNegativeValuesLandInEndBuckets) {
  LatencyHistogram h;
  h.Record(-1);
  h.Record(0);
  h.Record(1e6);
  EXPECT_EQ(h.count(), 3u);
  EXPECT_DOUBLE_EQ(h.Quantile(1.0), 1e6);
  EXPECT_LT(h.Quantile(0.1), 1e-6);
}

TEST(LatencyHistogramTest, BucketBoundsGrowGeometrically) {
  EXPECT_EQ(LatencyHistogram::BucketLowerBound(0), 0);
  EXPECT_DOUBLE_EQ(LatencyHistogram::BucketLowerBound(1), 1e-6);
  EXPECT_DOUBLE_EQ(LatencyHistogram::BucketLowerBound(5), 2e-6);
}

TEST(CountersTest, AddSetGet) {
  Counters c;
  c.stats().pulls.Increment(2);
  c.stats().pulls.Increment(3);
  c.stats().blocks.Set(7);
  EXPECT_EQ(c.Get("pulls"), 5);
  EXPECT_EQ(c.Get("blocks"), 7);
  EXPECT_EQ(c.Get("missing"), 0);
  EXPECT_EQ(c.Snapshot().size(), 2u);
}

TEST(StalenessHistogramTest, EmptyIsAllZero) {
  StalenessHistogram h;
  const StalenessSummary s = h.Summary();
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.p50, 0u);
  EXPECT_EQ(s.p99, 0u);
  EXPECT_EQ(s.max, 0u);
  EXPECT_EQ(s.mean, 0);
  EXPECT_TRUE(h.Buckets().empty());
}

TEST(StalenessHistogramTest, QuantilesOfAKnownMultisetByHand) {
  // 100 values: 50 x 0, 30 x 1, 15 x 2, 4 x 5, 1 x 40. Sorted, ranks 1-50 are
  // 0, 51-80 are 1, 81-95 are 2, 96-99 are 5 and 100 is 40. Nearest rank:
  // p50 = value at rank 50 = 0, p99 = rank 99 = 5, p100 = 40.
  // Mean = (30 + 30 + 20 + 40) / 100 = 1.2.
  StalenessHistogram h;
  for (int i = 0; i < 50; ++i) h.Record(0);
  for (int i = 0; i < 30; ++i) h.Record(1);
  for (int i = 0; i < 15; ++i) h.Record(2);
  for (int i = 0; i < 4; ++i) h.Record(5);
  h.Record(40);
  const StalenessSummary s = h.Summary();
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.p50, 0u);
  EXPECT_EQ(s.p99, 5u);
  EXPECT_EQ(s.max, 40u);
  EXPECT_DOUBLE_EQ(s.mean, 1.2);
  EXPECT_EQ(h.Quantile(0.51), 1u);  // rank 51
  EXPECT_EQ(h.Quantile(0.95), 2u);  // rank 95
  EXPECT_EQ(h.Quantile(0.96), 5u);  // rank 96
  EXPECT_EQ(h.Quantile(1.0), 40u);
  EXPECT_EQ(h.Quantile(0.0), 0u);  // rank 1
  const std::vector<uint64_t> buckets = h.Buckets();
  ASSERT_EQ(buckets.size(), 41u);  // trailing empty buckets left out
  EXPECT_EQ(buckets[0], 50u);
  EXPECT_EQ(buckets[1], 30u);
  EXPECT_EQ(buckets[5], 4u);
  EXPECT_EQ(buckets[40], 1u);
}

TEST(StalenessHistogramTest, ExactUpTo255ThenWithinNinePercent) {
  StalenessHistogram h;
  h.Record(255);
  EXPECT_EQ(h.Quantile(0.5), 255u);
  h.Record(300);
  h.Record(100000);
  // Rank 2 of {255, 300, 100000}: 300's bucket [280, 305) answers its top.
  EXPECT_GE(h.Quantile(0.5), 300u);
  EXPECT_LE(h.Quantile(0.5), 300u * 1.09);
  EXPECT_EQ(h.Quantile(1.0), 100000u);  // never above the exact max
  EXPECT_EQ(h.max(), 100000u);
  h.Record(uint64_t{1} << 62);  // the last bucket takes anything
  EXPECT_EQ(h.Quantile(1.0), uint64_t{1} << 62);
}

TEST(StalenessHistogramTest, BucketBounds) {
  EXPECT_EQ(StalenessHistogram::BucketLowerBound(0), 0u);
  EXPECT_EQ(StalenessHistogram::BucketLowerBound(255), 255u);
  EXPECT_EQ(StalenessHistogram::BucketLowerBound(256), 256u);
  EXPECT_EQ(StalenessHistogram::BucketLowerBound(256 + 8), 512u);
  for (int i = 256; i + 1 < StalenessHistogram::kBuckets; ++i) {
    EXPECT_LT(StalenessHistogram::BucketLowerBound(i),
              StalenessHistogram::BucketLowerBound(i + 1));
  }
}

TEST(StalenessHistogramTest, MergeAddsCountsAndKeepsTheMax) {
  StalenessHistogram a, b;
  a.Record(1);
  b.Record(3);
  b.Record(7);
  a.Merge(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.max(), 7u);
  EXPECT_EQ(a.Quantile(0.5), 3u);
  EXPECT_DOUBLE_EQ(a.mean(), 11.0 / 3);
}

TEST(CountersTest, RecordsStaleness) {
  Counters c;
  c.RecordStaleness(0);
  c.RecordStaleness(3);
  c.RecordStaleness(100);
  const StalenessHistogram h = c.Staleness();
  EXPECT_EQ(h.count(), 3u);
  EXPECT_EQ(h.Quantile(0.5), 3u);
  EXPECT_EQ(h.max(), 100u);
}

TEST(CountersTest, RatesSinceStartWhenYoungerThanTheWindow) {
  FakeClock clock;
  Counters c(WithClock(clock));
  c.stats().pulls.Increment(40);
  c.stats().blocks.Set(3);  // a gauge has no rate
  clock.now += absl::Seconds(4);
  Counters::RateSnapshot r = c.Rates();
  EXPECT_DOUBLE_EQ(r.window_seconds, 4);
  EXPECT_DOUBLE_EQ(r.per_second.at("pulls"), 10);
  EXPECT_EQ(r.per_second.count("blocks"), 0u);
}

TEST(CountersTest, RatesFollowTheRecentWindow) {
  FakeClock clock;
  Counters c(WithClock(clock));
  // 100/s for 30 s, then 10/s for 20 s, sampled every second.
  for (int s = 0; s < 50; ++s) {
    c.stats().pushes.Increment(s < 30 ? 100 : 10);
    clock.now += absl::Seconds(1);
    c.Rates();
  }
  Counters::RateSnapshot r = c.Rates();
  EXPECT_GE(r.window_seconds, 10);
  EXPECT_LE(r.window_seconds, 11);
  EXPECT_NEAR(r.per_second.at("pushes"), 10, 0.01);
}

TEST(CountersTest, RatesWithNoTimePassedAreZero) {
  FakeClock clock;
  Counters c(WithClock(clock));
  c.stats().pulls.Increment(5);
  EXPECT_EQ(c.Rates().per_second.at("pulls"), 0);
}

TEST(CountersTest, LatenciesCoverTheLastWindows) {
  FakeClock clock;
  Counters c(WithClock(clock));
  for (int i = 0; i < 100; ++i) c.RecordLatency("called:Pull", 0.100);
  clock.now += absl::Seconds(11);  // old window becomes "previous"
  for (int i = 0; i < 100; ++i) c.RecordLatency("called:Pull", 0.001);
  c.RecordLatency("served:Push", 0.5);
  std::vector<LatencySummary> l = c.Latencies();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].name, "called:Pull");
  EXPECT_EQ(l[0].count, 200u);
  EXPECT_EQ(l[0].total_count, 200u);
  EXPECT_NEAR(l[0].p50_s, 0.001, 0.001 * 0.19);
  EXPECT_NEAR(l[0].p99_s, 0.1, 0.1 * 0.19);
  EXPECT_DOUBLE_EQ(l[0].max_s, 0.1);
  EXPECT_EQ(l[1].name, "served:Push");

  clock.now += absl::Seconds(25);  // two idle windows: nothing recent
  l = c.Latencies();
  EXPECT_EQ(l[0].count, 0u);
  EXPECT_EQ(l[0].total_count, 200u);
  EXPECT_EQ(l[0].p99_s, 0);
  // The since-start buckets keep every call: 100 at <= 1 ms, 100 at <= 100
  // ms; one at <= 0.5 s.
  ASSERT_EQ(l[0].buckets.size(), kLatencyBucketBounds.size() + 1);
  EXPECT_EQ(l[0].buckets[3], 100u);  // 1 ms: at most 0.001
  EXPECT_EQ(l[0].buckets[9], 100u);  // 100 ms: at most 0.1
  uint64_t all = 0;
  for (uint64_t n : l[0].buckets) all += n;
  EXPECT_EQ(all, 200u);
  EXPECT_NEAR(l[0].total_s, 100 * 0.101, 1e-9);
  EXPECT_EQ(l[1].buckets[11], 1u);  // 0.5 s
  c.RecordLatency("served:Push", 60);
  EXPECT_EQ(c.Latencies()[1].buckets.back(), 1u);  // above 10 s
}

}  // namespace
}  // namespace downpour

#include "tools/cluster_tables.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

proto::ClusterStatusResponse Cluster() {
  proto::ClusterStatusResponse c;
  c.set_placement_epoch(2);
  c.set_uptime_seconds(30);
  auto add = [&](const std::string& role, int index,
                 const std::string& address) {
    proto::MemberStatus* m = c.add_members();
    m->set_role(role);
    m->set_index(index);
    m->set_address(address);
    m->set_registered(true);
    m->set_alive(true);
    return m;
  };
  add("ps", 0, "10.0.0.2:7001")->mutable_report()->set_pushes(100);
  add("ps", 1, "10.0.0.3:7001")->set_alive(false);
  proto::MemberReport* w = add("worker", 0, "10.0.0.4:7101")->mutable_report();
  w->set_step(740);
  w->set_examples_per_sec(11888);
  w->set_loss(0.2985);
  w->set_accuracy(0.9305);
  w->set_mean_staleness(1.25);
  w->set_pushes(40);
  w->set_staleness_p50(1);
  w->set_staleness_p99(4);
  w->set_staleness_max(6);
  w->set_device("cpu");
  return c;
}

proto::GetStatusResponse WithRates(double pulls, const std::string& latency) {
  proto::GetStatusResponse s;
  (*s.mutable_rates())["pulls"] = pulls;
  (*s.mutable_rates())["pushes"] = pulls / 2;
  (*s.mutable_rates())["applied_updates"] = pulls * 3;
  (*s.mutable_rates())["bytes_in"] = 2e6;
  (*s.mutable_rates())["bytes_out"] = 1e6;
  (*s.mutable_counters())["rejected_pushes"] = 2;
  s.set_memory_rss_bytes(50e6);
  s.set_staleness_p50(2);
  s.set_staleness_p99(5);
  s.set_staleness_max(9);
  proto::RpcLatency* l = s.add_latencies();
  l->set_name(latency);
  l->set_count(10);
  l->set_p50_seconds(0.0012);
  l->set_p99_seconds(0.0085);
  return s;
}

MemberStatuses Statuses() {
  MemberStatuses s;
  s.push_back(WithRates(40, "served:ParameterServer/Push"));
  s.push_back(absl::UnavailableError("connection refused"));
  s.push_back(WithRates(20, "called:ParameterServer/Push"));
  return s;
}

TEST(SparklineTest, ScalesBetweenMinAndMax) {
  EXPECT_EQ(Sparkline({0, 1, 2, 3, 4, 5, 6, 7}, 60), "▁▂▃▄▅▆▇█");
  EXPECT_EQ(Sparkline({1, NAN, 1}, 60), "▄ ▄");
  EXPECT_EQ(Sparkline({0, 7, 0}, 2), "█▁");
  EXPECT_EQ(Sparkline({}, 10), "");
}

TEST(WorkersTableTest, RatesLatencyAndMemory) {
  proto::ClusterStatusResponse cluster = Cluster();
  for (auto& m : *cluster.mutable_members()) {
    if (m.role() == "worker") {
      m.add_parts(0);
      m.add_parts(3);  // adopted from a dead worker
    }
  }
  const std::string table = FormatWorkersTable(cluster, Statuses());
  EXPECT_THAT(table, HasSubstr("10.0.0.4:7101"));
  EXPECT_THAT(table, HasSubstr(" 0,3 "));
  EXPECT_THAT(table, HasSubstr("0.9305"));
  EXPECT_THAT(table, HasSubstr("STALE50/99/MAX"));
  EXPECT_THAT(table, HasSubstr(" 1/4/6 "));             // staleness p50/p99/max
  EXPECT_THAT(table, HasSubstr("20.0"));                // pulls/s
  EXPECT_THAT(table, HasSubstr("1.2/8.5"));             // push p50/p99 ms
  EXPECT_THAT(table, HasSubstr("50.0 MB"));             // RSS
  EXPECT_THAT(table, Not(HasSubstr("10.0.0.2:7001")));  // no ps rows
}

TEST(ShardsTableTest, BlocksBytesRatesAndHottestBlocks) {
  proto::GetPlacementResponse placement;
  placement.set_epoch(2);
  proto::ShardInfo* s0 = placement.add_shards();
  s0->set_index(0);
  s0->add_block_ids(0);
  s0->add_block_ids(2);
  proto::ShardInfo* s1 = placement.add_shards();
  s1->set_index(1);
  s1->add_block_ids(1);
  proto::DescribeModelResponse model;
  model.set_num_params(300);
  for (int i = 0; i < 3; ++i) {
    proto::BlockInfo* b = model.add_blocks();
    b->set_id(i);
    b->set_tensor(i == 2 ? "fc1.bias" : "fc1.weight");
    b->set_floats(100);
  }
  const std::string table =
      FormatShardsTable(Cluster(), Statuses(), placement, model,
                        {{0, 0, 50, 5.0}, {1, 1, 80, 0.0}, {2, 0, 70, 9.5}}, 2);
  EXPECT_THAT(table, HasSubstr("placement epoch 2, 3 blocks, 300 parameters"));
  EXPECT_THAT(table, HasSubstr("800 B"));  // ps 0 holds 200 floats
  EXPECT_THAT(table, HasSubstr("120.0"));  // applied updates/s
  EXPECT_THAT(table, HasSubstr("STALE50/99/MAX"));
  EXPECT_THAT(table, HasSubstr(" 2/5/9 "));  // ps 0's staleness p50/p99/max
  EXPECT_THAT(
      table,
      HasSubstr("ps 1 at 10.0.0.3:7001: no status (connection refused)"));
  // Hottest first, only the top 2.
  const size_t hottest = table.find("fc1.bias");
  ASSERT_NE(hottest, std::string::npos);
  EXPECT_LT(hottest, table.find("     0  fc1.weight"));
  EXPECT_THAT(table, Not(HasSubstr("     1  fc1.weight")));
  EXPECT_THAT(table, Not(HasSubstr("Suspect workers")));
}

TEST(ShardsTableTest, NamesTheWorkersWhosePushesWereRefused) {
  MemberStatuses statuses = Statuses();
  for (auto& status : statuses) {
    if (!status.ok()) continue;
    (*status->mutable_counters())["suspect_pushes_worker_2"] = 26538;
    (*status->mutable_counters())["suspect_pushes_worker_0"] = 0;
    break;
  }
  const std::string table =
      FormatShardsTable(Cluster(), statuses, proto::GetPlacementResponse(),
                        proto::DescribeModelResponse(), {}, 2);
  EXPECT_THAT(table, HasSubstr("Suspect workers (robustness bounds): ps 0: "
                               "worker 2 (26538 pushes refused)"));
  EXPECT_THAT(table, Not(HasSubstr("worker 0 (")));
}

TEST(ShardsTableTest, SparseTablesPerPs) {
  EXPECT_THAT(
      FormatShardsTable(Cluster(), Statuses(), proto::GetPlacementResponse(),
                        proto::DescribeModelResponse(), {}, 2),
      Not(HasSubstr("Sparse tables")))
      << "a dense model";
  MemberStatuses statuses = Statuses();
  for (auto& status : statuses) {
    if (!status.ok()) continue;
    auto& c = *status->mutable_counters();
    c["sparse_tables"] = 1;
    c["sparse_rows"] = 123456;
    c["sparse_bytes"] = 6.0e6;
    c["sparse_bytes_per_row"] = 48.6;
    c["sparse_nonzero"] = 2345;
    c["sparse_rows_created"] = 123456;
    c["sparse_row_updates"] = 987654;
    c["sparse_pending_keys"] = 4321;
    c["sparse_filtered_updates"] = 8765;
    c["sparse_evicted_rows"] = 76543;
    auto& r = *status->mutable_rates();
    r["sparse_pull_keys"] = 250000;
    r["sparse_push_keys"] = 200000;
    r["sparse_rows_created"] = 12.5;
    break;
  }
  const std::string table =
      FormatShardsTable(Cluster(), statuses, proto::GetPlacementResponse(),
                        proto::DescribeModelResponse(), {}, 2);
  EXPECT_THAT(table, HasSubstr("Sparse tables:"));
  EXPECT_THAT(table, HasSubstr("PULL-KEY/S"));
  EXPECT_THAT(table, HasSubstr(" 123456 "));
  EXPECT_THAT(table, HasSubstr(" 48.6 "));
  EXPECT_THAT(table, HasSubstr(" 12.5 "));
  EXPECT_THAT(table, HasSubstr(" 250000 "));
  EXPECT_THAT(table, HasSubstr(" 200000 "));
  EXPECT_THAT(table, HasSubstr(" 987654"));
  EXPECT_THAT(table, HasSubstr(" 4321 "));
  EXPECT_THAT(table, HasSubstr(" 8765 "));
  EXPECT_THAT(table, HasSubstr("EVICTED"));
  EXPECT_THAT(table, HasSubstr(" 76543"));
}

TEST(WatchFrameTest, TotalsSparklinesAndMembers) {
  proto::GetHistoryResponse history;
  for (int t = 0; t < 3; ++t) {
    proto::HistorySample* s = history.add_samples();
    proto::MemberSample* m = s->add_members();
    m->set_role("worker");
    m->set_alive(true);
    m->mutable_report()->set_step(10 * (t + 1));
    m->mutable_report()->set_examples_per_sec(1000 * t);
    m->mutable_report()->set_accuracy(0.5 + 0.1 * t);
  }
  const std::string frame =
      FormatWatchFrame("127.0.0.1:7000", Cluster(), Statuses(), history);
  EXPECT_THAT(
      frame,
      HasSubstr("coordinator 127.0.0.1:7000  up 30 s  placement epoch 2"));
  EXPECT_THAT(frame,
              HasSubstr("workers 1/1 running  steps 740  11888 examples/s"));
  EXPECT_THAT(frame, HasSubstr("best test acc 0.9305"));
  EXPECT_THAT(frame, HasSubstr("examples/s  ▁▅█"));
  EXPECT_THAT(frame, HasSubstr("DEAD"));
}

TEST(DescribeHealthTest, ServingPsWithAFailedCheckpointIsDegraded) {
  proto::GetStatusResponse status;
  MemberHealth fine = DescribeHealth(std::string("SERVING"), status);
  EXPECT_EQ(fine.text, "SERVING");
  EXPECT_TRUE(fine.serving);
  EXPECT_FALSE(fine.degraded);

  status.set_last_checkpoint_error(
      "write checkpoint: cannot write 'x': No space left on device");
  MemberHealth degraded = DescribeHealth(std::string("SERVING"), status);
  EXPECT_TRUE(degraded.serving);
  EXPECT_TRUE(degraded.degraded);
  EXPECT_EQ(degraded.text,
            "DEGRADED (serving, but its last checkpoint failed: write "
            "checkpoint: cannot write 'x': No space left on device)");

  // Not serving, or not answering: that, whatever the Status says.
  MemberHealth down = DescribeHealth(std::string("NOT_SERVING"), status);
  EXPECT_EQ(down.text, "NOT_SERVING");
  EXPECT_FALSE(down.serving || down.degraded);
  MemberHealth gone =
      DescribeHealth(absl::UnavailableError("connection refused"),
                     absl::UnavailableError("connection refused"));
  EXPECT_EQ(gone.text, "connection refused");
  EXPECT_FALSE(gone.answered || gone.serving || gone.degraded);
}

}  // namespace
}  // namespace downpour::tools

// ConsistencyGate: the route of a push, bsp sparse rounds merged, and the
// reasons a held push gives.
#include "server/consistency_gate.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using Route = ConsistencyGate::Route;

Config BspConfig() {
  Config config;
  config.model.type = ModelType::kSparseLinear;
  config.model.task = Task::kBinary;
  config.model.sparse_buckets = 64;
  config.cluster.workers.assign(2, "127.0.0.1:0");
  config.cluster.ps.assign(1, "127.0.0.1:0");
  config.optimizer.type = OptimizerType::kSgd;
  config.training.consistency = ConsistencyMode::kBsp;
  return config;
}

// Rows of sparse table 0 for a round: `keys` with gradient `g` each.
SparseTables::DecodedRows RowsOf(const std::vector<uint64_t>& keys, float g) {
  SparseTables::DecodedRows rows;
  rows.keys = keys;
  rows.grads.assign(keys.size(), g);
  return rows;
}

TEST(ConsistencyGateTest, RoutesBspPushesByWhetherTheWorkerIsCounted) {
  Counters counters;
  ConsistencyGate gate(BspConfig(), 0, &counters);
  EXPECT_EQ(gate.RouteOf(0, /*tracked=*/false), Route::kDirect);
  EXPECT_EQ(gate.RouteOf(0, true), Route::kAwaitCounting);
  EXPECT_EQ(gate.RouteOf(-1, true), Route::kDirect);  // a tool
  gate.SetActiveWorkers({0, 1});
  EXPECT_EQ(gate.RouteOf(0, true), Route::kRound);
  EXPECT_THAT(gate.NotCountedError(3),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("bsp: worker 3 is not among ps 0's active")));

  Config async = BspConfig();
  async.training.consistency = ConsistencyMode::kAsync;
  ConsistencyGate direct(async, 0, &counters);
  EXPECT_EQ(direct.RouteOf(0, true), Route::kDirect);
}

TEST(ConsistencyGateTest, SetActiveWorkersReportsOnlyAChange) {
  Counters counters;
  ConsistencyGate gate(BspConfig(), 0, &counters);
  EXPECT_TRUE(gate.SetActiveWorkers({0, 1}));
  EXPECT_FALSE(gate.SetActiveWorkers({1, 0}));
  EXPECT_TRUE(gate.SetActiveWorkers({0}));
}

TEST(ConsistencyGateTest, ReleaseEndsHoldsAndBumpsTheGeneration) {
  Counters counters;
  ConsistencyGate gate(BspConfig(), 0, &counters);
  const uint64_t before = gate.generation();
  EXPECT_FALSE(gate.released());
  gate.ReleaseHolds();
  EXPECT_TRUE(gate.released());
  EXPECT_GT(gate.generation(), before);
}

TEST(ConsistencyGateTest, SparseRoundIsTheMeanOverTheUnionOfKeys) {
  Counters counters;
  const Config config = BspConfig();
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec, IsOk());
  absl::StatusOr<std::unique_ptr<SparseTables>> tables =
      SparseTables::Create(config, 0, *spec, nullptr, &counters);
  ASSERT_THAT(tables, IsOk());
  ConsistencyGate gate(config, 0, &counters);
  gate.SetActiveWorkers({0, 1});

  const uint32_t round = ConsistencyGate::SparseRoundId(0);
  proto::PushRequest a;
  a.set_worker_id(0);
  a.set_sequence(1);
  a.add_sparse()->set_table(0);
  proto::PushRequest b = a;
  b.set_worker_id(1);
  for (const auto& [request, keys, g] :
       {std::make_tuple(&a, std::vector<uint64_t>{1, 3}, 2.0f),
        std::make_tuple(&b, std::vector<uint64_t>{3, 5}, 4.0f)}) {
    const wire::PushView view = wire::ViewOf(*request);
    int64_t bytes = 0;
    const auto gradients = ConsistencyGate::BspGradients(view, &bytes);
    ASSERT_EQ(gradients.size(), 1u);
    EXPECT_EQ(gradients[0].block, round);
    std::vector<SparseTables::DecodedRows> rows;
    rows.push_back(RowsOf(keys, g));
    EXPECT_EQ(gate.Contribute(view, gradients, &rows),
              Consistency::Contribution::kAdded);
    EXPECT_THAT(rows, IsEmpty());
  }
  ASSERT_THAT(gate.CompleteRounds(), ElementsAre(round));
  ConsistencyGate::SparseRound merged;
  EXPECT_THAT(gate.TakeSparseRound(round, **tables, &merged),
              ElementsAre(Pair(0, 1u), Pair(1, 1u)));
  EXPECT_EQ(merged.table, 0u);
  EXPECT_THAT(merged.keys, ElementsAre(1, 3, 5));
  // Key 3 from both: (2 + 4) / 2; the others count 0 for the one that did
  // not push them.
  EXPECT_THAT(merged.mean, ElementsAre(1.0f, 3.0f, 2.0f));
  EXPECT_THAT(merged.counts, ElementsAre(1u, 2u, 1u));
  EXPECT_THAT(gate.CompleteRounds(), IsEmpty());
}

TEST(ConsistencyGateTest, BspHoldErrorNamesTheMissingWorkers) {
  Counters counters;
  ConsistencyGate gate(BspConfig(), 0, &counters);
  gate.SetActiveWorkers({0, 1});
  const float g = 1.0f;
  const std::vector<Consistency::BlockGradient> gradients = {
      {0, &g, 1, WireEncoding::kFloat32}};
  proto::PushRequest request;
  request.set_worker_id(0);
  request.set_sequence(1);
  std::vector<SparseTables::DecodedRows> none;
  EXPECT_EQ(gate.Contribute(wire::ViewOf(request), gradients, &none),
            Consistency::Contribution::kAdded);
  EXPECT_THAT(
      gate.BspHoldError(0, gradients, Consistency::Contribution::kAdded),
      StatusIs(absl::StatusCode::kUnavailable,
               HasSubstr("bsp: worker 0's push to block 0 waits for "
                         "the round (missing workers [1])")));
  EXPECT_EQ(gate.RoundVersion(0), 0u);
  gate.SetRoundVersion(0, 9);
  EXPECT_EQ(gate.RoundVersion(0), 9u);
}

TEST(ConsistencyGateTest, SspAppliedRecordsTheLargestLead) {
  Config config = BspConfig();
  config.training.consistency = ConsistencyMode::kSsp;
  config.training.max_staleness = 1;
  Counters counters;
  ConsistencyGate gate(config, 0, &counters);
  gate.SetActiveWorkers({0, 1});
  const uint64_t before = gate.generation();
  gate.Applied(0, {4}, /*clock=*/1);
  gate.Applied(0, {4}, /*clock=*/2);
  EXPECT_EQ(counters.Get("ssp_max_lead"), 1);
  EXPECT_EQ(gate.generation(), before + 2);
  const std::optional<Consistency::Wait> wait = gate.SspWaitFor(0, {4}, 3);
  ASSERT_TRUE(wait.has_value());
  EXPECT_THAT(gate.SspHoldError(0, *wait),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("ssp: worker 0's push to block 4 waits for "
                                 "worker 1 (clock 0 vs 2, max_staleness 1)")));
}

TEST(ConsistencyGateTest, HoldCountsAPushOnceAndEndsOnAChangeOrRelease) {
  Counters counters;
  ConsistencyGate gate(BspConfig(), 0, &counters);
  absl::Mutex mu;
  mu.Lock();
  bool waited = false;
  EXPECT_FALSE(gate.Hold(&mu, absl::Now() + absl::Milliseconds(20), &waited));
  EXPECT_TRUE(waited);
  EXPECT_EQ(counters.Get("bsp_waits"), 1);
  // Another thread bumps the generation under the mutex Hold releases.
  std::thread bumper([&] {
    absl::MutexLock other(&mu);
    gate.Bump();
  });
  EXPECT_TRUE(gate.Hold(&mu, absl::InfiniteFuture(), &waited));
  EXPECT_EQ(counters.Get("bsp_waits"), 1);  // counted once per push
  mu.Unlock();
  bumper.join();
  mu.Lock();
  gate.ReleaseHolds();
  EXPECT_FALSE(gate.Hold(&mu, absl::InfiniteFuture(), &waited));
  mu.Unlock();
}

}  // namespace
}  // namespace downpour::server

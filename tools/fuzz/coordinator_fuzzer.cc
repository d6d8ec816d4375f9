// libFuzzer target: the coordinator's core (coordinator/cluster_state.h), the
// plain C++ that every Coordinator RPC forwards to (coordinator_service.cc
// is one call per handler).
//
// Each input is a sequence of requests applied to a fresh ClusterState of a
// small cluster (2 ps, 1 standby, 3 workers; no state file; a fake clock):
//
//   record := op:u8 length:u16le body[length]     (a short last body is cut)
//   op % 7:  0 RegisterServer  body = RegisterServerRequest bytes
//            1 RegisterWorker  body = RegisterWorkerRequest bytes
//            2 Heartbeat       body = HeartbeatRequest bytes
//            3 GetPlacement
//            4 ClusterStatus
//            5 time passes: body[0] seconds, then CheckLiveness
//            6 the coordinator stalled: GiveGrace(body[0] seconds)
// A body that is not its message's bytes is skipped, as gRPC would refuse it.
//
// Invariants, each an abort when broken: the members listed are exactly the
// configured ones (nothing a client sends adds one); a placement names only
// configured shards and real blocks, each block at most once; every error has
// a message; replies stay small (under kMaxReplyBytes).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/fake_clock.h"
#include "coordinator/cluster_state.h"
#include "proto/coordinator.pb.h"
#include "tools/fuzz/fuzz_util.h"

namespace downpour::fuzz {
namespace {

using coordinator::ClusterState;

// Replies of this small cluster are a few KB; what a client reports may
// add at most its request's bytes (inputs are at most -max_len).
constexpr size_t kMaxReplyBytes = 1 << 20;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "coordinator_fuzzer: invariant broken: %s\n",
               what.c_str());
  std::abort();
}

Config FuzzConfig() {
  Config config;
  config.cluster.coordinator = "127.0.0.1:0";
  config.cluster.ps = {"127.0.0.1:1", "127.0.0.1:2"};
  config.cluster.standby_ps = {"127.0.0.1:3"};
  config.cluster.workers = {"127.0.0.1:4", "127.0.0.1:5", "127.0.0.1:6"};
  config.model.layers = {6, 4, 3};
  config.model.block_size = 8;
  config.training.target_accuracy = 0.9;
  config.heartbeat.timeout_s = 3;
  config.coordinator.state_dir = "";  // no file
  return config;
}

const Config& TheConfig() {
  static const Config* config = new Config(FuzzConfig());
  return *config;
}

size_t NumBlocks() {
  static const size_t n = ModelSpec::Create(TheConfig().model)->blocks().size();
  return n;
}

template <typename T>
void CheckResult(const absl::StatusOr<T>& result, const char* what) {
  if (!result.ok()) {
    if (result.status().message().empty()) {
      Fail(std::string(what) + ": an error without a message");
    }
    return;
  }
  if (result->ByteSizeLong() > kMaxReplyBytes) {
    Fail(std::string(what) + ": reply of " +
         std::to_string(result->ByteSizeLong()) + " bytes");
  }
}

void CheckPlacement(const proto::GetPlacementResponse& placement) {
  std::set<uint32_t> seen;
  // The config's ps, then at most kMaxJoinedPs that joined (ps_server
  // --join), numbered in order.
  const int most = static_cast<int>(TheConfig().cluster.ps.size() +
                                    coordinator::ClusterState::kMaxJoinedPs);
  int expected = 0;
  for (const proto::ShardInfo& shard : placement.shards()) {
    if (shard.index() != expected++ || shard.index() >= most) {
      Fail("placement names shard " + std::to_string(shard.index()));
    }
    for (uint32_t id : shard.block_ids()) {
      if (id >= NumBlocks())
        Fail("placement names block " + std::to_string(id));
      if (!seen.insert(id).second) {
        Fail("placement names block " + std::to_string(id) + " twice");
      }
    }
  }
}

void CheckStatus(const proto::ClusterStatusResponse& status) {
  const Config& config = TheConfig();
  const size_t members = config.cluster.ps.size() +
                         config.cluster.standby_ps.size() +
                         config.cluster.workers.size();
  // Spares (ps that rejoined as standbys) add a bounded number of slots.
  const size_t spares = config.cluster.ps.size() + ClusterState::kExtraSpares;
  if (static_cast<size_t>(status.members_size()) < members ||
      static_cast<size_t>(status.members_size()) > members + spares) {
    Fail("status lists " + std::to_string(status.members_size()) +
         " members, the config " + std::to_string(members) + " plus at most " +
         std::to_string(spares) + " spares");
  }
  if (status.ByteSizeLong() > kMaxReplyBytes) Fail("status reply too large");
}

template <typename Request>
bool Parse(const uint8_t* body, size_t size, Request* request) {
  return request->ParseFromArray(body, static_cast<int>(size));
}

}  // namespace
}  // namespace downpour::fuzz

using namespace downpour::fuzz;  // NOLINT: the fuzzer entry points

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  QuietLogs();
  if (NumBlocks() == 0) Fail("no model");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  downpour::FakeClock clock;
  auto created = ClusterState::Create(
      {TheConfig(), &clock, [](const std::string&) { return false; }});
  if (!created.ok()) Fail(created.status().ToString());
  ClusterState& state = **created;
  size_t at = 0;
  while (at < size) {
    const auto [op, body, length] = NextRecord(data, size, &at);
    const int seconds = length > 0 ? body[0] : 1;
    switch (op % 7) {
      case 0: {
        downpour::proto::RegisterServerRequest r;
        if (Parse(body, length, &r))
          CheckResult(state.RegisterServer(r), "RegisterServer");
        break;
      }
      case 1: {
        downpour::proto::RegisterWorkerRequest r;
        if (Parse(body, length, &r))
          CheckResult(state.RegisterWorker(r), "RegisterWorker");
        break;
      }
      case 2: {
        downpour::proto::HeartbeatRequest r;
        if (Parse(body, length, &r))
          CheckResult(state.Heartbeat(r), "Heartbeat");
        break;
      }
      case 3:
        CheckPlacement(state.Placement());
        break;
      case 4:
        CheckStatus(state.Status());
        break;
      case 5:
        clock.SleepFor(absl::Seconds(seconds));
        state.CheckLiveness();
        break;
      case 6:
        state.GiveGrace(absl::Seconds(seconds));
        break;
    }
  }
  CheckPlacement(state.Placement());
  CheckStatus(state.Status());
  return 0;
}

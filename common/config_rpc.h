// The `rpc` section of the config: deadlines, how long a daemon waits for a
// peer, and how values travel between workers and ps.
#ifndef DOWNPOUR_COMMON_CONFIG_RPC_H_
#define DOWNPOUR_COMMON_CONFIG_RPC_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/wire_encoding.h"

namespace downpour {

// rpc.encoding is a WireEncoding (common/wire_encoding.h; WireEncodingName
// writes it). InvalidArgument as config.h describes for every choice for
// anything but float32, bf16, fp16.
absl::StatusOr<WireEncoding> ParseRpcEncoding(absl::string_view name);

// Push requests (each up to 4 MiB of blocks) a worker keeps in flight per ps
// shard, however many pushes are in flight: the client paces each push's
// requests by it, and the ps sizes its threads for held ssp/bsp pushes by it.
// It stays below the ps's exactly-once window (server/sequence_window.h
// kWidth, 64). Once the setting rpc.push_window; the one knob for pushes in
// flight is training.max_pushes_in_flight.
inline constexpr int kPushRequestsPerShard = 8;

struct RpcSection {
  // Deadline of each RPC. Default 5 s.
  double deadline_s = 5.0;
  // How long a daemon waits for a peer before it gives up with an error
  // (it reports what it waits for every few seconds). Default 60 s.
  double connect_timeout_s = 60.0;
  // How values travel between workers and ps, both ways: gradients in pushes
  // and parameters in pulls. "float32" (as they are), "bf16" or "fp16" (2
  // bytes a value, rounded to nearest even; the ps keeps float32 master
  // weights and optimizer state). Default kFloat32.
  WireEncoding encoding = WireEncoding::kFloat32;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `rpc`, in docs/CONFIG.md's order.
std::vector<ConfigField> RpcKeys(RpcSection* rpc);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_RPC_H_

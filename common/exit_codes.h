// The exit statuses every daemon uses (rpc/daemon.h includes this), apart
// so that a launcher can name them without linking the daemons' flags.
#ifndef DOWNPOUR_COMMON_EXIT_CODES_H_
#define DOWNPOUR_COMMON_EXIT_CODES_H_

namespace downpour {

// Exit statuses every daemon uses, so that a launcher, systemd or Kubernetes
// can tell a crash from a mistake (docs/OPERATIONS.md, "Exit statuses").
// 1: a failure a restart may cure (the cluster, the network, a final
// checkpoint that could not be written).
inline constexpr int kExitFailure = 1;
// 2: a deterministic refusal: a bad flag, config, model, data or backend, or
// a ps whose checkpoints are all corrupt (or of another format, shard or
// model): a restart fails the same way, so supervisors do not restart it.
inline constexpr int kExitConfig = 2;
// 3: a ps or standby that stood down because another daemon serves its shard
// now (it was declared dead while stopped or cut off, and replaced). Started
// again with the same flags, a ps rejoins as a spare standby by itself.
inline constexpr int kExitReplaced = 3;

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_EXIT_CODES_H_

// The `cluster` section: its keys, the enumeration of its addresses and the
// rule that no two daemons share one.
#include "common/config_cluster.h"

#include <algorithm>
#include <cstddef>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config_field.h"

namespace downpour {
namespace config_internal {
namespace {

constexpr size_t kMaxPs = 1024;       // cluster.ps, cluster.standby_ps
constexpr size_t kMaxWorkers = 4096;  // cluster.workers

}  // namespace

std::vector<ConfigField> ClusterKeys(ClusterSection* c) {
  return {AddressField("cluster.coordinator", &c->coordinator),
          AddressListField("cluster.ps", &c->ps, 1, kMaxPs),
          AddressListField("cluster.workers", &c->workers, 1, kMaxWorkers),
          AddressListField("cluster.standby_ps", &c->standby_ps, 0, kMaxPs),
          IntField("cluster.replication", &c->replication, {1, 3}),
          IntField("cluster.max_workers", &c->max_workers,
                   {0, static_cast<int64_t>(kMaxWorkers)})};
}

absl::Status CheckMaxWorkers(const ClusterSection& cluster) {
  if (cluster.max_workers == 0 ||
      static_cast<size_t>(cluster.max_workers) >= cluster.workers.size()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "cluster.max_workers ", cluster.max_workers, " is below the ",
      cluster.workers.size(),
      " cluster.workers: it counts every worker slot, the listed ones "
      "included. Set it to at least ",
      cluster.workers.size(), " (or 0: no worker joins)"));
}

// Standbys are left out, as they always were: checking them too would reject
// configs that load today, which is a change of its own.
absl::Status CheckDistinctAddresses(const ClusterSection& cluster) {
  std::map<std::string, std::string> owner;
  for (const ClusterAddress& use : ClusterAddresses(cluster)) {
    if (use.role == "standby" || absl::EndsWith(use.address, ":0")) continue;
    const auto [it, inserted] = owner.emplace(use.address, use.key);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(use.key, " '", use.address, "' is also ", it->second,
                       ": each daemon needs its own address (or port 0)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckReplication(const ClusterSection& cluster) {
  if (cluster.replication < 3) return absl::OkStatus();
  const size_t needed = 2 * cluster.ps.size();
  if (cluster.standby_ps.size() >= needed) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "cluster.replication 3 keeps two backups of every shard on standbys: ",
      cluster.ps.size(), " ps need ", needed,
      " cluster.standby_ps entries, the file lists ", cluster.standby_ps.size(),
      ". Add ", needed - cluster.standby_ps.size(),
      " standby_ps address(es), or set cluster.replication: 2 (one backup "
      "per shard)"));
}

}  // namespace config_internal

int WorkerSlots(const ClusterSection& cluster) {
  return std::max(static_cast<int>(cluster.workers.size()),
                  cluster.max_workers);
}

std::vector<ClusterAddress> ClusterAddresses(const ClusterSection& cluster) {
  std::vector<ClusterAddress> out = {
      {"cluster.coordinator", "coordinator", 0, cluster.coordinator}};
  const struct {
    const char* key;
    const char* role;
    const std::vector<std::string>* list;
  } lists[] = {{"cluster.ps", "ps", &cluster.ps},
               {"cluster.standby_ps", "standby", &cluster.standby_ps},
               {"cluster.workers", "worker", &cluster.workers}};
  for (const auto& list : lists) {
    for (size_t i = 0; i < list.list->size(); ++i) {
      out.push_back({absl::StrCat(list.key, "[", i, "]"), list.role,
                     static_cast<int>(i), (*list.list)[i]});
    }
  }
  return out;
}

}  // namespace downpour

// For tests of the coordinator and of whole clusters: the config they start
// from, and finding a member in a ClusterStatus reply.
#ifndef DOWNPOUR_COORDINATOR_TEST_CLUSTER_H_
#define DOWNPOUR_COORDINATOR_TEST_CLUSTER_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "proto/coordinator.pb.h"

namespace downpour::coordinator {

// `num_ps` ps and `num_workers` workers at placeholder loopback addresses
// (127.0.0.1:1, :2, ...; members register the addresses they really bound), no
// state dir (a restart forgets every member), the default heartbeat settings,
// RPC deadline 5 s, waits bounded by 10 s.
inline Config TestClusterConfig(int num_ps = 1, int num_workers = 1) {
  Config config;
  config.cluster.ps.clear();
  config.cluster.workers.clear();
  int port = 1;
  for (int i = 0; i < num_ps; ++i) {
    config.cluster.ps.push_back(absl::StrCat("127.0.0.1:", port++));
  }
  for (int i = 0; i < num_workers; ++i) {
    config.cluster.workers.push_back(absl::StrCat("127.0.0.1:", port++));
  }
  config.coordinator.state_dir = "";
  config.rpc.deadline_s = 5;
  config.rpc.connect_timeout_s = 10;
  return config;
}

// The member of `status` with this role ("ps", "worker", "standby") and index;
// nullptr when there is none.
inline const proto::MemberStatus* FindMember(
    const proto::ClusterStatusResponse& status, const std::string& role,
    int index = 0) {
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() == role && m.index() == index) return &m;
  }
  return nullptr;
}

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_TEST_CLUSTER_H_

// `psctl status --json`'s document. The general JSON helpers (ToJson, FromJson,
// JsonString; protobuf's canonical mapping) are in common/json.h.
#ifndef DOWNPOUR_TOOLS_JSON_OUTPUT_H_
#define DOWNPOUR_TOOLS_JSON_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/json.h"
#include "proto/coordinator.pb.h"
#include "tools/cluster_tables.h"

namespace downpour::tools {

// The document `psctl status --json` prints:
//   {"coordinator": "HOST:PORT", "cluster": {ClusterStatusResponse},
//    "members": [{"role": "ps", "index": 0, "address": "...",
//                 "health": "SERVING" | "error: ...",
//                 "status": {GetStatusResponse} | "status_error": "..."}, ...]}
// `statuses` and `health` have one entry per cluster member.
std::string StatusJson(const std::string& coordinator,
                       const proto::ClusterStatusResponse& cluster,
                       const MemberStatuses& statuses,
                       const std::vector<absl::StatusOr<std::string>>& health);

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_JSON_OUTPUT_H_

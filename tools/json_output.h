// JSON for tools: `psctl status --json`, and the metrics history the launcher
// saves and `psctl plot --history` reads back. Protobuf's canonical JSON
// mapping with the .proto field names (snake_case) and zero values printed; NaN
// (an unknown loss or accuracy) is the string "NaN", as that mapping says.
#ifndef DOWNPOUR_TOOLS_JSON_OUTPUT_H_
#define DOWNPOUR_TOOLS_JSON_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "proto/coordinator.pb.h"
#include "tools/cluster_tables.h"

namespace downpour::tools {

// `message` as indented JSON.
std::string ToJson(const google::protobuf::Message& message);

// Parses JSON written by ToJson (unknown fields are errors). InvalidArgument
// names `what` (e.g. the file) and the parser's complaint.
absl::Status FromJson(const std::string& json, const std::string& what,
                      google::protobuf::Message* message);

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

// `text` as a JSON string literal, quotes included.
std::string JsonString(const std::string& text);

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_JSON_OUTPUT_H_

// The envelope of `psctl status --json` around protobuf JSON (common/json).
#include "tools/json_output.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace downpour::tools {

std::string StatusJson(const std::string& coordinator,
                       const proto::ClusterStatusResponse& cluster,
                       const MemberStatuses& statuses,
                       const std::vector<absl::StatusOr<std::string>>& health) {
  std::vector<std::string> members;
  for (int i = 0; i < cluster.members_size(); ++i) {
    const proto::MemberStatus& m = cluster.members(i);
    std::string entry = absl::StrCat(
        "{\"role\": ", JsonString(m.role()), ", \"index\": ", m.index(),
        ", \"address\": ", JsonString(m.address()), ", \"health\": ",
        JsonString(
            health[i].ok()
                ? *health[i]
                : absl::StrCat("error: ", health[i].status().message())));
    if (statuses[i].ok()) {
      absl::StrAppend(&entry, ", \"status\": ", ToJson(*statuses[i]));
    } else {
      absl::StrAppend(&entry, ", \"status_error\": ",
                      JsonString(std::string(statuses[i].status().message())));
    }
    members.push_back(entry + "}");
  }
  return absl::StrCat("{\"coordinator\": ", JsonString(coordinator),
                      ",\n\"cluster\": ", ToJson(cluster),
                      ",\n\"members\": [\n", absl::StrJoin(members, ",\n"),
                      "\n]}\n");
}

}  // namespace downpour::tools

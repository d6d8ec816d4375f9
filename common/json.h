// JSON for files and tools: protobuf's canonical JSON mapping for messages
// (`psctl status --json`, the launcher's history.json, read back by
// `psctl plot --history`), and the pieces hand-built documents need
// (summary.json). Field names are the .proto names (snake_case), zero values
// are printed, and NaN in a message (an unknown loss or accuracy) is the string
// "NaN", as that mapping says.
//
//   std::string text = ToJson(history);
//   absl::Status ok = FromJson(text, "history.json", &history);
#ifndef DOWNPOUR_COMMON_JSON_H_
#define DOWNPOUR_COMMON_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace downpour {

// `message` as indented JSON.
std::string ToJson(const google::protobuf::Message& message);

// Parses JSON written by ToJson (unknown fields are errors). InvalidArgument
// names `what` (e.g. the file) and the parser's complaint.
absl::Status FromJson(const std::string& json, const std::string& what,
                      google::protobuf::Message* message);

// `text` as a JSON string literal, quotes included (quotes, backslashes and
// control characters escaped).
std::string JsonString(const std::string& text);

// `value` as a JSON number ("%.6g"), or null when it is NaN or infinite.
std::string JsonNumber(double value);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_JSON_H_

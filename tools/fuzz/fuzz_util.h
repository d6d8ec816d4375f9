// What the libFuzzer targets of tools/fuzz share: quiet logs, and the
// records their inputs are read as.
#ifndef DOWNPOUR_TOOLS_FUZZ_FUZZ_UTIL_H_
#define DOWNPOUR_TOOLS_FUZZ_FUZZ_UTIL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/logging.h"
#include "google/protobuf/stubs/logging.h"

namespace downpour::fuzz {

// Turns Downpour's logging off and drops protobuf's log lines (invalid UTF-8
// in string fields is refused, as gRPC would, and not logged). For
// LLVMFuzzerInitialize.
inline void QuietLogs() {
  (void)downpour::InitLogging("fuzz", "off");
  google::protobuf::SetLogHandler(nullptr);
}

// One record of an input: op:u8 length:u16le body[length], where a length
// byte or body bytes past the end of the input are cut off.
struct Record {
  uint8_t op;
  const uint8_t* body;
  size_t length;
};

// The record that starts at data[*at]; moves *at past it.
// REQUIRES: *at < size.
inline Record NextRecord(const uint8_t* data, size_t size, size_t* at) {
  Record record;
  record.op = data[(*at)++];
  record.length = 0;
  if (*at + 2 <= size) record.length = data[*at] | (data[*at + 1] << 8);
  *at = std::min(*at + 2, size);
  record.length = std::min(record.length, size - *at);
  record.body = data + *at;
  *at += record.length;
  return record;
}

}  // namespace downpour::fuzz

#endif  // DOWNPOUR_TOOLS_FUZZ_FUZZ_UTIL_H_

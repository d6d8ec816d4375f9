// The `rpc` section: the encoding names and the keys.
#include "common/config_rpc.h"

#include "common/config_field.h"

namespace downpour {
namespace config_internal {
namespace {

// The spellings of rpc.encoding. WireEncodingName spells these; config_test
// checks that the two agree.
constexpr Choice<WireEncoding> kRpcEncodings[] = {
    {"float32", WireEncoding::kFloat32},
    {"bf16", WireEncoding::kBf16},
    {"fp16", WireEncoding::kFp16}};

}  // namespace

std::vector<ConfigField> RpcKeys(RpcSection* r) {
  return {DoubleField("rpc.deadline_s", &r->deadline_s,
                      PositiveAtMost(kMaxTimeoutSeconds)),
          DoubleField("rpc.connect_timeout_s", &r->connect_timeout_s,
                      PositiveAtMost(kMaxTimeoutSeconds)),
          ChoiceField("rpc.encoding", &r->encoding, ParseRpcEncoding,
                      WireEncodingName)};
}

}  // namespace config_internal

absl::StatusOr<WireEncoding> ParseRpcEncoding(absl::string_view name) {
  return config_internal::ParseChoice("rpc.encoding",
                                      config_internal::kRpcEncodings, name);
}

}  // namespace downpour

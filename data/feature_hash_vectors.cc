// Writes the shared feature hash test vectors (data/testdata/
// feature_hash_vectors.tsv) to stdout: inputs chosen by hand and
// pseudo-random ones, with what data/feature_hash.h gives for them. Run once;
// data/feature_hash_test.cc and tests/python_client_test.py check the file.
//   bazel run //data:feature_hash_vectors >
//   data/testdata/feature_hash_vectors.tsv
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sparse_keys.h"
#include "data/feature_hash.h"

namespace {

using downpour::data::AppendTokenKeys;
using downpour::data::FeatureKey;
using downpour::data::FieldKey;
using downpour::data::HashBytes;
using downpour::data::MixKey;

std::string Hex64(uint64_t v) {
  return absl::StrCat(absl::Hex(v, absl::kZeroPad16));
}

void Line(const char* function, const std::string& a, const std::string& b,
          const std::string& result) {
  std::printf("%s\t%s\t%s\t%s\n", function, a.c_str(), b.c_str(),
              result.c_str());
}

// Deterministic byte strings: lengths 0..40, bytes of any value.
std::vector<std::string> RandomStrings(int n, uint64_t seed) {
  std::vector<std::string> out;
  uint64_t state = seed;
  for (int i = 0; i < n; ++i) {
    state = downpour::SplitMix64(state);
    std::string s(state % 41, '\0');
    for (char& c : s) {
      state = downpour::SplitMix64(state);
      c = static_cast<char>(state >> 56);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

int main() {
  std::printf(
      "# Feature hash test vectors, written by //data:feature_hash_vectors "
      "from data/feature_hash.h.\n"
      "# function<TAB>a<TAB>b<TAB>result: strings as lowercase hex of their "
      "bytes, keys as 16 hex digits,\n"
      "# '-' for an unused column; token_keys' result is its keys joined by "
      "spaces ('-': none).\n");
  std::vector<std::string> strings = {"",
                                      "a",
                                      "foobar",
                                      "hello world",
                                      "loan_amnt",
                                      "\x1f",
                                      std::string("x\0y", 3),
                                      "caf\xc3\xa9",
                                      "Don't STOP-2x!",
                                      "C1",
                                      "68fd1e64",
                                      "U.S. $1,000.50",
                                      "\x80\xff",
                                      "  a  a\tB\n"};
  for (std::string& s : RandomStrings(40, 47)) strings.push_back(std::move(s));
  for (const std::string& s : strings) {
    Line("hash_bytes", absl::BytesToHexString(s), "-", Hex64(HashBytes(s)));
    Line("field_key", absl::BytesToHexString(s), "-", Hex64(FieldKey(s)));
  }
  const std::vector<std::string> fields = {"",     "color", "C1",
                                           "text", "I13",   "caf\xc3\xa9"};
  for (const std::string& field : fields) {
    for (size_t i = 0; i < strings.size(); i += 3) {
      Line("feature_key", absl::BytesToHexString(field),
           absl::BytesToHexString(strings[i]),
           Hex64(FeatureKey(field, strings[i])));
      std::vector<uint64_t> keys;
      AppendTokenKeys(field, strings[i], &keys);
      std::vector<std::string> hex;
      for (uint64_t k : keys) hex.push_back(Hex64(k));
      Line("token_keys", absl::BytesToHexString(field),
           absl::BytesToHexString(strings[i]),
           hex.empty() ? "-" : absl::StrJoin(hex, " "));
    }
  }
  std::vector<uint64_t> keys = {
      0, 1, 2, 12345, ~uint64_t{0}, 0x9e3779b97f4a7c15ULL, uint64_t{1} << 63};
  uint64_t state = 4747;
  for (int i = 0; i < 40; ++i)
    keys.push_back(state = downpour::SplitMix64(state));
  for (uint64_t k : keys) Line("mix_key", Hex64(k), "-", Hex64(MixKey(k)));
  return 0;
}

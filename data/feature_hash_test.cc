#include "data/feature_hash.h"

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::data {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// The published FNV-1a 64 test vectors.
TEST(FeatureHashTest, Fnv1a64MatchesPublishedVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

// Golden values, computed independently (Python, the formulas in the
// header). A change here changes every key of every trained model.
TEST(FeatureHashTest, HashBytesGoldenValues) {
  struct Case {
    absl::string_view bytes;
    uint64_t hash;
  };
  const Case cases[] = {
      {"", 0xefd01f60ba992926ULL},
      {"a", 0x82a2a958a9bece5bULL},
      {"foobar", 0x2c22194922d1672bULL},
      {"hello world", 0x7c6d8c019b6ee5d5ULL},
      {"loan_amnt", 0x8e2a2b982b4e8edeULL},
      {absl::string_view("\x1f", 1), 0x36610c0f0fbc67caULL},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(HashBytes(c.bytes), c.hash) << "'" << c.bytes << "'";
  }
  EXPECT_EQ(Fmix64(0), 0u);
  EXPECT_EQ(Fmix64(1), 0xb456bcfc34c2cb2cULL);
}

TEST(FeatureHashTest, FeatureKeyInTwoStepsIsFeatureKey) {
  for (const char* field : {"", "C1", "color", "I13"}) {
    const uint64_t prefix = FeatureKeyPrefix(field);
    for (const char* value : {"", "red", "68fd1e64", "0"}) {
      EXPECT_EQ(FeatureKeyFrom(prefix, value), FeatureKey(field, value))
          << field << " " << value;
    }
  }
  EXPECT_EQ(FeatureKeyFrom(FeatureKeyPrefix("color"), "red"),
            0xd81372f21cac90c2ULL);
}

TEST(FeatureHashTest, FeatureKeyIsHashOfFieldSeparatorValue) {
  EXPECT_EQ(FeatureKey("color", "red"), 0xd81372f21cac90c2ULL);
  EXPECT_EQ(FeatureKey("text", "corn"), 0x485cc75535523f47ULL);
  EXPECT_EQ(FeatureKey("loan_amnt", "b3"), 0x12a23bbe44e22828ULL);
  EXPECT_EQ(FeatureKey("color", "red"), HashBytes("color\x1fred"));
  EXPECT_EQ(FeatureKey("color", ""), 0x48c1f902c7aacaULL);
  EXPECT_EQ(FieldKey("loan_amnt"), 0x8e2a2b982b4e8edeULL);
  // The field matters, and the split between field and value does too.
  EXPECT_NE(FeatureKey("a", "bc"), FeatureKey("ab", "c"));
  EXPECT_NE(FeatureKey("color", "red"), FeatureKey("colour", "red"));
  EXPECT_NE(FieldKey("color"), FeatureKey("color", ""));
  // Values are bytes: no case folding or trimming.
  EXPECT_NE(FeatureKey("c", "Red"), FeatureKey("c", "red"));
  EXPECT_NE(FeatureKey("c", " red"), FeatureKey("c", "red"));
}

// SplitMix64 with seed 0 first outputs Mix13(0x9e3779b97f4a7c15) =
// 0xe220a8397b1dcdaf (the published sequence); the rest are pinned.
TEST(FeatureHashTest, MixKeyIsSplitMix64Finalizer) {
  EXPECT_EQ(MixKey(0x9e3779b97f4a7c15ULL), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(MixKey(0), 0u);
  EXPECT_EQ(MixKey(1), 0x5692161d100b05e5ULL);
  EXPECT_EQ(MixKey(2), 0xdbd238973a2b148aULL);
  EXPECT_EQ(MixKey(12345), 0xf36cf1164265dd51ULL);
  EXPECT_EQ(MixKey(~uint64_t{0}), 0xb4d055fcf2cbbd7bULL);
}

// Patterned keys (1..n, or a stride that shares a factor with the shard
// count) land on every shard about evenly after MixKey, not with plain %.
TEST(FeatureHashTest, MixKeySpreadsPatternedKeysOverShards) {
  constexpr int kShards = 8;
  constexpr int kKeys = 80000;
  std::vector<int> plain(kShards), mixed(kShards);
  for (uint64_t i = 0; i < kKeys; ++i) {
    const uint64_t key = i * 16;  // a stride of 16: all on shard 0 with %
    ++plain[key % kShards];
    ++mixed[MixKey(key) % kShards];
  }
  EXPECT_EQ(plain[0], kKeys);
  for (int s = 0; s < kShards; ++s) {
    EXPECT_NEAR(mixed[s], kKeys / kShards, kKeys / kShards / 20) << s;
  }
}

TEST(FeatureHashTest, TokenizeLowerCasesAlphanumericRuns) {
  EXPECT_THAT(Tokenize("Don't STOP-2x!"),
              ElementsAre("don", "t", "stop", "2x"));
  EXPECT_THAT(Tokenize("  a  a\tB\n"), ElementsAre("a", "a", "b"));
  EXPECT_THAT(Tokenize("U.S. $1,000.50"),
              ElementsAre("u", "s", "1", "000", "50"));
  // Every byte of a non-ASCII character separates.
  EXPECT_THAT(Tokenize("caf\xc3\xa9 na\xc3\xafve"),
              ElementsAre("caf", "na", "ve"));
  EXPECT_THAT(Tokenize(absl::string_view("x\0y", 3)), ElementsAre("x", "y"));
  EXPECT_THAT(Tokenize(""), IsEmpty());
  EXPECT_THAT(Tokenize("!@# ... \x80\xff"), IsEmpty());
  EXPECT_THAT(Tokenize("z"), ElementsAre("z"));
}

TEST(FeatureHashTest, AppendTokenKeysEqualsFeatureKeyOfEachToken) {
  const std::string texts[] = {"Don't STOP-2x!", "", "  ", "a", "CORN corn",
                               "caf\xc3\xa9 x9"};
  for (const std::string& text : texts) {
    std::vector<uint64_t> want = {42};  // appended after what is there
    for (const std::string& t : Tokenize(text)) {
      want.push_back(FeatureKey("tok", t));
    }
    std::vector<uint64_t> got = {42};
    AppendTokenKeys("tok", text, &got);
    EXPECT_EQ(got, want) << "'" << text << "'";
  }
  std::vector<uint64_t> keys;
  AppendTokenKeys("tok", "Don't STOP-2x!", &keys);
  EXPECT_THAT(keys, ElementsAre(0xc607b671fbd0d9efULL, 0x39d86320c5f597d4ULL,
                                0x7c16837254e9f4a5ULL, 0xbce460f2d29abb82ULL));
}

// The vectors shared with the Python client (python/downpour/feature_hash.py,
// checked by tests/python_client_test.py): every line of the file holds.
TEST(FeatureHashTest, SharedVectorsHold) {
  std::ifstream in("data/testdata/feature_hash_vectors.tsv");
  ASSERT_TRUE(in.good()) << "data/testdata/feature_hash_vectors.tsv not found";
  const auto key = [](uint64_t k) {
    return absl::StrCat(absl::Hex(k, absl::kZeroPad16));
  };
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = absl::StrSplit(line, '\t');
    ASSERT_EQ(f.size(), 4u) << line;
    const std::string a = absl::HexStringToBytes(f[1]);
    const std::string b = absl::HexStringToBytes(f[2]);
    std::string got;
    if (f[0] == "hash_bytes") {
      got = key(HashBytes(a));
    } else if (f[0] == "field_key") {
      got = key(FieldKey(a));
    } else if (f[0] == "feature_key") {
      got = key(FeatureKey(a, b));
    } else if (f[0] == "mix_key") {
      got = key(MixKey(std::stoull(f[1], nullptr, 16)));
    } else if (f[0] == "token_keys") {
      std::vector<uint64_t> keys;
      AppendTokenKeys(a, b, &keys);
      std::vector<std::string> hex;
      for (uint64_t k : keys) hex.push_back(key(k));
      got = hex.empty() ? "-" : absl::StrJoin(hex, " ");
    } else {
      FAIL() << "unknown function in " << line;
    }
    EXPECT_EQ(got, f[3]) << line;
    ++checked;
  }
  EXPECT_GE(checked, 200);
}

}  // namespace
}  // namespace downpour::data

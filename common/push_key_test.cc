#include "common/push_key.h"

#include "gtest/gtest.h"

namespace downpour {
namespace {

TEST(PushKeyTest, TheDigestIsBoundToWorkerIncarnationAndKey) {
  const uint64_t digest = PushKeyDigest(3, 7, 0x1234567890abcdefULL);
  EXPECT_NE(digest, 0u);
  EXPECT_NE(digest, 0x1234567890abcdefULL) << "the key itself is never sent";
  EXPECT_EQ(digest, PushKeyDigest(3, 7, 0x1234567890abcdefULL));
  EXPECT_NE(digest, PushKeyDigest(4, 7, 0x1234567890abcdefULL));
  EXPECT_NE(digest, PushKeyDigest(3, 8, 0x1234567890abcdefULL));
  EXPECT_NE(digest, PushKeyDigest(3, 7, 0x1234567890abcdeeULL));
  EXPECT_TRUE(PushKeyMatches(3, 7, 0x1234567890abcdefULL, digest));
  EXPECT_FALSE(PushKeyMatches(3, 7, 0, digest));
  EXPECT_FALSE(PushKeyMatches(3, 7, digest, digest))
      << "the digest is not a key";
}

// A fixed vector, so that a change of the function (which would make every
// running ps refuse every worker after an upgrade of one side) is noticed.
TEST(PushKeyTest, KnownVector) {
  // python3: hashlib.sha256(b"downpour push key v1\0" +
  //   struct.pack("<IQQ", 0, 1, 1)).digest()[:8], little-endian.
  EXPECT_EQ(PushKeyDigest(0, 1, 1), 0x8edf777c06c4344bULL);
}

}  // namespace
}  // namespace downpour

#include "common/checksum.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace downpour {
namespace {

uint32_t Crc(const std::string& s) { return Crc32c(s.data(), s.size()); }

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc(""), 0x00000000u);
  EXPECT_EQ(Crc("a"), 0xC1D04330u);
  EXPECT_EQ(Crc("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc("The quick brown fox jumps over the lazy dog"), 0x22620404u);
}

// RFC 3720 (iSCSI) appendix B.4 test vectors, as LevelDB's crc32c_test.cc uses.
TEST(Crc32cTest, Rfc3720Vectors) {
  std::vector<uint8_t> buf(32, 0);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x8A9136AAu);
  std::fill(buf.begin(), buf.end(), 0xFF);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x113FDB5Cu);
}

TEST(Crc32cTest, ExtendingEqualsOneCallAtEverySplitAndAlignment) {
  std::string text;
  for (int i = 0; i < 300; ++i) text.push_back(static_cast<char>(i * 37 + 11));
  for (size_t offset = 0; offset < 8; ++offset) {
    const char* data = text.data() + offset;
    size_t n = text.size() - offset;
    uint32_t whole = Crc32c(data, n);
    for (size_t split = 0; split <= n; split += 13) {
      uint32_t crc = Crc32c(data, split);
      EXPECT_EQ(Crc32c(data + split, n - split, crc), whole)
          << "offset " << offset << " split " << split;
    }
  }
}

TEST(Crc32cTest, DetectsASingleFlippedBit) {
  std::string text(4096, 'x');
  uint32_t before = Crc(text);
  text[1234] ^= 0x10;
  EXPECT_NE(Crc(text), before);
}

}  // namespace
}  // namespace downpour

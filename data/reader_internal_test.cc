#include "data/reader_internal.h"

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::data::internal {
namespace {

using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ParseFloatTest, Table) {
  const struct {
    const char* token;
    NumberKind kind;
    float value;
  } cases[] = {
      {"1.5", NumberKind::kOk, 1.5f},
      {"+1", NumberKind::kOk, 1.0f},
      {"-0.25", NumberKind::kOk, -0.25f},
      {".5", NumberKind::kOk, 0.5f},
      {"1e3", NumberKind::kOk, 1000.0f},
      {"1e-50", NumberKind::kOk, 0.0f},  // underflow rounds to 0
      {"1e50", NumberKind::kInf, 0},
      {"inf", NumberKind::kInf, 0},
      {"-Infinity", NumberKind::kInf, 0},
      {"nan", NumberKind::kNaN, 0},
      {"", NumberKind::kNotNumber, 0},
      {"+", NumberKind::kNotNumber, 0},
      {"+-1", NumberKind::kNotNumber, 0},
      {"1,5", NumberKind::kNotNumber, 0},
      {"1.5x", NumberKind::kNotNumber, 0},
      {" 1", NumberKind::kNotNumber, 0},
      {"0x10", NumberKind::kNotNumber, 0},
  };
  for (const auto& c : cases) {
    float v = -7;
    EXPECT_EQ(ParseFloat(c.token, &v), c.kind) << c.token;
    if (c.kind == NumberKind::kOk) {
      EXPECT_EQ(v, c.value) << c.token;
    }
  }
}

TEST(IsMissingMarkerTest, Table) {
  for (const char* t : {"", "?", "NA", "na", "N/A", "nan", "NaN", "NAN"}) {
    EXPECT_TRUE(IsMissingMarker(t)) << t;
  }
  for (const char* t : {"0", "none", "-", "nana", "inf"}) {
    EXPECT_FALSE(IsMissingMarker(t)) << t;
  }
}

TEST(QuoteTest, CutsAt40BytesAndEscapes) {
  EXPECT_EQ(Quote("abc"), "'abc'");
  EXPECT_EQ(Quote(std::string(50, 'a')), "'" + std::string(40, 'a') + "...'");
  EXPECT_EQ(Quote(std::string("a\0b", 3)), "'a\\x00b'");
}

TEST(LineAndColumnTest, CountsFromOne) {
  int64_t line, column;
  LineAndColumn("ab\ncd\n", 4, &line, &column);
  EXPECT_EQ(line, 2);
  EXPECT_EQ(column, 2);
  LineAndColumn("ab", 0, &line, &column);
  EXPECT_EQ(line, 1);
  EXPECT_EQ(column, 1);
}

TEST(CutLineTest, DropsNewlineAndCarriageReturn) {
  const absl::string_view text = "a,b\r\n\nlast";
  size_t next = 0;
  EXPECT_EQ(CutLine(text, &next), "a,b");
  EXPECT_EQ(next, 5u);
  EXPECT_EQ(CutLine(text, &next), "");
  EXPECT_EQ(next, 6u);
  EXPECT_EQ(CutLine(text, &next), "last");
  EXPECT_EQ(next, text.size() + 1);
}

TEST(CheckLineLengthTest, NamesTheLimitAndFormat) {
  EXPECT_TRUE(CheckLineLength("abc", "f.csv", 2, 3, "CSV").ok());
  EXPECT_THAT(
      CheckLineLength("abcd", "f.csv", 2, 3, "CSV"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               StartsWith("f.csv:2:4: line is longer than 3 bytes "
                          "(max_line_bytes); is this a CSV file with one "
                          "example per line?")));
}

TEST(FindBinaryByteTest, NulAndInvalidUtf8) {
  EXPECT_EQ(FindBinaryByte("plain, text\n"), absl::string_view::npos);
  EXPECT_EQ(FindBinaryByte("caf\xc3\xa9 \xe2\x82\xac"),
            absl::string_view::npos);
  EXPECT_EQ(FindBinaryByte(std::string("ab\0c", 4)), 2u);
  EXPECT_EQ(FindBinaryByte("ab\xff"), 2u);
  EXPECT_EQ(FindBinaryByte("ab\xc3"), 2u);         // cut sequence
  EXPECT_EQ(FindBinaryByte("\xc0\xaf"), 0u);       // overlong
  EXPECT_EQ(FindBinaryByte("x\xed\xa0\x80"), 1u);  // surrogate
}

TEST(CheckLooksLikeTextTest, NamesTheByte) {
  EXPECT_THAT(
      CheckLooksLikeText("a,b\n1,\xff\n", "f.csv", "CSV"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(StartsWith("f.csv:2:3: "), HasSubstr("looks binary"))));
  EXPECT_THAT(CheckLooksLikeText("\x1f\x8b\x08", "f.csv", "CSV"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("f.csv:1:1: "), HasSubstr("gzip"))));
  EXPECT_TRUE(CheckLooksLikeText("1,2\n", "f.csv", "CSV").ok());
}

}  // namespace
}  // namespace downpour::data::internal

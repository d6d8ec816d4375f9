#include "data/file_reader.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_path.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::data {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::downpour::testing::TempPath;
using ::testing::AllOf;
using ::testing::HasSubstr;

void WriteRaw(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  ASSERT_EQ(std::fclose(f), 0);
}

// Writes `text` as one gzip member with zlib's gzopen/gzwrite ("ab" appends
// another member).
void WriteGzip(const std::string& path, const std::string& text,
               const char* mode = "wb") {
  gzFile f = gzopen(path.c_str(), mode);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), text.size()),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string ReadRaw(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

std::string Big() {
  std::string text;
  for (int i = 0; i < 100000; ++i) absl::StrAppend(&text, i, ",", i % 7, "\n");
  return text;
}

TEST(ReadFileMaybeGzipTest, PlainFileAsIs) {
  const std::string path = TempPath("plain.txt");
  WriteRaw(path, "a,b\n1,2\n");
  EXPECT_EQ(*ReadFileMaybeGzip(path), "a,b\n1,2\n");
}

TEST(ReadFileMaybeGzipTest, GunzipsByMagicNotName) {
  const std::string path = TempPath("no_gz_suffix.csv");
  const std::string text = Big();
  WriteGzip(path, text);
  absl::StatusOr<std::string> got = ReadFileMaybeGzip(path);
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(*got, text);
}

TEST(ReadFileMaybeGzipTest, MultiMember) {
  const std::string path = TempPath("multi.gz");
  WriteGzip(path, "first\n");
  WriteGzip(path, Big(), "ab");
  absl::StatusOr<std::string> got = ReadFileMaybeGzip(path);
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(*got, "first\n" + Big());
}

TEST(ReadFileMaybeGzipTest, TruncatedIsRefused) {
  const std::string path = TempPath("cut.gz");
  WriteGzip(path, Big());
  const std::string whole = ReadRaw(path);
  for (size_t keep :
       {size_t{2}, size_t{10}, whole.size() / 2, whole.size() - 1}) {
    WriteRaw(path, whole.substr(0, keep));
    EXPECT_THAT(ReadFileMaybeGzip(path),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(path), HasSubstr("gzip"))))
        << keep;
  }
}

TEST(ReadFileMaybeGzipTest, CorruptIsRefused) {
  const std::string path = TempPath("corrupt.gz");
  WriteGzip(path, Big());
  std::string bytes = ReadRaw(path);
  for (size_t i = 20; i < 60; ++i) bytes[i] ^= 0x5a;
  WriteRaw(path, bytes);
  EXPECT_THAT(ReadFileMaybeGzip(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(path), HasSubstr("not valid gzip"))));
}

TEST(ReadFileMaybeGzipTest, TrailingGarbageIsRefusedZerosAreNot) {
  const std::string path = TempPath("trailing.gz");
  WriteGzip(path, "x\n");
  const std::string whole = ReadRaw(path);
  WriteRaw(path, whole + std::string(8, '\0'));
  EXPECT_EQ(*ReadFileMaybeGzip(path), "x\n");
  WriteRaw(path, whole + "junk");
  EXPECT_THAT(ReadFileMaybeGzip(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("4 bytes follow")));
}

TEST(ReadFileMaybeGzipTest, MaxBytes) {
  const std::string plain = TempPath("max.txt");
  WriteRaw(plain, std::string(100, 'a'));
  EXPECT_THAT(ReadFileMaybeGzip(plain, 100), IsOk());
  EXPECT_THAT(ReadFileMaybeGzip(plain, 99),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(plain), HasSubstr("more than 99"))));
  // A small gzip file that decompresses past the limit.
  const std::string bomb = TempPath("bomb.gz");
  WriteGzip(bomb, std::string(1 << 20, 'a'));
  EXPECT_THAT(ReadFileMaybeGzip(bomb, 1 << 20), IsOk());
  EXPECT_THAT(ReadFileMaybeGzip(bomb, 10000),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("decompresses to more than 10000")));
}

TEST(ReadFileMaybeGzipTest, MissingIsNotFound) {
  EXPECT_THAT(ReadFileMaybeGzip(TempPath("absent.csv")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("absent.csv")));
}

TEST(MaybeGunzipTest, InMemory) {
  EXPECT_EQ(*MaybeGunzip("plain", "m"), "plain");
  EXPECT_THAT(MaybeGunzip("\x1f\x8b", "m"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'m'"), HasSubstr("truncated"))));
}

}  // namespace
}  // namespace downpour::data

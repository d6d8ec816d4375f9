#include "data/input_parts.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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
using ::testing::ElementsAre;
using ::testing::HasSubstr;

void WriteRaw(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  ASSERT_EQ(std::fclose(f), 0);
}

// One gzip member of `text` ("ab" appends another member).
void WriteGzip(const std::string& path, const std::string& text,
               const char* mode = "wb") {
  gzFile f = gzopen(path.c_str(), mode);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), text.size()),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// The lines of `text` by the line rule: each with its '\n' (and '\r').
std::vector<std::string> LinesOf(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

// Reads a part to its end (from `from`); checks each chunk against the
// file's text and that bytes_done ends at part.bytes().
std::vector<std::string> ReadPart(const std::vector<InputFile>& files,
                                  const std::vector<std::string>& texts,
                                  const InputPart& part, size_t buffer,
                                  PartPosition from = PartPosition()) {
  PartReader reader(files, part, buffer);
  EXPECT_THAT(reader.Seek(from), IsOk());
  std::vector<std::string> lines;
  TextChunk chunk;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&chunk);
    EXPECT_THAT(more.status(), IsOk());
    if (!more.ok() || !*more) break;
    EXPECT_FALSE(chunk.text.empty());
    EXPECT_EQ(texts[chunk.file].substr(chunk.offset, chunk.text.size()),
              chunk.text);
    EXPECT_EQ(reader.position().segment, chunk.next.segment);
    EXPECT_EQ(reader.position().offset, chunk.next.offset);
    for (std::string& line : LinesOf(std::string(chunk.text))) {
      lines.push_back(std::move(line));
    }
  }
  EXPECT_EQ(reader.bytes_done(), part.bytes());
  EXPECT_EQ(reader.position().segment, static_cast<int>(part.segments.size()));
  return lines;
}

class InputPartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string long_line(200, 'x');
    texts_ = {
        "a,1\r\nb,2\r\n\r\n\n" + long_line + "\nc,3\r\nlast-no-newline",
        "",
        "one\ntwo\n\n\nthree\nfour\nfive\nsix\nseven\neight\n",
        "gz1\ngz2\n\ngz3-no-newline",
        "\n\nstarts-empty\n" + long_line + long_line + "\nend\n",
    };
    paths_ = {TempPath("p_a.txt"), TempPath("p_b.txt"), TempPath("p_c.csv"),
              TempPath("p_d.gz"), TempPath("p_e.txt")};
    for (int i = 0; i < 5; ++i) {
      if (i == 3) {
        WriteGzip(paths_[i], texts_[i]);
      } else {
        WriteRaw(paths_[i], texts_[i]);
      }
    }
    absl::StatusOr<std::vector<InputFile>> files = ExpandInputs(paths_);
    ASSERT_THAT(files.status(), IsOk());
    files_ = *files;
    for (const std::string& text : texts_) {
      for (std::string& line : LinesOf(text)) all_.push_back(std::move(line));
    }
  }

  std::vector<std::string> texts_;
  std::vector<std::string> paths_;
  std::vector<InputFile> files_;
  std::vector<std::string> all_;  // every line, in file order
};

TEST_F(InputPartsTest, ExpandSniffsGzipAndSizes) {
  ASSERT_EQ(files_.size(), 5u);
  EXPECT_FALSE(files_[0].gzip);
  EXPECT_TRUE(files_[3].gzip);
  EXPECT_EQ(files_[0].size, static_cast<int64_t>(texts_[0].size()));
  EXPECT_EQ(files_[1].size, 0);
}

TEST_F(InputPartsTest, EveryLineOnceForAnyNumberOfParts) {
  for (size_t buffer : {size_t{1}, size_t{7}, size_t{64}, size_t{1} << 20}) {
    for (int n = 1; n <= 17; ++n) {
      SCOPED_TRACE(absl::StrCat("buffer ", buffer, ", parts ", n));
      const std::vector<InputPart> parts = PlanParts(files_, n);
      ASSERT_EQ(parts.size(), static_cast<size_t>(n));
      int64_t bytes = 0;
      std::vector<std::string> lines;
      for (const InputPart& part : parts) {
        bytes += part.bytes();
        for (std::string& line : ReadPart(files_, texts_, part, buffer)) {
          lines.push_back(std::move(line));
        }
      }
      int64_t total = 0;
      for (const InputFile& f : files_) total += f.size;
      EXPECT_EQ(bytes, total);
      EXPECT_EQ(lines, all_);
    }
  }
}

TEST_F(InputPartsTest, PartsSplitByGlobalBytesAndGzipGoesWhole) {
  const std::vector<InputPart> parts = PlanParts(files_, 3);
  int64_t total = 0;
  for (const InputFile& f : files_) total += f.size;
  int gzip_segments = 0;
  for (int p = 0; p < 3; ++p) {
    int64_t plain = 0;
    for (const Segment& s : parts[p].segments) {
      if (files_[s.file].gzip) {
        ++gzip_segments;
        EXPECT_EQ(s.begin, 0);
        EXPECT_EQ(s.end, files_[s.file].size);
      } else {
        plain += s.end - s.begin;
      }
      EXPECT_NE(s.file, 1);  // the empty file
    }
    const int64_t gz = files_[3].size;
    const int64_t want = (p + 1) * total / 3 - p * total / 3;
    EXPECT_TRUE(plain == want || plain + gz == want) << p;
  }
  EXPECT_EQ(gzip_segments, 1);
}

TEST_F(InputPartsTest, MorePartsThanBytesLeavesEmptyParts) {
  std::vector<InputFile> one = {files_[2]};
  const std::vector<InputPart> parts = PlanParts(one, 200);
  std::vector<std::string> lines;
  int empty = 0;
  for (const InputPart& part : parts) {
    if (part.segments.empty()) ++empty;
    for (std::string& l : ReadPart(one, {texts_[2]}, part, 16)) {
      lines.push_back(l);
    }
  }
  EXPECT_GT(empty, 0);
  EXPECT_EQ(lines, LinesOf(texts_[2]));
}

TEST_F(InputPartsTest, SeekToEveryChunkReadsTheRest) {
  for (int n : {1, 2, 5}) {
    for (const InputPart& part : PlanParts(files_, n)) {
      PartReader reader(files_, part, 16);
      std::vector<PartPosition> positions = {reader.position()};
      std::vector<std::vector<std::string>> after;  // lines after each
      TextChunk chunk;
      std::vector<std::string> lines;
      while (*reader.Next(&chunk)) {
        for (std::string& l : LinesOf(std::string(chunk.text))) {
          lines.push_back(l);
        }
        positions.push_back(chunk.next);
      }
      size_t done = 0;
      // Replays: from each saved position, the rest of the part.
      for (size_t k = 0; k < positions.size(); ++k) {
        std::vector<std::string> rest =
            ReadPart(files_, texts_, part, 16, positions[k]);
        ASSERT_LE(rest.size(), lines.size());
        EXPECT_TRUE(
            std::equal(rest.begin(), rest.end(), lines.end() - rest.size()));
        if (k > 0) {
          EXPECT_LE(rest.size(), done);
        }
        done = rest.size();
      }
      EXPECT_EQ(done, 0u);
    }
  }
}

TEST_F(InputPartsTest, SeekMidPartGivesExactlyTheRemainingLines) {
  const std::vector<InputPart> parts = PlanParts(files_, 1);
  PartReader reader(files_, parts[0], 32);
  TextChunk chunk;
  std::vector<std::string> seen;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(*reader.Next(&chunk));
    for (std::string& l : LinesOf(std::string(chunk.text))) seen.push_back(l);
  }
  const int64_t done = reader.bytes_done();
  std::vector<std::string> rest =
      ReadPart(files_, texts_, parts[0], 32, chunk.next);
  seen.insert(seen.end(), rest.begin(), rest.end());
  EXPECT_EQ(seen, all_);
  PartReader resumed(files_, parts[0], 32);
  ASSERT_THAT(resumed.Seek(chunk.next), IsOk());
  EXPECT_EQ(resumed.bytes_done(), done);
}

TEST_F(InputPartsTest, SeekOutsideThePartIsInvalid) {
  const std::vector<InputPart> parts = PlanParts(files_, 1);
  PartReader reader(files_, parts[0]);
  const int n = static_cast<int>(parts[0].segments.size());
  EXPECT_THAT(reader.Seek({n + 1, -1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(reader.Seek({-1, -1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(reader.Seek({0, 2}),  // mid-line in "a,1\r\n"
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not the start of a line")));
  EXPECT_THAT(reader.Seek({0, 5}), IsOk());
  EXPECT_THAT(reader.Seek({n, -1}), IsOk());
  TextChunk chunk;
  EXPECT_FALSE(*reader.Next(&chunk));
}

TEST_F(InputPartsTest, ConcatenatedGzipMembersReadWhole) {
  const std::string path = TempPath("p_two.gz");
  WriteGzip(path, "m1a\nm1b\n");
  WriteGzip(path, "m2a\nm2b", "ab");
  absl::StatusOr<std::vector<InputFile>> files = ExpandInputs({path});
  ASSERT_THAT(files.status(), IsOk());
  for (int n : {1, 4}) {
    std::vector<std::string> lines;
    for (const InputPart& part : PlanParts(*files, n)) {
      for (std::string& l : ReadPart(*files, {"m1a\nm1b\nm2a\nm2b"}, part, 3)) {
        lines.push_back(l);
      }
    }
    EXPECT_THAT(lines, ElementsAre("m1a\n", "m1b\n", "m2a\n", "m2b"));
  }
}

TEST_F(InputPartsTest, TruncatedGzipNamesTheFile) {
  const std::string whole = TempPath("p_whole.gz");
  WriteGzip(whole, std::string(5000, 'z') + "\n");
  std::string bytes;
  {
    FILE* f = std::fopen(whole.c_str(), "rb");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
    std::fclose(f);
  }
  const std::string cut = TempPath("p_cut.gz");
  WriteRaw(cut, bytes.substr(0, bytes.size() - 6));
  absl::StatusOr<std::vector<InputFile>> files = ExpandInputs({cut});
  ASSERT_THAT(files.status(), IsOk());
  PartReader reader(*files, PlanParts(*files, 1)[0]);
  TextChunk chunk;
  absl::StatusOr<bool> more = true;
  while (more.ok() && *more) more = reader.Next(&chunk);
  EXPECT_THAT(more.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("p_cut.gz"), HasSubstr("truncated"))));
}

TEST_F(InputPartsTest, LineOverTheLimitNamesFileAndByte) {
  const std::string path = TempPath("p_long.txt");
  WriteRaw(path, "short\n" + std::string(49, 'y') + "\n" +
                     std::string(50, 'z') + "\nafter\n");
  absl::StatusOr<std::vector<InputFile>> files = ExpandInputs({path});
  ASSERT_THAT(files.status(), IsOk());
  for (size_t buffer : {size_t{8}, size_t{1} << 20}) {
    PartReader reader(*files, PlanParts(*files, 1)[0], buffer,
                      /*max_line_bytes=*/50);
    TextChunk chunk;
    absl::StatusOr<bool> more = true;
    std::string read;
    while (more.ok() && *more) {
      more = reader.Next(&chunk);
      if (more.ok() && *more) read += std::string(chunk.text);
    }
    EXPECT_THAT(more.status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("p_long.txt': the line at byte 56 "
                                         "is longer than 49 bytes"))))
        << buffer;
  }
}

TEST_F(InputPartsTest, LastLineAtTheLimitWithoutNewlineIsRead) {
  const std::string path = TempPath("p_edge.txt");
  WriteRaw(path, "a\n" + std::string(49, 'q'));
  absl::StatusOr<std::vector<InputFile>> files = ExpandInputs({path});
  ASSERT_THAT(files.status(), IsOk());
  std::vector<std::string> lines = ReadPart(
      *files, {"a\n" + std::string(49, 'q')}, PlanParts(*files, 1)[0], 4);
  EXPECT_THAT(lines, ElementsAre("a\n", std::string(49, 'q')));
}

TEST(ExpandInputsTest, GlobsSortAndEntriesKeepOrder) {
  const std::string dir = TempPath("glob_dir");
  mkdir(dir.c_str(), 0755);
  WriteRaw(dir + "/b.txt", "b\n");
  WriteRaw(dir + "/a.txt", "a\n");
  WriteRaw(dir + "/z.csv", "z\n");
  absl::StatusOr<std::vector<InputFile>> files =
      ExpandInputs({dir + "/z.csv", dir + "/*.txt"});
  ASSERT_THAT(files.status(), IsOk());
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].path, dir + "/z.csv");
  EXPECT_EQ((*files)[1].path, dir + "/a.txt");
  EXPECT_EQ((*files)[2].path, dir + "/b.txt");
  EXPECT_EQ((*files)[1].size, 2);
}

TEST(ExpandInputsTest, Errors) {
  const std::string dir = TempPath("err_dir");
  mkdir(dir.c_str(), 0755);
  WriteRaw(dir + "/a.txt", "a\n");
  EXPECT_THAT(ExpandInputs({}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      ExpandInputs({dir + "/x*.txt"}).status(),
      StatusIs(absl::StatusCode::kNotFound,
               HasSubstr("data.path: no file matches '" + dir + "/x*.txt'")));
  EXPECT_THAT(ExpandInputs({dir + "/missing.txt"}).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("cannot read '" + dir +
                                 "/missing.txt': No such file or directory")));
  EXPECT_THAT(ExpandInputs({dir}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is a folder; name the files, e.g. '" + dir +
                                 "/*.txt'")));
  EXPECT_THAT(
      ExpandInputs({dir + "/a.txt", dir + "/*.txt"}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("named twice")));
  EXPECT_THAT(
      ExpandInputs({dir + "/a.txt", dir + "/./a.txt"}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("named twice")));
}

TEST_F(InputPartsTest, LineNumberAt) {
  EXPECT_EQ(*LineNumberAt(files_[2], 0), 1);
  EXPECT_EQ(*LineNumberAt(files_[2], 4), 2);   // "two"
  EXPECT_EQ(*LineNumberAt(files_[2], 10), 5);  // "three"
  EXPECT_EQ(*LineNumberAt(files_[3], 4), 2);   // gzip "gz2"
  EXPECT_EQ(*LineNumberAt(files_[3], 9), 4);
  EXPECT_THAT(LineNumberAt(files_[2], 1000).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace downpour::data

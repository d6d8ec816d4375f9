// Input parts: a job's input files (data.path) split by byte range into N
// parts, and a reader that streams the whole lines of one part, chunk by
// chunk, in bounded memory, so that each worker reads only its own share.
//
//   ASSIGN_OR_RETURN(std::vector<InputFile> files, ExpandInputs({"d/*.txt"}));
//   std::vector<InputPart> parts = PlanParts(files, num_workers);
//   PartReader reader(files, parts[worker]);
//   TextChunk chunk;
//   while (true) {
//     ASSIGN_OR_RETURN(bool more, reader.Next(&chunk));
//     if (!more) break;
//     ... parse chunk.text; save chunk.next to resume after a restart ...
//   }
//
// The line rule. The lines of a file start at byte 0 and right after every
// '\n'. A plain-text segment [b, e) of a file reads exactly the lines whose
// first byte s satisfies b <= s < e: when b > 0 it starts at b if byte b - 1
// is '\n', else just past the first '\n' at or after b; it reads on while the
// next line starts before e, and reads the last such line whole even where it
// runs past e. So segments that tile a file read every line exactly once,
// wherever the cuts fall. The file's last line may lack its '\n'; "\r\n"
// line ends stay in the text (parsers drop the '\r'). A gzip file is never
// cut: its one segment is the whole decompressed stream (several gzip members
// in a row, as `cat a.gz b.gz` makes, read as their concatenation).
#ifndef DOWNPOUR_DATA_INPUT_PARTS_H_
#define DOWNPOUR_DATA_INPUT_PARTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace downpour::data {
namespace internal {
class FileStream;
}  // namespace internal

// One input file as ExpandInputs found it.
struct InputFile {
  std::string path;
  int64_t size = 0;   // bytes on disk
  bool gzip = false;  // starts with 1f 8b (sniffed, whatever the name)
};

// The files that `patterns` name, in order. Each entry is a file path or a
// glob(3) pattern (it holds '*', '?' or '['); a pattern's matches are sorted
// by name; entries keep their order. Errors, each starting "data.path: ":
//   InvalidArgument: an empty list; a folder, named or matched ("'d' is a
//     folder; name the files, e.g. 'd/*.txt'"); something other than a
//     regular file; a file named twice, by two entries or a pattern and a
//     name (same device and inode), naming both entries.
//   NotFound: "no file matches 'x*.txt'"; "cannot read 'x': No such file or
//     directory" for a missing file.
//   PermissionDenied and others from errno ("cannot read 'x': ...").
absl::StatusOr<std::vector<InputFile>> ExpandInputs(
    const std::vector<std::string>& patterns);

// The byte range [begin, end) of files[file].
struct Segment {
  int file = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// The share of the input one reader reads.
struct InputPart {
  std::vector<Segment> segments;  // in file order
  int64_t bytes() const;          // sum of end - begin
};

// Splits the concatenation of `files` (T bytes in all) into num_parts parts:
// part p covers global bytes [p*T/num_parts, (p+1)*T/num_parts) (integer
// division, so the parts cover every byte once), cut into one Segment per
// file it touches (empty files get none). A gzip file cannot be split: it
// goes whole (begin 0, end size) to the part whose range holds the file's
// first byte, so a part may get no segment at all. REQUIRES: num_parts >= 1.
std::vector<InputPart> PlanParts(const std::vector<InputFile>& files,
                                 int num_parts);

// Where a reader is within a part: `segment` indexes part.segments, and
// `offset` is the byte offset (in that segment's file; for gzip, in the
// decompressed stream) of the next line to read; -1 means the segment's start
// by the line rule. segment == segments.size() is the end of the part.
struct PartPosition {
  int segment = 0;
  int64_t offset = -1;
};

// A run of whole lines of one file, as read.
struct TextChunk {
  // Whole lines, each ending in '\n' except perhaps the file's last; valid
  // until the next call on the reader. Never empty.
  absl::string_view text;
  int file = 0;        // index into files
  int64_t offset = 0;  // byte offset of text[0] in the file (decompressed)
  PartPosition next;   // the position right after this chunk
};

// Streams the lines of one part (by the line rule above), chunk by chunk, in
// bounded memory: a buffer of about buffer_bytes (plus 256 KiB of compressed
// input for gzip), grown only to hold a single line longer than it, up to
// max_line_bytes. A line of more than max_line_bytes - 1 bytes (not counting
// its '\n') fails Next with InvalidArgument "'file': the line at byte N is
// longer than <max_line_bytes - 1> bytes; ...". Not thread-safe.
class PartReader {
 public:
  // REQUIRES: part's segments lie within `files` (as PlanParts makes them);
  // buffer_bytes >= 1; max_line_bytes >= 1.
  PartReader(std::vector<InputFile> files, InputPart part,
             size_t buffer_bytes = size_t{1} << 20,
             int64_t max_line_bytes = (int64_t{1} << 20) + 1);
  ~PartReader();
  PartReader(const PartReader&) = delete;
  PartReader& operator=(const PartReader&) = delete;

  // Continues from `position`: a TextChunk::next or position() of an earlier
  // reader of the same part (e.g. after a restart); a new reader starts at
  // the part's start. InvalidArgument for a position outside the part (a
  // segment out of range; a plain-text offset outside [begin, end] of its
  // segment, or not at a line start). A gzip offset is checked by the Next
  // that reaches it (InvalidArgument when past the stream's end or not at a
  // line start).
  absl::Status Seek(PartPosition position);

  // The next chunk: true with *chunk filled; false at the end of the part
  // (and on every later call). Errors: the errno error naming the file
  // (ReadError in data/file_reader.h); InvalidArgument for corrupt or
  // truncated gzip naming the file, and for a line over max_line_bytes. After
  // an error, Seek before reading on.
  absl::StatusOr<bool> Next(TextChunk* chunk);

  // Where the next Next() starts.
  PartPosition position() const;

  // How much of part.bytes() is consumed: the segments before the current
  // one, plus, in a plain-text segment, its bytes before the next line (up to
  // its end), and in a gzip segment, the compressed bytes inflated so far (all
  // of them once it is done). Bytes before a Seek'ed position count as done;
  // bytes_done() == part.bytes() at the end of the part.
  int64_t bytes_done() const;

 private:
  // OK when a plain-text position.offset is a line start within its segment.
  absl::Status CheckLineStart(PartPosition position) const;
  // Opens the current segment at its start (by the line rule or the Seek'ed
  // offset). *empty: it holds no line to read.
  absl::Status OpenSegment(bool* empty);
  // Starts the byte stream of the current segment at byte `at`.
  absl::Status OpenAt(int64_t at);
  // Moves the cursor just past the next '\n' (or to the end of the file).
  absl::Status SkipPastNewline();
  // Reads more bytes after the buffered ones, keeping the unread line: grows
  // the buffer when that line fills it. Sets eof_ at the end of the stream.
  absl::Status Fill();
  // The end (one past its '\n') of the last whole line of the buffer that
  // starts before limit_, or 0 when it holds none.
  size_t ChunkEnd() const;
  absl::Status CheckLineLengths(size_t begin, size_t end) const;
  absl::Status LineTooLong(int64_t offset) const;
  // Closes the current segment and moves to the next.
  void FinishSegment();
  bool SegmentDone() const;

  // Constant after construction.
  const std::vector<InputFile> files_;
  const InputPart part_;
  const size_t buffer_bytes_;
  const int64_t max_line_bytes_;

  int segment_ = 0;              // index into part_.segments
  int64_t pending_offset_ = -1;  // PartPosition::offset while not open
  int64_t done_before_ = 0;      // bytes of the segments before segment_
  std::unique_ptr<internal::FileStream> source_;  // open segment, or null
  int64_t limit_ = 0;  // lines that start at or past it are not read
  std::vector<char> buffer_;
  int64_t buffer_offset_ = 0;  // file offset of buffer_[0]
  size_t cursor_ = 0;          // buffer_ index of the next line
  size_t size_ = 0;            // bytes held in buffer_
  bool eof_ = false;           // the stream has no bytes after buffer_
};

// The 1-based number of the line that starts at `offset` of `file`: 1 plus
// the '\n' bytes in [0, offset) (of the decompressed stream for gzip). For
// error messages only: it reads the file up to there. Errors as
// PartReader::Next; InvalidArgument when offset is past the file's end.
absl::StatusOr<int64_t> LineNumberAt(const InputFile& file, int64_t offset);

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_INPUT_PARTS_H_

// Expanding data.path, planning byte-range parts, and streaming a part's
// lines. PartReader keeps one buffer: the bytes [buffer_offset_,
// buffer_offset_ + size_) of the open segment's stream, of which those before
// cursor_ are read; the unread tail (a partial line) moves to the front
// before the next read, so each byte is read from the file once.
#include "data/input_parts.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/file_reader.h"
#include "data/file_stream.h"

namespace downpour::data {
namespace {

using internal::FileStream;

absl::Status PathError(const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("data.path: ", status.message()));
}

bool IsPattern(const std::string& entry) {
  return entry.find_first_of("*?[") != std::string::npos;
}

// The paths that `entry` names: itself, or a pattern's sorted matches.
absl::StatusOr<std::vector<std::string>> Matches(const std::string& entry) {
  if (!IsPattern(entry)) return std::vector<std::string>{entry};
  glob_t g;
  const int rc = glob(entry.c_str(), 0, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0) paths.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && paths.empty())) {
    return absl::NotFoundError(
        absl::StrCat("data.path: no file matches '", entry, "'"));
  }
  if (rc != 0) {
    return absl::UnknownError(
        absl::StrCat("data.path: cannot list the matches of '", entry, "'"));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// True when the file starts with the gzip magic.
absl::StatusOr<bool> SniffGzip(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<FileStream> stream,
                   FileStream::Open(path, /*gzip=*/false, 0));
  char magic[2];
  size_t got = 0;
  while (got < 2) {
    ASSIGN_OR_RETURN(size_t n, stream->Read(magic + got, 2 - got));
    if (n == 0) break;
    got += n;
  }
  return HasGzipMagic(absl::string_view(magic, got));
}

// A file already listed: its identity and the entry that named it.
struct Listed {
  dev_t device;
  ino_t inode;
  std::string entry;
};

absl::Status AddFile(const std::string& path, const std::string& entry,
                     std::vector<Listed>* listed,
                     std::vector<InputFile>* files) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return PathError(ReadError(errno, path));
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.path: '", path,
                     "' is a folder; name the files, e.g. '", path, "/*.txt'"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.path: '", path, "' is not a regular file; name data files"));
  }
  for (const Listed& l : *listed) {
    if (l.device == st.st_dev && l.inode == st.st_ino) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.path: '", path, "' is named twice (by '", l.entry,
                       "' and '", entry, "'); name each file once"));
    }
  }
  listed->push_back({st.st_dev, st.st_ino, entry});
  absl::StatusOr<bool> gzip = SniffGzip(path);
  if (!gzip.ok()) return PathError(gzip.status());
  files->push_back({path, static_cast<int64_t>(st.st_size), *gzip});
  return absl::OkStatus();
}

// The first global byte of part p of n over `total` bytes.
int64_t PartStart(int64_t total, int p, int n) {
  return static_cast<int64_t>(static_cast<unsigned __int128>(total) *
                              static_cast<unsigned>(p) /
                              static_cast<unsigned>(n));
}

// The part whose range holds global byte `at` (< total).
int PartOf(int64_t total, int n, int64_t at) {
  int p = static_cast<int>(static_cast<unsigned __int128>(at) * n / total);
  while (p + 1 < n && PartStart(total, p + 1, n) <= at) ++p;
  while (p > 0 && PartStart(total, p, n) > at) --p;
  return p;
}

}  // namespace

absl::StatusOr<std::vector<InputFile>> ExpandInputs(
    const std::vector<std::string>& patterns) {
  if (patterns.empty()) {
    return absl::InvalidArgumentError(
        "data.path: no files named; give a file, a list of files or glob "
        "patterns such as 'data/*.txt'");
  }
  std::vector<InputFile> files;
  std::vector<Listed> listed;
  for (const std::string& entry : patterns) {
    ASSIGN_OR_RETURN(std::vector<std::string> paths, Matches(entry));
    for (const std::string& path : paths) {
      RETURN_IF_ERROR(AddFile(path, entry, &listed, &files));
    }
  }
  return files;
}

int64_t InputPart::bytes() const {
  int64_t sum = 0;
  for (const Segment& s : segments) sum += s.end - s.begin;
  return sum;
}

std::vector<InputPart> PlanParts(const std::vector<InputFile>& files,
                                 int num_parts) {
  std::vector<InputPart> parts(num_parts);
  int64_t total = 0;
  for (const InputFile& f : files) total += f.size;
  int64_t global = 0;  // of the file's first byte
  for (int i = 0; i < static_cast<int>(files.size()); ++i) {
    const InputFile& f = files[i];
    if (f.size == 0) continue;
    int p = PartOf(total, num_parts, global);
    if (f.gzip) {
      parts[p].segments.push_back({i, 0, f.size});
    } else {
      for (; p < num_parts && PartStart(total, p, num_parts) < global + f.size;
           ++p) {
        const int64_t lo = std::max(PartStart(total, p, num_parts), global);
        const int64_t hi =
            std::min(PartStart(total, p + 1, num_parts), global + f.size);
        if (lo < hi) parts[p].segments.push_back({i, lo - global, hi - global});
      }
    }
    global += f.size;
  }
  return parts;
}

PartReader::PartReader(std::vector<InputFile> files, InputPart part,
                       size_t buffer_bytes, int64_t max_line_bytes)
    : files_(std::move(files)),
      part_(std::move(part)),
      buffer_bytes_(std::max<size_t>(buffer_bytes, 1)),
      max_line_bytes_(std::max<int64_t>(max_line_bytes, 1)) {}

PartReader::~PartReader() = default;

absl::Status PartReader::Seek(PartPosition position) {
  const int n = static_cast<int>(part_.segments.size());
  if (position.segment < 0 || position.segment > n || position.offset < -1 ||
      (position.segment == n && position.offset != -1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "position (segment ", position.segment, ", offset ", position.offset,
        ") is outside the part of ", n, " segments"));
  }
  if (position.segment < n && position.offset >= 0) {
    RETURN_IF_ERROR(CheckLineStart(position));
  }
  source_.reset();
  segment_ = position.segment;
  pending_offset_ = position.offset;
  done_before_ = 0;
  for (int i = 0; i < segment_; ++i) {
    done_before_ += part_.segments[i].end - part_.segments[i].begin;
  }
  return absl::OkStatus();
}

absl::Status PartReader::CheckLineStart(PartPosition position) const {
  const Segment& s = part_.segments[position.segment];
  const InputFile& file = files_[s.file];
  if (file.gzip) return absl::OkStatus();  // checked when Next reaches it
  char before = '\n';
  bool inside = position.offset >= s.begin && position.offset <= s.end;
  if (inside && position.offset > 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<FileStream> stream,
                     FileStream::Open(file.path, false, position.offset - 1));
    ASSIGN_OR_RETURN(size_t got, stream->Read(&before, 1));
    inside = got == 1;
  }
  if (!inside || before != '\n') {
    return absl::InvalidArgumentError(
        absl::StrCat("'", file.path, "': position ", position.offset,
                     " is not the start of a line in the part's bytes [",
                     s.begin, ", ", s.end, "]"));
  }
  return absl::OkStatus();
}

absl::Status PartReader::OpenAt(int64_t at) {
  const InputFile& file = files_[part_.segments[segment_].file];
  absl::StatusOr<std::unique_ptr<FileStream>> stream =
      FileStream::Open(file.path, file.gzip, at);
  if (absl::IsOutOfRange(stream.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", file.path, "': position ", at + 1,
                     " is past the end of the decompressed data"));
  }
  if (!stream.ok()) return stream.status();
  source_ = *std::move(stream);
  if (buffer_.size() < buffer_bytes_) buffer_.resize(buffer_bytes_);
  buffer_offset_ = at;
  cursor_ = 0;
  size_ = 0;
  eof_ = false;
  return absl::OkStatus();
}

absl::Status PartReader::SkipPastNewline() {
  while (true) {
    const void* nl =
        std::memchr(buffer_.data() + cursor_, '\n', size_ - cursor_);
    if (nl != nullptr) {
      cursor_ = static_cast<const char*>(nl) - buffer_.data() + 1;
      return absl::OkStatus();
    }
    cursor_ = size_;
    if (eof_) return absl::OkStatus();
    RETURN_IF_ERROR(Fill());
  }
}

absl::Status PartReader::OpenSegment(bool* empty) {
  const Segment& s = part_.segments[segment_];
  const InputFile& file = files_[s.file];
  limit_ = file.gzip ? std::numeric_limits<int64_t>::max() : s.end;
  const bool seeked = pending_offset_ >= 0;
  const int64_t start = seeked ? pending_offset_ : (file.gzip ? 0 : s.begin);
  if (start == 0) {
    RETURN_IF_ERROR(OpenAt(0));
  } else {
    // A line starts at `start` when byte start - 1 is '\n'.
    RETURN_IF_ERROR(OpenAt(start - 1));
    while (size_ == 0 && !eof_) RETURN_IF_ERROR(Fill());
    if (size_ > 0 && buffer_[0] == '\n') {
      cursor_ = 1;
    } else if (seeked) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", file.path, "': position ", start,
                       " is not the start of a line"));
    } else {
      RETURN_IF_ERROR(SkipPastNewline());
    }
  }
  pending_offset_ = -1;
  *empty = SegmentDone();
  return absl::OkStatus();
}

absl::Status PartReader::LineTooLong(int64_t offset) const {
  return absl::InvalidArgumentError(absl::StrCat(
      "'", files_[part_.segments[segment_].file].path, "': the line at byte ",
      offset, " is longer than ", max_line_bytes_ - 1,
      " bytes; is this a text file with one example per line?"));
}

absl::Status PartReader::Fill() {
  if (cursor_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + cursor_, size_ - cursor_);
    buffer_offset_ += cursor_;
    size_ -= cursor_;
    cursor_ = 0;
    if (buffer_.size() > buffer_bytes_ && size_ < buffer_bytes_) {
      buffer_.resize(buffer_bytes_);  // back to size after a long line
      buffer_.shrink_to_fit();
    }
  }
  if (size_ == buffer_.size()) {  // one unfinished line fills the buffer
    if (static_cast<int64_t>(size_) >= max_line_bytes_) {
      return LineTooLong(buffer_offset_);
    }
    buffer_.resize(std::min<int64_t>(2 * size_, max_line_bytes_));
  }
  ASSIGN_OR_RETURN(
      size_t n, source_->Read(buffer_.data() + size_, buffer_.size() - size_));
  size_ += n;
  eof_ = n == 0;
  return absl::OkStatus();
}

size_t PartReader::ChunkEnd() const {
  const char* data = buffer_.data();
  if (limit_ - buffer_offset_ <= static_cast<int64_t>(size_)) {
    // The last line to read is the one holding byte limit_ - 1.
    const size_t last = static_cast<size_t>(limit_ - 1 - buffer_offset_);
    const void* nl = std::memchr(data + last, '\n', size_ - last);
    if (nl != nullptr) return static_cast<const char*>(nl) - data + 1;
  }
  const void* nl = memrchr(data + cursor_, '\n', size_ - cursor_);
  return nl != nullptr ? static_cast<const char*>(nl) - data + 1 : 0;
}

absl::Status PartReader::CheckLineLengths(size_t begin, size_t end) const {
  const char* data = buffer_.data();
  while (begin < end) {
    const void* nl = std::memchr(data + begin, '\n', end - begin);
    const size_t line_end =
        nl != nullptr ? static_cast<const char*>(nl) - data : end;
    if (static_cast<int64_t>(line_end - begin) > max_line_bytes_ - 1) {
      return LineTooLong(buffer_offset_ + begin);
    }
    begin = line_end + 1;
  }
  return absl::OkStatus();
}

bool PartReader::SegmentDone() const {
  return buffer_offset_ + static_cast<int64_t>(cursor_) >= limit_ ||
         (eof_ && cursor_ == size_);
}

void PartReader::FinishSegment() {
  const Segment& s = part_.segments[segment_];
  done_before_ += s.end - s.begin;
  ++segment_;
  pending_offset_ = -1;
  source_.reset();
}

absl::StatusOr<bool> PartReader::Next(TextChunk* chunk) {
  while (segment_ < static_cast<int>(part_.segments.size())) {
    if (source_ == nullptr) {
      bool empty = false;
      if (absl::Status s = OpenSegment(&empty); !s.ok()) {
        source_.reset();
        return s;
      }
      if (empty) FinishSegment();
      continue;
    }
    if (SegmentDone()) {
      FinishSegment();
      continue;
    }
    size_t end = ChunkEnd();
    if (end == 0 && !eof_) {
      RETURN_IF_ERROR(Fill());
      continue;
    }
    if (end == 0) end = size_;  // the file's last line, without its '\n'
    if (buffer_.size() > static_cast<size_t>(max_line_bytes_)) {
      RETURN_IF_ERROR(CheckLineLengths(cursor_, end));
    }
    chunk->text = absl::string_view(buffer_.data() + cursor_, end - cursor_);
    chunk->file = part_.segments[segment_].file;
    chunk->offset = buffer_offset_ + cursor_;
    cursor_ = end;
    chunk->next = position();
    return true;
  }
  return false;
}

PartPosition PartReader::position() const {
  const int n = static_cast<int>(part_.segments.size());
  if (segment_ >= n) return {n, -1};
  if (source_ == nullptr) return {segment_, pending_offset_};
  if (SegmentDone()) return {segment_ + 1, -1};
  return {segment_, buffer_offset_ + static_cast<int64_t>(cursor_)};
}

int64_t PartReader::bytes_done() const {
  if (segment_ >= static_cast<int>(part_.segments.size())) return done_before_;
  const Segment& s = part_.segments[segment_];
  const int64_t length = s.end - s.begin;
  int64_t done = 0;
  if (files_[s.file].gzip) {
    if (source_ != nullptr) {
      done = SegmentDone() ? length : std::min(source_->consumed(), length);
    }
  } else {
    const int64_t at = source_ != nullptr
                           ? buffer_offset_ + static_cast<int64_t>(cursor_)
                           : pending_offset_;
    if (at >= 0) done = std::clamp<int64_t>(at - s.begin, 0, length);
  }
  return done_before_ + done;
}

absl::StatusOr<int64_t> LineNumberAt(const InputFile& file, int64_t offset) {
  ASSIGN_OR_RETURN(std::unique_ptr<FileStream> stream,
                   FileStream::Open(file.path, file.gzip, 0));
  std::vector<char> buffer(size_t{1} << 16);
  int64_t line = 1;
  int64_t left = offset;
  while (left > 0) {
    ASSIGN_OR_RETURN(
        size_t n,
        stream->Read(buffer.data(), std::min<int64_t>(left, buffer.size())));
    if (n == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", file.path, "': byte ", offset, " is past the end of the file"));
    }
    line += std::count(buffer.data(), buffer.data() + n, '\n');
    left -= static_cast<int64_t>(n);
  }
  return line;
}

}  // namespace downpour::data

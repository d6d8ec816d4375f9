// FileStream: the bytes of a file read in order from a given offset, plain
// files with pread and gzip files inflated with zlib as they are read, in
// bounded memory. The byte source of PartReader (data/input_parts.h) and
// LineNumberAt. Internal to data/.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<FileStream> s,
//                    FileStream::Open("a.txt.gz", /*gzip=*/true, 0));
//   ASSIGN_OR_RETURN(size_t n, s->Read(buffer, sizeof(buffer)));  // 0: end
#ifndef DOWNPOUR_DATA_FILE_STREAM_H_
#define DOWNPOUR_DATA_FILE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace downpour::data::internal {

// A file's bytes in order, from an offset. Not thread-safe.
class FileStream {
 public:
  // Opens `path` at byte `at` (of the decompressed stream when `gzip`: gzip
  // data is inflated from its start, and the first `at` bytes dropped).
  // Errors: ReadError (data/file_reader.h) naming the path; for gzip, the
  // errors of Read, and OutOfRange when the stream ends before `at`.
  // REQUIRES: at >= 0.
  static absl::StatusOr<std::unique_ptr<FileStream>> Open(
      const std::string& path, bool gzip, int64_t at);

  virtual ~FileStream() = default;

  // Reads up to n > 0 bytes into dst: how many; 0 only at the end of the
  // stream. Errors: ReadError naming the path; for gzip, InvalidArgument
  // (GzipError) for corrupt or truncated data, or bytes after the last member
  // other than zero padding. Several gzip members in a row read as their
  // concatenation.
  virtual absl::StatusOr<size_t> Read(char* dst, size_t n) = 0;

  // Bytes of the file consumed so far (compressed bytes for gzip).
  virtual int64_t consumed() const = 0;
};

}  // namespace downpour::data::internal

#endif  // DOWNPOUR_DATA_FILE_STREAM_H_

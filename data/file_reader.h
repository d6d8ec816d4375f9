// Whole-file reads for the data readers, gunzipping gzip data whatever the
// file's name.
//
//   absl::StatusOr<std::string> text = ReadFileMaybeGzip("train.csv.gz");
#ifndef DOWNPOUR_DATA_FILE_READER_H_
#define DOWNPOUR_DATA_FILE_READER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace downpour::data {

// The file's bytes, gunzipped when they start with the gzip magic (1f 8b),
// whatever the file's name; several gzip members in a row (as `cat a.gz b.gz`
// makes) decompress to their concatenation. NotFound ("cannot read 'x': No
// such file or directory") when the file is missing; PermissionDenied and the
// like from errno when it cannot be read; InvalidArgument naming the path for
// corrupt or truncated gzip data, bytes after the gzip data, or more than
// max_bytes of output (the file itself, or its decompressed data).
absl::StatusOr<std::string> ReadFileMaybeGzip(const std::string& path,
                                              int64_t max_bytes = int64_t{8}
                                                                  << 30);

// The same for bytes already in memory: `bytes` itself when it does not start
// with the gzip magic, else its decompressed data; `name` stands for the file
// in messages. InvalidArgument as above.
absl::StatusOr<std::string> MaybeGunzip(absl::string_view bytes,
                                        const std::string& name,
                                        int64_t max_bytes = int64_t{8} << 30);

// True when `bytes` starts with the gzip magic 1f 8b.
bool HasGzipMagic(absl::string_view bytes);

// The status for errno `error` while opening or reading `path`: "cannot read
// 'path': <strerror>", NotFound for ENOENT and ENOTDIR, PermissionDenied for
// EACCES and EPERM, InvalidArgument for EISDIR, Unknown otherwise.
absl::Status ReadError(int error, const std::string& path);

// InvalidArgument "'name' is not valid gzip data: <what>; download or
// compress the file again".
absl::Status GzipError(const std::string& name, absl::string_view what);

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_FILE_READER_H_

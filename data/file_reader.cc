// Reading files whole, and gunzipping with zlib's inflate.
#include "data/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace downpour::data {
namespace {

constexpr size_t kMinOutput = 64 << 10;

absl::Status TooLarge(const std::string& path, int64_t max_bytes,
                      bool decompressed) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", path, "' ", decompressed ? "decompresses to" : "holds",
                   " more than ", max_bytes,
                   " bytes, the most this reader "
                   "takes; split the file"));
}

absl::StatusOr<std::string> ReadAll(const std::string& path,
                                    int64_t max_bytes) {
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ReadError(errno, path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return ReadError(errno, path);
  if (S_ISDIR(st.st_mode)) return ReadError(EISDIR, path);
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes) {
    return TooLarge(path, max_bytes, false);
  }
  std::string out;
  // Regular files are read in one go; pipes and devices grow the buffer.
  size_t capacity =
      S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) + 1 : kMinOutput;
  out.resize(capacity);
  size_t size = 0;
  while (true) {
    if (size == out.size()) {
      if (static_cast<int64_t>(size) > max_bytes) {
        return TooLarge(path, max_bytes, false);
      }
      out.resize(out.size() * 2);
    }
    const ssize_t n = read(fd.get(), &out[size], out.size() - size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ReadError(errno, path);
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  if (static_cast<int64_t>(size) > max_bytes) {
    return TooLarge(path, max_bytes, false);
  }
  out.resize(size);
  return out;
}

// The first size of Gunzip's output. The last member's trailer holds its
// size mod 2^32: a good first guess when it is believable (text compresses
// 2-10 times). A truncated or corrupt file ends in arbitrary bytes, so the
// guess is capped, and the output grows by doubling past it.
size_t OutputGuess(absl::string_view bytes, int64_t max_bytes) {
  size_t guess = kMinOutput;
  if (bytes.size() >= 18) {
    uint32_t isize = 0;
    for (int i = 0; i < 4; ++i) {
      isize |= static_cast<uint32_t>(
                   static_cast<unsigned char>(bytes[bytes.size() - 4 + i]))
               << (8 * i);
    }
    guess = std::max<size_t>(
        guess, std::min<uint64_t>(isize, uint64_t{16} * bytes.size()));
  }
  return std::min<uint64_t>(guess, static_cast<uint64_t>(max_bytes) + 1);
}

// At the end of a gzip member with `left` input bytes after it: true when
// another member follows (zs is reset for it), false at the end of the data
// (or of zero padding, as tape archives leave); InvalidArgument for other
// trailing bytes.
absl::StatusOr<bool> NextMember(z_stream* zs, absl::string_view bytes,
                                size_t left, const std::string& name) {
  if (left == 0) return false;
  const absl::string_view rest = bytes.substr(bytes.size() - left);
  if (HasGzipMagic(rest)) {
    if (inflateReset(zs) != Z_OK) return GzipError(name, "reset failed");
    return true;
  }
  if (std::all_of(rest.begin(), rest.end(), [](char c) { return c == 0; })) {
    return false;
  }
  return GzipError(name, absl::StrCat(left, " bytes follow the gzip data"));
}

// Inflates gzip members one after another; zlib's own stream state is
// reset between members.
absl::StatusOr<std::string> Gunzip(absl::string_view bytes,
                                   const std::string& name, int64_t max_bytes) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::ResourceExhaustedError("zlib inflateInit2 failed");
  }
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }
  } end{&zs};
  const size_t guess = OutputGuess(bytes, max_bytes);
  std::string out(guess, '\0');
  size_t size = 0;
  size_t offset = 0;  // of the unread input
  while (true) {
    // zlib counts in uInt: feed at most 1 GiB at a time.
    constexpr size_t kChunk = size_t{1} << 30;
    if (zs.avail_in == 0 && offset < bytes.size()) {
      const size_t n = std::min(kChunk, bytes.size() - offset);
      zs.next_in =
          reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data())) + offset;
      zs.avail_in = static_cast<uInt>(n);
      offset += n;
    }
    if (size == out.size()) {
      if (static_cast<int64_t>(size) > max_bytes) {
        return TooLarge(name, max_bytes, true);
      }
      out.resize(std::min<uint64_t>(out.size() * 2,
                                    static_cast<uint64_t>(max_bytes) + 1));
    }
    const size_t room = std::min(kChunk, out.size() - size);
    zs.next_out = reinterpret_cast<Bytef*>(&out[size]);
    zs.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    size += room - zs.avail_out;
    if (static_cast<int64_t>(size) > max_bytes) {
      return TooLarge(name, max_bytes, true);
    }
    if (rc == Z_STREAM_END) {
      const absl::StatusOr<bool> more =
          NextMember(&zs, bytes, zs.avail_in + (bytes.size() - offset), name);
      if (!more.ok()) return more.status();
      if (!*more) break;
      continue;
    }
    if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == 0 &&
                              offset == bytes.size() && zs.avail_out != 0)) {
      if (zs.avail_in == 0 && offset == bytes.size()) {
        return GzipError(name, absl::StrCat("it is truncated (ends after ",
                                            bytes.size(), " bytes)"));
      }
      continue;  // no room: the loop grows the output
    }
    if (rc != Z_OK) {
      return GzipError(name, zs.msg != nullptr ? zs.msg : "corrupt data");
    }
  }
  out.resize(size);
  return out;
}

}  // namespace

bool HasGzipMagic(absl::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

absl::Status ReadError(int error, const std::string& path) {
  const std::string message =
      absl::StrCat("cannot read '", path, "': ", std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EISDIR:
      return absl::InvalidArgumentError(message);
    default:
      return absl::UnknownError(message);
  }
}

absl::Status GzipError(const std::string& name, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is not valid gzip data: ", what,
                   "; download or compress the file again"));
}

absl::StatusOr<std::string> MaybeGunzip(absl::string_view bytes,
                                        const std::string& name,
                                        int64_t max_bytes) {
  if (!HasGzipMagic(bytes)) {
    if (static_cast<int64_t>(bytes.size()) > max_bytes) {
      return TooLarge(name, max_bytes, false);
    }
    return std::string(bytes);
  }
  return Gunzip(bytes, name, max_bytes);
}

absl::StatusOr<std::string> ReadFileMaybeGzip(const std::string& path,
                                              int64_t max_bytes) {
  absl::StatusOr<std::string> bytes = ReadAll(path, max_bytes);
  if (!bytes.ok() || !HasGzipMagic(*bytes)) return bytes;
  return Gunzip(*bytes, path, max_bytes);
}

}  // namespace downpour::data

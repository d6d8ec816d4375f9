// Plain files are read with pread at a running offset; gzip files through a
// 256 KiB input buffer into zlib's inflate, one member after another.
#include "data/file_stream.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "data/file_reader.h"

namespace downpour::data::internal {
namespace {

constexpr size_t kGzipInput = size_t{256} << 10;

// pread/read that retries EINTR; -1 with errno set on failure.
ssize_t ReadSome(int fd, char* dst, size_t n, int64_t offset) {
  while (true) {
    const ssize_t r =
        offset >= 0 ? pread(fd, dst, n, offset) : read(fd, dst, n);
    if (r >= 0 || errno != EINTR) return r;
  }
}

class PlainStream : public FileStream {
 public:
  PlainStream(int fd, std::string path, int64_t at)
      : fd_(fd), path_(std::move(path)), offset_(at) {}

  absl::StatusOr<size_t> Read(char* dst, size_t n) override {
    const ssize_t r = ReadSome(fd_.get(), dst, n, offset_);
    if (r < 0) return ReadError(errno, path_);
    offset_ += r;
    return static_cast<size_t>(r);
  }
  int64_t consumed() const override { return offset_; }

 private:
  ScopedFd fd_;
  const std::string path_;
  int64_t offset_;
};

class GzipStream : public FileStream {
 public:
  GzipStream(int fd, std::string path)
      : fd_(fd), path_(std::move(path)), input_(kGzipInput) {
    std::memset(&zs_, 0, sizeof(zs_));
  }
  ~GzipStream() override {
    if (initialized_) inflateEnd(&zs_);
  }

  absl::Status Init() {
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) {
      return absl::ResourceExhaustedError("zlib inflateInit2 failed");
    }
    initialized_ = true;
    return absl::OkStatus();
  }
  absl::StatusOr<size_t> Read(char* dst, size_t n) override;
  int64_t consumed() const override { return file_offset_ - zs_.avail_in; }

 private:
  // Refills the input after the unread bytes; *got: bytes added (0 at EOF).
  absl::Status ReadInput(size_t* got);
  // After a member's end: starts the next member, or sets ended_ at the end
  // of the data (or of zero padding).
  absl::Status NextMember();

  ScopedFd fd_;
  const std::string path_;
  std::vector<char> input_;
  z_stream zs_;
  bool initialized_ = false;
  int64_t file_offset_ = 0;  // bytes read from the file
  bool ended_ = false;       // no bytes after the last member's end
};

absl::Status GzipStream::ReadInput(size_t* got) {
  if (zs_.avail_in > 0 &&
      zs_.next_in != reinterpret_cast<Bytef*>(input_.data())) {
    std::memmove(input_.data(), zs_.next_in, zs_.avail_in);
  }
  const size_t held = zs_.avail_in;
  const ssize_t r =
      ReadSome(fd_.get(), input_.data() + held, input_.size() - held, -1);
  if (r < 0) return ReadError(errno, path_);
  file_offset_ += r;
  zs_.next_in = reinterpret_cast<Bytef*>(input_.data());
  zs_.avail_in = static_cast<uInt>(held + r);
  *got = static_cast<size_t>(r);
  return absl::OkStatus();
}

absl::Status GzipStream::NextMember() {
  size_t got = 1;
  while (zs_.avail_in < 2 && got > 0) {
    if (absl::Status s = ReadInput(&got); !s.ok()) return s;
  }
  const absl::string_view rest(reinterpret_cast<const char*>(zs_.next_in),
                               zs_.avail_in);
  if (HasGzipMagic(rest)) {
    if (inflateReset(&zs_) != Z_OK) return GzipError(path_, "reset failed");
    return absl::OkStatus();
  }
  // Zero padding (as tape archives leave) ends the data; anything else is
  // an error.
  while (true) {
    for (size_t i = 0; i < zs_.avail_in; ++i) {
      if (zs_.next_in[i] != 0) {
        return GzipError(path_,
                         absl::StrCat("bytes follow the gzip data at byte ",
                                      consumed() + i));
      }
    }
    zs_.avail_in = 0;
    if (absl::Status s = ReadInput(&got); !s.ok()) return s;
    if (got == 0) break;
  }
  ended_ = true;
  return absl::OkStatus();
}

absl::StatusOr<size_t> GzipStream::Read(char* dst, size_t n) {
  zs_.next_out = reinterpret_cast<Bytef*>(dst);
  zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
  const uInt room = zs_.avail_out;
  while (!ended_ && zs_.avail_out == room) {
    if (zs_.avail_in == 0) {
      size_t got = 0;
      if (absl::Status s = ReadInput(&got); !s.ok()) return s;
      if (got == 0) {
        return GzipError(path_, absl::StrCat("it is truncated (ends after ",
                                             file_offset_, " bytes)"));
      }
    }
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      if (absl::Status s = NextMember(); !s.ok()) return s;
    } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && zs_.avail_in == 0)) {
      return GzipError(path_, zs_.msg != nullptr ? zs_.msg : "corrupt data");
    }
  }
  return static_cast<size_t>(room - zs_.avail_out);
}

// Reads and drops the first `count` bytes of `stream`.
absl::Status Skip(FileStream* stream, int64_t count) {
  std::vector<char> scratch(std::min<int64_t>(count, int64_t{1} << 20));
  while (count > 0) {
    const absl::StatusOr<size_t> n =
        stream->Read(scratch.data(), std::min<int64_t>(count, scratch.size()));
    if (!n.ok()) return n.status();
    if (*n == 0)
      return absl::OutOfRangeError("the stream ends before the offset");
    count -= static_cast<int64_t>(*n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileStream>> FileStream::Open(
    const std::string& path, bool gzip, int64_t at) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ReadError(errno, path);
  if (!gzip) return std::unique_ptr<FileStream>(new PlainStream(fd, path, at));
  auto stream = std::make_unique<GzipStream>(fd, path);
  if (absl::Status s = stream->Init(); !s.ok()) return s;
  if (absl::Status s = Skip(stream.get(), at); !s.ok()) return s;
  return std::unique_ptr<FileStream>(std::move(stream));
}

}  // namespace downpour::data::internal

// Checkpoint encoding, atomic file replacement and verification on read.
#include "server/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/file_util.h"
#include "common/checksum.h"
#include "common/status_macros.h"

#ifndef ABSL_IS_LITTLE_ENDIAN
#error "checkpoints store float32 bytes as they are: little-endian hosts only"
#endif

namespace downpour::server {
namespace {

constexpr char kMagic[8] = {'D', 'P', 'N', 'C', 'K', 'P', 'T', '\0'};
constexpr size_t kHeaderSize = 8 + 4 + 8;  // magic, format, file size
constexpr size_t kCrcSize = 4;
constexpr size_t kBufferSize = 1 << 20;

// `what` is a plain C string so that nothing allocates (and may touch errno)
// before errno is read.
absl::Status IoError(const char* what, const std::string& path) {
  const int error = errno;
  return absl::ErrnoToStatus(error, absl::StrCat(what, " '", path, "'"));
}

constexpr char kWriteWhat[] = "write checkpoint";

// Buffers little-endian fields into a file, keeping their running CRC-32C.
class Encoder {
 public:
  Encoder(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
    buffer_.reserve(kBufferSize);
  }

  void PutU32(uint32_t v) {
    char bytes[4];
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
    Put(bytes, sizeof(bytes));
  }
  void PutU64(uint64_t v) {
    char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
    Put(bytes, sizeof(bytes));
  }
  void PutI32(int32_t v) { PutU32(static_cast<uint32_t>(v)); }
  void PutString(const std::string& s) {
    PutU32(static_cast<uint32_t>(s.size()));
    Put(s.data(), s.size());
  }
  void PutFloats(const std::vector<float>& v) {
    Put(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  }
  void Put(const char* data, size_t n) {
    crc_ = Crc32c(data, n, crc_);
    size_ += n;
    if (buffer_.size() + n > kBufferSize) Flush();
    if (n >= kBufferSize) {  // large float arrays go straight to the file
      if (status_.ok()) status_ = WriteAll(fd_, data, n, kWriteWhat, path_);
      return;
    }
    buffer_.append(data, n);
  }

  // Writes the CRC of everything so far, then flushes. Returns the first error.
  absl::Status Finish() {
    PutU32(crc_);
    Flush();
    return status_;
  }
  uint64_t size() const { return size_; }  // bytes put so far, the CRC included

 private:
  void Flush() {
    if (status_.ok())
      status_ = WriteAll(fd_, buffer_.data(), buffer_.size(), kWriteWhat, path_);
    buffer_.clear();
  }

  const int fd_;
  const std::string path_;
  std::string buffer_;
  uint32_t crc_ = 0;
  uint64_t size_ = 0;
  absl::Status status_;
};

uint64_t EncodedSize(const Checkpoint& c) {
  uint64_t size = kHeaderSize + 4 + 8 + 4 + c.optimizer.size();
  size += 4 + c.sequences.size() * (4 + 8 + 8);
  size += 4;
  for (const BlockStore::BlockSnapshot& b : c.blocks) {
    size += 4 + 8 + 8 + 8 + (b.values.size() + b.state.size()) * sizeof(float);
  }
  return size + kCrcSize;
}

// Writes the whole file body (see the layout in checkpoint.h) to `fd`.
absl::Status Encode(const Checkpoint& c, int fd, const std::string& path) {
  Encoder e(fd, path);
  const uint64_t expected_size = EncodedSize(c);
  e.Put(kMagic, sizeof(kMagic));
  e.PutU32(kCheckpointFormat);
  e.PutU64(expected_size);
  e.PutI32(c.shard_index);
  e.PutU64(c.placement_epoch);
  e.PutString(c.optimizer);
  e.PutU32(static_cast<uint32_t>(c.sequences.size()));
  for (const auto& [worker, window] : c.sequences) {
    e.PutI32(worker);
    e.PutU64(window.base());
    e.PutU64(window.mask());
  }
  e.PutU32(static_cast<uint32_t>(c.blocks.size()));
  for (const BlockStore::BlockSnapshot& b : c.blocks) {
    e.PutU32(b.id);
    e.PutU64(b.version);
    e.PutU64(b.values.size());
    e.PutU64(b.state.size());
    e.PutFloats(b.values);
    e.PutFloats(b.state);
  }
  RETURN_IF_ERROR(e.Finish());
  if (e.size() != expected_size) {  // EncodedSize and this function disagree
    return absl::InternalError(
        absl::StrCat("write checkpoint '", path, "': wrote ", e.size(),
                     " bytes, expected ", expected_size));
  }
  return absl::OkStatus();
}

// --- Reading ---------------------------------------------------------------

absl::Status Corrupt(const std::string& path, const std::string& detail) {
  return absl::DataLossError(
      absl::StrCat("checkpoint '", path, "' is corrupt (", detail,
                   "); move it away to start from fresh parameters, or restore "
                   "a good copy"));
}

absl::Status NotACheckpoint(const std::string& path) {
  return absl::DataLossError(absl::StrCat(
      "checkpoint '", path,
      "' is not a Downpour checkpoint (it does not start with \"DPNCKPT\"); "
      "move it "
      "away to start from fresh parameters, or restore a good copy"));
}

// Reads little-endian fields from bytes; reading past the end clears ok().
class Decoder {
 public:
  Decoder(const char* data, size_t size) : p_(data), left_(size) {}

  bool ok() const { return ok_; }
  size_t left() const { return left_; }

  uint32_t U32() { return static_cast<uint32_t>(Little(4)); }
  uint64_t U64() { return Little(8); }
  int32_t I32() { return static_cast<int32_t>(U32()); }
  std::string String() {
    uint32_t n = U32();
    if (!Has(n)) return std::string();
    std::string s(p_, n);
    Skip(n);
    return s;
  }
  std::vector<float> Floats(uint64_t n) {
    if (n > left_ / sizeof(float)) ok_ = false;
    if (!ok_) return {};
    std::vector<float> v(n);
    std::memcpy(v.data(), p_, n * sizeof(float));
    Skip(n * sizeof(float));
    return v;
  }

 private:
  bool Has(uint64_t n) {
    if (n > left_) ok_ = false;
    return ok_;
  }
  void Skip(size_t n) {
    p_ += n;
    left_ -= n;
  }
  uint64_t Little(int bytes) {
    if (!Has(bytes)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      v |= uint64_t{static_cast<unsigned char>(p_[i])} << (8 * i);
    }
    Skip(bytes);
    return v;
  }

  const char* p_;
  size_t left_;
  bool ok_ = true;
};

uint32_t LoadU32(const char* p) {
  Decoder d(p, 4);
  return d.U32();
}

// Checks magic, format, size and checksum of a whole file.
absl::Status Verify(const std::string& path, const std::string& file) {
  const size_t magic_bytes = std::min(file.size(), sizeof(kMagic));
  if (std::memcmp(file.data(), kMagic, magic_bytes) != 0)
    return NotACheckpoint(path);
  if (file.size() < kHeaderSize + kCrcSize) {
    return Corrupt(path, absl::StrCat("truncated: ", file.size(), " bytes"));
  }
  Decoder header(file.data() + sizeof(kMagic), kHeaderSize - sizeof(kMagic));
  const uint32_t format = header.U32();
  if (format != kCheckpointFormat && format != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint '", path, "' was written by format ", format,
        ", this build reads formats 1-", kCheckpointFormat,
        "; use the matching build, or move it away to start fresh"));
  }
  const uint64_t declared = header.U64();
  if (file.size() < declared) {
    return Corrupt(path, absl::StrCat("truncated: ", file.size(), " of ",
                                      declared, " bytes"));
  }
  if (file.size() > declared) {
    return Corrupt(
        path,
        absl::StrCat(file.size(), " bytes, but its header says ", declared));
  }
  const size_t body = file.size() - kCrcSize;
  const uint32_t stored = LoadU32(file.data() + body);
  const uint32_t computed = Crc32c(file.data(), body);
  if (stored != computed) {
    return Corrupt(path, absl::StrFormat("checksum mismatch: stored 0x%08x, "
                                         "computed 0x%08x",
                                         stored, computed));
  }
  return absl::OkStatus();
}

// Decodes the fields after the header of a verified file.
absl::StatusOr<Checkpoint> Decode(const std::string& path,
                                  const std::string& file) {
  Decoder d(file.data() + kHeaderSize, file.size() - kHeaderSize - kCrcSize);
  const uint32_t format = LoadU32(file.data() + sizeof(kMagic));
  Checkpoint c;
  c.shard_index = d.I32();
  c.placement_epoch = d.U64();
  c.optimizer = d.String();
  const uint32_t num_sequences = d.U32();
  for (uint32_t i = 0; i < num_sequences && d.ok(); ++i) {
    const int32_t worker = d.I32();
    const uint64_t base = d.U64();
    // Format 1 sequences counted from the wall clock: they mean nothing to
    // incarnation-numbered pushes, so they are dropped.
    const uint64_t mask = format == 1 ? 0 : d.U64();
    if (format != 1) c.sequences[worker] = SequenceWindow(base, mask);
  }
  const uint32_t num_blocks = d.U32();
  for (uint32_t i = 0; i < num_blocks && d.ok(); ++i) {
    BlockStore::BlockSnapshot& b = c.blocks.emplace_back();
    b.id = d.U32();
    b.version = d.U64();
    const uint64_t num_values = d.U64();
    const uint64_t num_state = d.U64();
    b.values = d.Floats(num_values);
    b.state = d.Floats(num_state);
  }
  if (!d.ok() || d.left() != 0) {
    return Corrupt(path, "checksum matches but the fields do not fit the file");
  }
  return c;
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& path,
                             const Checkpoint& checkpoint) {
  return WriteFileAtomically(path, kWriteWhat, [&](int fd, const std::string& tmp) {
    return Encode(checkpoint, fd, tmp);
  });
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) {
  absl::StatusOr<std::string> file = ReadFile(path);
  if (absl::IsNotFound(file.status())) {
    return absl::NotFoundError(absl::StrCat("checkpoint '", path, "' does not exist"));
  }
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("read checkpoint: ", file.status().message()));
  }
  RETURN_IF_ERROR(Verify(path, *file));
  return Decode(path, *file);
}

std::string CheckpointPath(const std::string& dir, int shard_index) {
  const char* separator = (!dir.empty() && dir.back() == '/') ? "" : "/";
  return absl::StrCat(dir, separator, "ps-", shard_index, ".ckpt");
}

}  // namespace downpour::server

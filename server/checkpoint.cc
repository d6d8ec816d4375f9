// Checkpoint encoding, atomic file replacement and verification on read.
#include "server/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/file_util.h"
#include "common/status_macros.h"

#ifndef ABSL_IS_LITTLE_ENDIAN
#error "checkpoints store float32 bytes as they are: little-endian hosts only"
#endif

namespace downpour::server {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'D', 'P', 'N', 'C', 'K', 'P', 'T', '\0'};
constexpr char kManifestMagic[8] = {'D', 'P', 'N', 'M', 'A', 'N', 'I', '\0'};
constexpr uint32_t kManifestFormat = 1;
constexpr size_t kHeaderSize = 8 + 4 + 8;  // magic, format, file size
constexpr size_t kCrcSize = 4;
constexpr size_t kBufferSize = 1 << 20;

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
    final_crc_ = crc_;
    PutU32(crc_);
    Flush();
    return status_;
  }
  uint64_t size() const { return size_; }  // bytes put so far, the CRC included
  uint32_t final_crc() const { return final_crc_; }  // after Finish

 private:
  void Flush() {
    if (status_.ok())
      status_ =
          WriteAll(fd_, buffer_.data(), buffer_.size(), kWriteWhat, path_);
    buffer_.clear();
  }

  const int fd_;
  const std::string path_;
  std::string buffer_;
  uint32_t crc_ = 0;
  uint32_t final_crc_ = 0;
  uint64_t size_ = 0;
  absl::Status status_;
};

// A file's size and CRC-32C, as a manifest lists it.
struct Trailer {
  uint64_t bytes = 0;
  uint32_t crc = 0;
};

uint64_t EncodedSize(const Checkpoint& c, uint32_t format) {
  uint64_t size = kHeaderSize + 4 + 8 + 4 + c.optimizer.size();
  if (format >= 3) size += 8 + 8;
  if (format >= 5) size += 4 + 8 + 8;
  size += 4 + c.sequences.size() * (4 + 8 + (format == 1 ? 0 : 8));
  size += 4;
  for (const BlockStore::BlockSnapshot& b : c.blocks) {
    size += 4 + 8 + 8 + 8 + (b.values.size() + b.state.size()) * sizeof(float);
  }
  if (format >= 4) {
    size += 4;
    for (const auto& [id, rows] : c.sparse_tables) {
      size += 4 * 4 + 8 + rows.keys.size() * (8 + 4) +
              rows.data.size() * sizeof(float);
      if (format >= 5) {
        size += 8 + 8 + 4 + rows.clocks.size() * 8 + 8 +
                rows.evicted_keys.size() * 8;
      }
    }
  }
  return size + kCrcSize;
}

// Writes the whole file body (see the layout in checkpoint.h) to `fd`; its
// size and CRC into *trailer.
absl::Status Encode(const Checkpoint& c, uint32_t format, int fd,
                    const std::string& path, Trailer* trailer) {
  for (const auto& [id, rows] : c.sparse_tables) {
    if (!rows.clocks.empty() && rows.clocks.size() != rows.keys.size()) {
      return absl::InternalError(absl::StrCat(
          "write checkpoint '", path, "': sparse table ", id, " has ",
          rows.keys.size(), " keys but ", rows.clocks.size(), " clocks"));
    }
  }
  Encoder e(fd, path);
  const uint64_t expected_size = EncodedSize(c, format);
  e.Put(kMagic, sizeof(kMagic));
  e.PutU32(format);
  e.PutU64(expected_size);
  e.PutI32(c.shard_index);
  e.PutU64(c.placement_epoch);
  if (format >= 3) {
    e.PutU64(c.model_fingerprint);
    e.PutU64(c.generation);
  }
  if (format >= 5) {
    e.PutU32(static_cast<uint32_t>(c.kind));
    e.PutU64(c.base_generation);
    e.PutU64(c.parent_generation);
  }
  e.PutString(c.optimizer);
  e.PutU32(static_cast<uint32_t>(c.sequences.size()));
  for (const auto& [worker, window] : c.sequences) {
    e.PutI32(worker);
    e.PutU64(window.base());
    if (format != 1) e.PutU64(window.mask());
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
  if (format >= 4) {
    e.PutU32(static_cast<uint32_t>(c.sparse_tables.size()));
    for (const auto& [id, rows] : c.sparse_tables) {
      e.PutU32(id);
      e.PutU32(static_cast<uint32_t>(rows.dim));
      e.PutU32(static_cast<uint32_t>(rows.state_slots));
      e.PutU32(static_cast<uint32_t>(rows.optimizer));
      e.PutU64(rows.keys.size());
      e.Put(reinterpret_cast<const char*>(rows.keys.data()),
            rows.keys.size() * sizeof(uint64_t));
      e.Put(reinterpret_cast<const char*>(rows.versions.data()),
            rows.versions.size() * sizeof(uint32_t));
      e.PutFloats(rows.data);
      if (format >= 5) {
        e.PutU64(rows.clock);
        e.PutU64(rows.evicted_versions);
        e.PutU32(rows.clocks.empty() ? 0 : 1);
        e.Put(reinterpret_cast<const char*>(rows.clocks.data()),
              rows.clocks.size() * sizeof(uint64_t));
        e.PutU64(rows.evicted_keys.size());
        e.Put(reinterpret_cast<const char*>(rows.evicted_keys.data()),
              rows.evicted_keys.size() * sizeof(uint64_t));
      }
    }
  }
  RETURN_IF_ERROR(e.Finish());
  if (e.size() != expected_size) {  // EncodedSize and this function disagree
    return absl::InternalError(
        absl::StrCat("write checkpoint '", path, "': wrote ", e.size(),
                     " bytes, expected ", expected_size));
  }
  if (trailer != nullptr) *trailer = {e.size(), e.final_crc()};
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
  // n raw bytes into out (little-endian arrays on a little-endian host).
  void Bytes(char* out, uint64_t n) {
    if (!Has(n)) return;
    std::memcpy(out, p_, n);
    Skip(n);
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
  if (format < 1 || format > kCheckpointFormat) {
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
  c.format = format;
  c.shard_index = d.I32();
  c.placement_epoch = d.U64();
  if (format >= 3) {
    c.model_fingerprint = d.U64();
    c.generation = d.U64();
  }
  if (format >= 5) {
    const uint32_t kind = d.U32();
    if (kind > 1) return Corrupt(path, absl::StrCat("unknown kind ", kind));
    c.kind = static_cast<CheckpointKind>(kind);
    c.base_generation = d.U64();
    c.parent_generation = d.U64();
  }
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
  const uint32_t num_tables = format >= 4 ? d.U32() : 0;
  for (uint32_t i = 0; i < num_tables && d.ok(); ++i) {
    auto& [id, rows] = c.sparse_tables.emplace_back();
    id = d.U32();
    rows.dim = static_cast<int>(d.U32());
    rows.state_slots = static_cast<int>(d.U32());
    const uint32_t optimizer = d.U32();
    const uint64_t n = d.U64();
    if (rows.dim < 1 || rows.dim > 4096 || rows.state_slots < 0 ||
        rows.state_slots > 2 || optimizer > 3 || n > d.left() / 12) {
      return Corrupt(
          path, absl::StrCat("sparse table ", id, " has an impossible shape"));
    }
    rows.optimizer = static_cast<SparseOptimizerType>(optimizer);
    rows.keys.resize(n);
    rows.versions.resize(n);
    d.Bytes(reinterpret_cast<char*>(rows.keys.data()), n * sizeof(uint64_t));
    d.Bytes(reinterpret_cast<char*>(rows.versions.data()),
            n * sizeof(uint32_t));
    rows.data = d.Floats(n * rows.dim * (1 + rows.state_slots));
    if (format >= 5 && d.ok()) {
      rows.clock = d.U64();
      rows.evicted_versions = d.U64();
      const uint32_t flags = d.U32();
      if (flags > 1 || (flags == 1 && n > d.left() / 8)) {
        return Corrupt(
            path, absl::StrCat("sparse table ", id, " has impossible clocks"));
      }
      if (flags == 1) {
        rows.clocks.resize(n);
        d.Bytes(reinterpret_cast<char*>(rows.clocks.data()),
                n * sizeof(uint64_t));
      }
      const uint64_t e = d.U64();
      if (e > d.left() / 8) {
        return Corrupt(path, absl::StrCat("sparse table ", id,
                                          " has impossible evicted keys"));
      }
      rows.evicted_keys.resize(e);
      d.Bytes(reinterpret_cast<char*>(rows.evicted_keys.data()),
              e * sizeof(uint64_t));
    }
  }
  if (!d.ok() || d.left() != 0) {
    return Corrupt(path, "checksum matches but the fields do not fit the file");
  }
  return c;
}

// The largest epoch or generation a file name holds (12 digits).
constexpr uint64_t kMaxNamedNumber = 999999999999ull;

std::string WithSlash(const std::string& dir) {
  return (!dir.empty() && dir.back() == '/') ? dir : absl::StrCat(dir, "/");
}

// "e<12 digits>-g<12 digits>.ckpt" (GenerationFileName), or nullopt.
std::optional<ShardCheckpoints::Generation> ParseGenerationName(
    const std::string& name) {
  constexpr size_t kDigits = 12;
  constexpr size_t kPrefix = 1 + kDigits + 2 + kDigits;
  using Kind = ShardCheckpoints::FileKind;
  static constexpr std::pair<const char*, Kind> kSuffixes[] = {
      {".ckpt", Kind::kFull},
      {".delta", Kind::kDelta},
      {".manifest", Kind::kManifest}};
  if (name.size() <= kPrefix || name[0] != 'e' ||
      name.compare(1 + kDigits, 2, "-g") != 0) {
    return std::nullopt;
  }
  ShardCheckpoints::Generation generation;
  bool known = false;
  for (const auto& [suffix, kind] : kSuffixes) {
    if (name.compare(kPrefix, std::string::npos, suffix) == 0) {
      generation.kind = kind;
      known = true;
    }
  }
  if (!known) return std::nullopt;
  if (!absl::SimpleAtoi(name.substr(1, kDigits), &generation.placement_epoch) ||
      !absl::SimpleAtoi(name.substr(3 + kDigits, kDigits),
                        &generation.generation)) {
    return std::nullopt;
  }
  return generation;
}

absl::StatusCode ErrorCodeToStatusCode(const std::error_code& error) {
  return absl::ErrnoToStatusCode(error.value());
}

// Reads and verifies a checkpoint file; its size and CRC into *trailer.
absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path,
                                              Trailer* trailer) {
  absl::StatusOr<std::string> file = ReadFile(path);
  if (absl::IsNotFound(file.status())) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint '", path, "' does not exist"));
  }
  if (!file.ok()) {
    return absl::Status(
        file.status().code(),
        absl::StrCat("read checkpoint: ", file.status().message()));
  }
  RETURN_IF_ERROR(Verify(path, *file));
  if (trailer != nullptr) {
    *trailer = {file->size(), LoadU32(file->data() + file->size() - kCrcSize)};
  }
  return Decode(path, *file);
}

// --- Manifests ---------------------------------------------------------------

struct Manifest {
  int32_t shard_index = 0;
  uint64_t base_generation = 0;
  std::vector<ShardCheckpoints::ChainEntry> entries;
};

constexpr size_t kManifestEntrySize = 8 + 8 + 8 + 4;
// A manifest of more bytes than this is not read (a chain of a million).
constexpr size_t kMaxManifestBytes = size_t{32} << 20;

absl::Status EncodeManifest(const Manifest& m, int fd,
                            const std::string& path) {
  Encoder e(fd, path);
  const uint64_t size = kHeaderSize + 4 + 8 + 4 +
                        m.entries.size() * kManifestEntrySize + kCrcSize;
  e.Put(kManifestMagic, sizeof(kManifestMagic));
  e.PutU32(kManifestFormat);
  e.PutU64(size);
  e.PutI32(m.shard_index);
  e.PutU64(m.base_generation);
  e.PutU32(static_cast<uint32_t>(m.entries.size()));
  for (const ShardCheckpoints::ChainEntry& entry : m.entries) {
    e.PutU64(entry.placement_epoch);
    e.PutU64(entry.generation);
    e.PutU64(entry.bytes);
    e.PutU32(entry.crc);
  }
  RETURN_IF_ERROR(e.Finish());
  if (e.size() != size) {
    return absl::InternalError(absl::StrCat("write checkpoint manifest '", path,
                                            "': wrote ", e.size(),
                                            " bytes, expected ", size));
  }
  return absl::OkStatus();
}

absl::Status BadManifest(const std::string& path, const std::string& detail) {
  return absl::DataLossError(absl::StrCat("checkpoint manifest '", path,
                                          "' is corrupt (", detail, ")"));
}

absl::StatusOr<Manifest> ReadManifest(const std::string& path) {
  absl::StatusOr<std::string> file = ReadFile(path, kMaxManifestBytes);
  if (!file.ok()) {
    return absl::Status(
        file.status().code(),
        absl::StrCat("read checkpoint manifest: ", file.status().message()));
  }
  if (file->size() < kHeaderSize + 4 + 8 + 4 + kCrcSize ||
      std::memcmp(file->data(), kManifestMagic, sizeof(kManifestMagic)) != 0) {
    return BadManifest(path, "not a manifest, or truncated");
  }
  Decoder header(file->data() + sizeof(kManifestMagic),
                 kHeaderSize - sizeof(kManifestMagic));
  const uint32_t format = header.U32();
  const uint64_t declared = header.U64();
  if (format != kManifestFormat) {
    return BadManifest(
        path, absl::StrCat("manifest format ", format, ", this build reads ",
                           kManifestFormat));
  }
  if (declared != file->size()) {
    return BadManifest(
        path, absl::StrCat(file->size(), " bytes, its header says ", declared));
  }
  const size_t body = file->size() - kCrcSize;
  const uint32_t stored = LoadU32(file->data() + body);
  const uint32_t computed = Crc32c(file->data(), body);
  if (stored != computed) {
    return BadManifest(path,
                       absl::StrFormat("checksum mismatch: stored 0x%08x, "
                                       "computed 0x%08x",
                                       stored, computed));
  }
  Decoder d(file->data() + kHeaderSize, body - kHeaderSize);
  Manifest m;
  m.shard_index = d.I32();
  m.base_generation = d.U64();
  const uint32_t n = d.U32();
  if (n > d.left() / kManifestEntrySize) {
    return BadManifest(path, "checksum matches but the entries do not fit");
  }
  for (uint32_t i = 0; i < n; ++i) {
    ShardCheckpoints::ChainEntry& entry = m.entries.emplace_back();
    entry.placement_epoch = d.U64();
    entry.generation = d.U64();
    entry.bytes = d.U64();
    entry.crc = d.U32();
  }
  if (!d.ok() || d.left() != 0) {
    return BadManifest(path, "checksum matches but the fields do not fit");
  }
  return m;
}

absl::Status WriteInFormat(const std::string& path, const Checkpoint& c,
                           uint32_t format,
                           const std::function<absl::Status()>& before_rename,
                           Trailer* trailer = nullptr) {
  return WriteFileAtomically(
      path, kWriteWhat, [&](int fd, const std::string& tmp) -> absl::Status {
        RETURN_IF_ERROR(Encode(c, format, fd, tmp, trailer));
        return before_rename ? before_rename() : absl::OkStatus();
      });
}

// A write error with what to do about it, for the errors an operator can fix.
absl::Status WithFix(const absl::Status& status) {
  if (status.ok()) return status;
  const char* fix = nullptr;
  if (absl::StrContains(status.message(), std::strerror(ENOSPC)) ||
      absl::StrContains(status.message(), std::strerror(EDQUOT))) {
    fix =
        "free space on the checkpoint volume or point checkpoint.dir at "
        "another one";
  } else if (absl::IsPermissionDenied(status) ||
             absl::StrContains(status.message(), std::strerror(EROFS))) {
    fix =
        "make checkpoint.dir writable by this daemon's user or point it "
        "elsewhere";
  }
  if (fix == nullptr) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), "; ", fix));
}

}  // namespace

absl::Status WriteCheckpoint(
    const std::string& path, const Checkpoint& checkpoint,
    const std::function<absl::Status()>& before_rename) {
  return WithFix(
      WriteInFormat(path, checkpoint, kCheckpointFormat, before_rename));
}

absl::Status WriteCheckpointInFormatForTest(const std::string& path,
                                            const Checkpoint& checkpoint,
                                            uint32_t format) {
  return WriteInFormat(path, checkpoint, format, nullptr);
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) {
  return ReadCheckpointFile(path, nullptr);
}

std::string CheckpointPath(const std::string& dir, int shard_index) {
  return absl::StrCat(WithSlash(dir), "ps-", shard_index, ".ckpt");
}

std::string ShardCheckpointDir(const std::string& dir, int shard_index) {
  return absl::StrCat(WithSlash(dir), "ps-", shard_index);
}

std::string GenerationFileName(uint64_t placement_epoch, uint64_t generation) {
  return absl::StrFormat("e%012u-g%012u.ckpt", placement_epoch, generation);
}

std::string DeltaFileName(uint64_t placement_epoch, uint64_t generation) {
  return absl::StrFormat("e%012u-g%012u.delta", placement_epoch, generation);
}

std::string ManifestFileName(uint64_t placement_epoch, uint64_t generation) {
  return absl::StrFormat("e%012u-g%012u.manifest", placement_epoch, generation);
}

absl::StatusOr<Checkpoint> ReadNewestCheckpoint(const std::string& dir,
                                                int shard_index) {
  ASSIGN_OR_RETURN(ShardCheckpoints::Loaded loaded,
                   ShardCheckpoints({dir, shard_index}).ReadNewest());
  return std::move(loaded.checkpoint);
}

// --- ShardCheckpoints --------------------------------------------------------

ShardCheckpoints::ShardCheckpoints(Options options)
    : options_(std::move(options)),
      folder_(ShardCheckpointDir(options_.dir, options_.shard_index)) {}

absl::StatusOr<std::vector<ShardCheckpoints::Generation>>
ShardCheckpoints::List() const {
  std::vector<Generation> generations;
  std::error_code error;
  fs::directory_iterator it(folder_, error);
  if (error == std::errc::no_such_file_or_directory) return generations;
  for (; !error && it != fs::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::optional<Generation> generation = ParseGenerationName(name);
    if (!generation.has_value()) continue;
    generation->path = it->path().string();
    generations.push_back(*std::move(generation));
  }
  if (error) {
    return absl::Status(ErrorCodeToStatusCode(error),
                        absl::StrCat("cannot list checkpoint folder '", folder_,
                                     "': ", error.message()));
  }
  std::sort(generations.begin(), generations.end(),
            [](const Generation& a, const Generation& b) {
              return std::tie(a.placement_epoch, a.generation) >
                     std::tie(b.placement_epoch, b.generation);
            });
  return generations;
}

absl::Status ShardCheckpoints::CheckBelongs(const std::string& path,
                                            const Checkpoint& loaded) const {
  const int index = options_.shard_index;
  if (loaded.shard_index != index) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint '", path, "' holds shard ", loaded.shard_index,
                     ", but this is ps ", index,
                     ": a checkpoint of another shard was put in its place; "
                     "move it back to ",
                     ShardCheckpointDir(options_.dir, loaded.shard_index),
                     "/, or move it away (an older generation is read then)"));
  }
  if (options_.model_fingerprint != 0 && loaded.format >= 3 &&
      loaded.model_fingerprint != options_.model_fingerprint) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint '%s' holds a model with fingerprint %016x, but the "
        "config's "
        "model has fingerprint %016x (model.layers, model.type or "
        "model.block_size changed?): restore the model section the checkpoint "
        "was written with, or move %s away to start from fresh parameters",
        path, loaded.model_fingerprint, options_.model_fingerprint, folder_));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardCheckpoints::Loaded> ShardCheckpoints::ReadNewest() const {
  ASSIGN_OR_RETURN(std::vector<Generation> files, List());
  Loaded loaded;
  bool any_full = false;
  for (const Generation& generation : files) {
    if (generation.kind != FileKind::kFull) continue;
    any_full = true;
    Trailer trailer;
    absl::StatusOr<Checkpoint> checkpoint =
        ReadCheckpointFile(generation.path, &trailer);
    // A file deleted since List (pruned by a writer) is no fault of the data.
    if (absl::IsNotFound(checkpoint.status())) continue;
    if (absl::IsFailedPrecondition(checkpoint.status())) {
      return checkpoint.status();  // another format: refuse, do not skip
    }
    if (!checkpoint.ok()) {
      loaded.skipped.push_back(checkpoint.status());
      continue;
    }
    RETURN_IF_ERROR(CheckBelongs(generation.path, *checkpoint));
    loaded.checkpoint = *std::move(checkpoint);
    loaded.path = generation.path;
    ApplyChain(files, generation, trailer.crc, &loaded);
    return loaded;
  }
  if (!loaded.skipped.empty()) {
    const absl::Status& newest = loaded.skipped.front();
    if (loaded.skipped.size() == 1) return newest;
    return absl::Status(
        newest.code(),
        absl::StrCat(newest.message(), " (and the ", loaded.skipped.size() - 1,
                     " older generations in ", folder_, " are bad too)"));
  }
  (void)any_full;
  // No generation: the single file of earlier builds, if any.
  const std::string legacy = CheckpointPath(options_.dir, options_.shard_index);
  ASSIGN_OR_RETURN(loaded.checkpoint, ReadCheckpoint(legacy));
  RETURN_IF_ERROR(CheckBelongs(legacy, loaded.checkpoint));
  loaded.path = legacy;
  return loaded;
}

std::vector<ShardCheckpoints::ChainEntry> ShardCheckpoints::ChainOf(
    const std::vector<Generation>& files, uint64_t base,
    std::vector<absl::Status>* bad) const {
  // The chain's files lie between its full cut and the next one.
  uint64_t upper = std::numeric_limits<uint64_t>::max();
  for (const Generation& g : files) {
    if (g.kind == FileKind::kFull && g.generation > base) {
      upper = std::min(upper, g.generation);
    }
  }
  std::vector<const Generation*> manifests;
  for (const Generation& g : files) {
    if (g.kind == FileKind::kManifest && g.generation >= base &&
        g.generation < upper) {
      manifests.push_back(&g);
    }
  }
  std::sort(manifests.begin(), manifests.end(),
            [](const Generation* a, const Generation* b) {
              return a->generation > b->generation;
            });
  for (const Generation* g : manifests) {
    absl::StatusOr<Manifest> manifest = ReadManifest(g->path);
    if (absl::IsNotFound(manifest.status())) continue;  // pruned since List
    absl::Status why = manifest.status();
    if (why.ok() &&
        (manifest->shard_index != options_.shard_index ||
         manifest->base_generation != base || manifest->entries.empty() ||
         manifest->entries.front().generation != base ||
         manifest->entries.back().generation != g->generation)) {
      why = BadManifest(
          g->path, absl::StrCat("it lists shard ", manifest->shard_index,
                                " and full cut g", manifest->base_generation,
                                ", not what its name and folder say"));
    }
    if (why.ok()) return std::move(manifest->entries);
    bad->push_back(absl::Status(
        why.code(), absl::StrCat(why.message(),
                                 "; the chain ends where an older manifest of "
                                 "it says, or at its full cut")));
  }
  return {};
}

void ShardCheckpoints::ApplyChain(const std::vector<Generation>& files,
                                  const Generation& full, uint32_t crc,
                                  Loaded* loaded) const {
  const std::vector<ChainEntry> entries =
      ChainOf(files, full.generation, &loaded->chain_ended);
  if (entries.size() <= 1) return;
  Checkpoint& state = loaded->checkpoint;
  auto end_at = [&](const absl::Status& why, const std::string& last) {
    loaded->chain_ended.push_back(absl::Status(
        why.code(),
        absl::StrCat(why.message(), "; the chain of ", full.path, " ends at ",
                     last, ": the updates after it are not restored")));
  };
  if (entries.front().crc != crc) {
    end_at(absl::DataLossError(absl::StrFormat(
               "the chain's manifest lists a full cut of CRC 0x%08x, the file "
               "holds 0x%08x",
               entries.front().crc, crc)),
           full.path);
    return;
  }
  // The deltas' changes composed, by table: one overlay over the full cut's
  // rows at the end.
  std::map<uint32_t, SparseTable::Rows> changes;
  Checkpoint last;
  std::string last_path = full.path;
  uint64_t parent = full.generation;
  for (size_t i = 1; i < entries.size(); ++i) {
    const ChainEntry& entry = entries[i];
    const std::string path = absl::StrCat(
        folder_, "/", DeltaFileName(entry.placement_epoch, entry.generation));
    Trailer trailer;
    absl::StatusOr<Checkpoint> delta = ReadCheckpointFile(path, &trailer);
    absl::Status why = delta.status();
    if (why.ok() &&
        (delta->kind != CheckpointKind::kDelta ||
         delta->base_generation != full.generation ||
         delta->parent_generation != parent ||
         delta->generation != entry.generation || trailer.crc != entry.crc ||
         trailer.bytes != entry.bytes)) {
      why = absl::DataLossError(absl::StrFormat(
          "checkpoint delta '%s' is not the one its manifest lists (kind %d, "
          "full cut g%d, parent g%d, CRC 0x%08x; listed: parent g%d, CRC "
          "0x%08x)",
          path, static_cast<int>(delta->kind), delta->base_generation,
          delta->parent_generation, trailer.crc, parent, entry.crc));
    }
    if (why.ok()) why = CheckBelongs(path, *delta);
    if (why.ok() && delta->optimizer != state.optimizer) {
      why = absl::DataLossError(
          absl::StrCat("checkpoint delta '", path, "' holds optimizer ",
                       delta->optimizer, ", its full cut ", state.optimizer));
    }
    std::map<uint32_t, SparseTable::Rows> composed = changes;
    for (size_t t = 0; why.ok() && t < delta->sparse_tables.size(); ++t) {
      auto& [id, rows] = delta->sparse_tables[t];
      for (const auto& [full_id, full_rows] : state.sparse_tables) {
        if (full_id == id && (full_rows.dim != rows.dim ||
                              full_rows.state_slots != rows.state_slots ||
                              full_rows.optimizer != rows.optimizer)) {
          why = absl::DataLossError(
              absl::StrCat("checkpoint delta '", path, "': sparse table ", id,
                           " is of another shape than in its full cut"));
        }
      }
      auto it = composed.find(id);
      if (!why.ok()) break;
      if (it == composed.end()) {
        composed.emplace(id, std::move(rows));
        continue;
      }
      absl::StatusOr<SparseTable::Rows> over =
          SparseTable::Overlay(it->second, rows);
      if (!over.ok()) {
        why = absl::DataLossError(absl::StrCat("checkpoint delta '", path,
                                               "': ", over.status().message()));
      } else {
        it->second = *std::move(over);
      }
    }
    if (!why.ok()) {
      end_at(why, last_path);
      break;
    }
    changes = std::move(composed);
    last = *std::move(delta);
    last_path = path;
    parent = entry.generation;
    loaded->deltas.push_back(path);
  }
  if (loaded->deltas.empty()) return;
  // The state at the last delta: its blocks and windows (whole in every
  // delta), the full cut's rows with the changes over them.
  for (auto& [id, rows] : state.sparse_tables) {
    auto it = changes.find(id);
    if (it == changes.end()) continue;
    absl::StatusOr<SparseTable::Rows> over =
        SparseTable::Overlay(rows, it->second);
    if (over.ok()) rows = *std::move(over);  // shapes were checked above
    rows.evicted_keys.clear();               // applied
    changes.erase(it);
  }
  for (auto& [id, rows] : changes) {  // a table the full cut lacked
    rows.evicted_keys.clear();
    state.sparse_tables.emplace_back(id, std::move(rows));
  }
  state.blocks = std::move(last.blocks);
  state.sequences = std::move(last.sequences);
  state.placement_epoch = last.placement_epoch;
  state.generation = last.generation;
  state.parent_generation = last.parent_generation;
}

absl::Status ShardCheckpoints::CheckNotTakenOver(uint64_t epoch) const {
  ASSIGN_OR_RETURN(std::vector<Generation> generations, List());
  if (generations.empty() || generations.front().placement_epoch <= epoch) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "shard ", options_.shard_index, " was taken over at placement epoch ",
      generations.front().placement_epoch, " by another daemon (",
      generations.front().path, "); this ps (epoch ", epoch,
      ") must not write: stop it"));
}

absl::StatusOr<ShardCheckpoints::Written> ShardCheckpoints::Write(
    Checkpoint checkpoint,
    const std::function<absl::Status()>& may_write) const {
  const uint64_t epoch = checkpoint.placement_epoch;
  if (epoch > kMaxNamedNumber) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint of shard ", options_.shard_index, ": placement epoch ",
        epoch, " does not fit a checkpoint file name (12 digits)"));
  }
  ASSIGN_OR_RETURN(std::vector<Generation> files, List());
  RETURN_IF_ERROR(CheckNotTakenOver(epoch));
  uint64_t last = 0;
  for (const Generation& g : files) last = std::max(last, g.generation);
  checkpoint.shard_index = options_.shard_index;
  checkpoint.model_fingerprint = options_.model_fingerprint;
  checkpoint.generation = last + 1;
  const bool delta = checkpoint.kind == CheckpointKind::kDelta;
  std::vector<ChainEntry> chain;
  if (delta) {
    std::vector<absl::Status> bad;
    chain = ChainOf(files, checkpoint.base_generation, &bad);
    if (chain.empty() ||
        chain.back().generation != checkpoint.parent_generation) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint delta of shard ", options_.shard_index,
          ": the chain of full cut g", checkpoint.base_generation, " in ",
          folder_, " ends at ",
          chain.empty() ? std::string("no manifest")
                        : absl::StrCat("g", chain.back().generation),
          ", not at g", checkpoint.parent_generation,
          " (a write of it failed or was removed): write a full cut"));
    }
  } else {
    checkpoint.base_generation = checkpoint.generation;
    checkpoint.parent_generation = 0;
  }
  Written written;
  written.path =
      absl::StrCat(folder_, "/",
                   delta ? DeltaFileName(epoch, checkpoint.generation)
                         : GenerationFileName(epoch, checkpoint.generation));
  // Checked again just before the rename: another daemon may have taken the
  // shard over while this one was writing. (A take-over between this check
  // and the rename still lands below the new owner's epoch, which readers
  // prefer; the coordinator's lease closes that gap.)
  const auto fence = [&] {
    if (may_write) RETURN_IF_ERROR(may_write());
    return CheckNotTakenOver(epoch);
  };
  Trailer trailer;
  RETURN_IF_ERROR(WithFix(WriteInFormat(written.path, checkpoint,
                                        kCheckpointFormat, fence, &trailer)));
  written.generation = checkpoint.generation;
  written.bytes = trailer.bytes;
  written.crc = trailer.crc;
  if (delta || options_.incremental) {
    // The file counts in its chain once the manifest lists it.
    chain.push_back({epoch, checkpoint.generation, trailer.bytes, trailer.crc});
    RETURN_IF_ERROR(WriteManifest(checkpoint.base_generation, chain, fence));
  }
  written.prune_status = Prune(checkpoint, &written.removed);
  return written;
}

absl::Status ShardCheckpoints::WriteManifest(
    uint64_t base, const std::vector<ChainEntry>& entries,
    const std::function<absl::Status()>& fence) const {
  Manifest manifest;
  manifest.shard_index = options_.shard_index;
  manifest.base_generation = base;
  manifest.entries = entries;
  const ChainEntry& newest = entries.back();
  const std::string path =
      absl::StrCat(folder_, "/",
                   ManifestFileName(newest.placement_epoch, newest.generation));
  return WithFix(
      WriteFileAtomically(path, "write checkpoint manifest",
                          [&](int fd, const std::string& tmp) -> absl::Status {
                            RETURN_IF_ERROR(EncodeManifest(manifest, fd, tmp));
                            return fence();
                          }));
}

absl::Status ShardCheckpoints::Prune(const Checkpoint& written,
                                     std::vector<std::string>* removed) const {
  ASSIGN_OR_RETURN(std::vector<Generation> files, List());
  std::vector<const Generation*> doomed;
  if (written.kind == CheckpointKind::kDelta) {
    // The chain's manifests but the new one and the one before it.
    std::vector<const Generation*> manifests;
    for (const Generation& g : files) {
      if (g.kind == FileKind::kManifest &&
          g.generation >= written.base_generation &&
          g.generation < written.generation) {
        manifests.push_back(&g);
      }
    }
    std::sort(manifests.begin(), manifests.end(),
              [](const Generation* a, const Generation* b) {
                return a->generation > b->generation;
              });
    for (size_t i = 1; i < manifests.size(); ++i)
      doomed.push_back(manifests[i]);
  } else {
    // Chains beyond the newest `keep` full cuts, whole.
    size_t fulls = 0;
    uint64_t oldest_kept = 0;
    const size_t keep = static_cast<size_t>(std::max(options_.keep, 1));
    for (const Generation& g : files) {  // newest first
      if (g.kind != FileKind::kFull) continue;
      if (++fulls <= keep) {
        oldest_kept = g.generation;
      } else {
        doomed.push_back(&g);
      }
    }
    for (const Generation& g : files) {
      if (fulls > keep && g.kind != FileKind::kFull &&
          g.generation < oldest_kept) {
        doomed.push_back(&g);
      }
    }
  }
  absl::Status status;
  for (const Generation* g : doomed) {
    std::error_code error;
    if (fs::remove(g->path, error) || !error) {
      removed->push_back(g->path);
    } else if (status.ok()) {
      status = absl::Status(ErrorCodeToStatusCode(error),
                            absl::StrCat("cannot delete old checkpoint '",
                                         g->path, "': ", error.message()));
    }
  }
  return status;
}

absl::StatusOr<std::vector<std::string>>
ShardCheckpoints::RemoveStaleTemporaries() const {
  std::vector<std::string> removed;
  const std::string legacy =
      fs::path(CheckpointPath(options_.dir, options_.shard_index))
          .filename()
          .string();
  // The shard's folder (any temporary) and checkpoint.dir (the legacy file's).
  for (const auto& [folder, prefix] :
       {std::pair<std::string, std::string>{folder_, ""},
        {options_.dir, legacy + ".tmp."}}) {
    std::error_code error;
    fs::directory_iterator it(folder, error);
    if (error == std::errc::no_such_file_or_directory) continue;
    for (; !error && it != fs::directory_iterator(); it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (!absl::StartsWith(name, prefix) ||
          !absl::StrContains(name, ".tmp.")) {
        continue;
      }
      std::error_code removal;
      if (fs::remove(it->path(), removal)) {
        removed.push_back(it->path().string());
      } else if (removal) {
        error = removal;
        break;
      }
    }
    if (error) {
      return absl::Status(ErrorCodeToStatusCode(error),
                          absl::StrCat("cannot clean temporary checkpoint "
                                       "files in '",
                                       folder, "': ", error.message()));
    }
  }
  return removed;
}

}  // namespace downpour::server

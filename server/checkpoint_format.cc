// Checkpoint and manifest byte formats: encoding, verification and decoding.
#include "server/checkpoint_format.h"

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/file_util.h"
#include "common/status_macros.h"

#ifndef ABSL_IS_LITTLE_ENDIAN
#error "checkpoints store float32 bytes as they are: little-endian hosts only"
#endif

namespace downpour::server::checkpoint_internal {
namespace {
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

// One sparse table's part of the file body (format 4 on).
void EncodeTable(uint32_t id, const SparseTable::Rows& rows, uint32_t format,
                 Encoder* e) {
  e->PutU32(id);
  e->PutU32(static_cast<uint32_t>(rows.dim));
  e->PutU32(static_cast<uint32_t>(rows.state_slots));
  e->PutU32(static_cast<uint32_t>(rows.optimizer));
  e->PutU64(rows.keys.size());
  e->Put(reinterpret_cast<const char*>(rows.keys.data()),
         rows.keys.size() * sizeof(uint64_t));
  e->Put(reinterpret_cast<const char*>(rows.versions.data()),
         rows.versions.size() * sizeof(uint32_t));
  e->PutFloats(rows.data);
  if (format >= 5) {
    e->PutU64(rows.clock);
    e->PutU64(rows.evicted_versions);
    e->PutU32(rows.clocks.empty() ? 0 : 1);
    e->Put(reinterpret_cast<const char*>(rows.clocks.data()),
           rows.clocks.size() * sizeof(uint64_t));
    e->PutU64(rows.evicted_keys.size());
    e->Put(reinterpret_cast<const char*>(rows.evicted_keys.data()),
           rows.evicted_keys.size() * sizeof(uint64_t));
  }
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
      EncodeTable(id, rows, format, &e);
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

// One sparse table of a verified file (format 4 on): its id and rows.
absl::Status DecodeTable(const std::string& path, uint32_t format, Decoder* d,
                         uint32_t* id, SparseTable::Rows* rows) {
  *id = d->U32();
  rows->dim = static_cast<int>(d->U32());
  rows->state_slots = static_cast<int>(d->U32());
  const uint32_t optimizer = d->U32();
  const uint64_t n = d->U64();
  if (rows->dim < 1 || rows->dim > 4096 || rows->state_slots < 0 ||
      rows->state_slots > 2 || optimizer > 3 || n > d->left() / 12) {
    return Corrupt(
        path, absl::StrCat("sparse table ", *id, " has an impossible shape"));
  }
  rows->optimizer = static_cast<SparseOptimizerType>(optimizer);
  rows->keys.resize(n);
  rows->versions.resize(n);
  d->Bytes(reinterpret_cast<char*>(rows->keys.data()), n * sizeof(uint64_t));
  d->Bytes(reinterpret_cast<char*>(rows->versions.data()),
           n * sizeof(uint32_t));
  rows->data = d->Floats(n * rows->dim * (1 + rows->state_slots));
  if (format >= 5 && d->ok()) {
    rows->clock = d->U64();
    rows->evicted_versions = d->U64();
    const uint32_t flags = d->U32();
    if (flags > 1 || (flags == 1 && n > d->left() / 8)) {
      return Corrupt(
          path, absl::StrCat("sparse table ", *id, " has impossible clocks"));
    }
    if (flags == 1) {
      rows->clocks.resize(n);
      d->Bytes(reinterpret_cast<char*>(rows->clocks.data()),
               n * sizeof(uint64_t));
    }
    const uint64_t e = d->U64();
    if (e > d->left() / 8) {
      return Corrupt(path, absl::StrCat("sparse table ", *id,
                                        " has impossible evicted keys"));
    }
    rows->evicted_keys.resize(e);
    d->Bytes(reinterpret_cast<char*>(rows->evicted_keys.data()),
             e * sizeof(uint64_t));
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
    absl::Status table = DecodeTable(path, format, &d, &id, &rows);
    if (!table.ok()) return table;
  }
  if (!d.ok() || d.left() != 0) {
    return Corrupt(path, "checksum matches but the fields do not fit the file");
  }
  return c;
}

constexpr size_t kManifestEntrySize = 8 + 8 + 8 + 4;
// A manifest of more bytes than this is not read (a chain of a million).
constexpr size_t kMaxManifestBytes = size_t{32} << 20;

}  // namespace

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
                           Trailer* trailer) {
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

}  // namespace downpour::server::checkpoint_internal

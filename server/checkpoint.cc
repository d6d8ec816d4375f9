// Checkpoint encoding, atomic file replacement and verification on read.
#include "server/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/file_util.h"
#include "common/checksum.h"
#include "common/status_macros.h"

#ifndef ABSL_IS_LITTLE_ENDIAN
#error "checkpoints store float32 bytes as they are: little-endian hosts only"
#endif

namespace downpour::server {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'D', 'P', 'N', 'C', 'K', 'P', 'T', '\0'};
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

uint64_t EncodedSize(const Checkpoint& c, uint32_t format) {
  uint64_t size = kHeaderSize + 4 + 8 + 4 + c.optimizer.size();
  if (format >= 3) size += 8 + 8;
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
    }
  }
  return size + kCrcSize;
}

// Writes the whole file body (see the layout in checkpoint.h) to `fd`.
absl::Status Encode(const Checkpoint& c, uint32_t format, int fd,
                    const std::string& path) {
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
    }
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
      return Corrupt(path, absl::StrCat("sparse table ", id,
                                        " has an impossible shape"));
    }
    rows.optimizer = static_cast<SparseOptimizerType>(optimizer);
    rows.keys.resize(n);
    rows.versions.resize(n);
    d.Bytes(reinterpret_cast<char*>(rows.keys.data()), n * sizeof(uint64_t));
    d.Bytes(reinterpret_cast<char*>(rows.versions.data()), n * sizeof(uint32_t));
    rows.data = d.Floats(n * rows.dim * (1 + rows.state_slots));
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
  constexpr size_t kLength = 1 + kDigits + 2 + kDigits + 5;
  if (name.size() != kLength || name[0] != 'e' ||
      name.compare(1 + kDigits, 2, "-g") != 0 ||
      name.compare(kLength - 5, 5, ".ckpt") != 0) {
    return std::nullopt;
  }
  ShardCheckpoints::Generation generation;
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

absl::Status WriteInFormat(const std::string& path, const Checkpoint& c,
                           uint32_t format,
                           const std::function<absl::Status()>& before_rename) {
  return WriteFileAtomically(
      path, kWriteWhat, [&](int fd, const std::string& tmp) -> absl::Status {
        RETURN_IF_ERROR(Encode(c, format, fd, tmp));
        return before_rename ? before_rename() : absl::OkStatus();
      });
}

// A write error with what to do about it, for the errors an operator can fix.
absl::Status WithFix(const absl::Status& status) {
  if (status.ok()) return status;
  const char* fix = nullptr;
  if (absl::StrContains(status.message(), std::strerror(ENOSPC)) ||
      absl::StrContains(status.message(), std::strerror(EDQUOT))) {
    fix = "free space on the checkpoint volume or point checkpoint.dir at "
          "another one";
  } else if (absl::IsPermissionDenied(status) ||
             absl::StrContains(status.message(), std::strerror(EROFS))) {
    fix = "make checkpoint.dir writable by this daemon's user or point it "
          "elsewhere";
  }
  if (fix == nullptr) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), "; ", fix));
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& path,
                             const Checkpoint& checkpoint,
                             const std::function<absl::Status()>& before_rename) {
  return WithFix(WriteInFormat(path, checkpoint, kCheckpointFormat,
                               before_rename));
}

absl::Status WriteCheckpointInFormatForTest(const std::string& path,
                                            const Checkpoint& checkpoint,
                                            uint32_t format) {
  return WriteInFormat(path, checkpoint, format, nullptr);
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
  return absl::StrCat(WithSlash(dir), "ps-", shard_index, ".ckpt");
}

std::string ShardCheckpointDir(const std::string& dir, int shard_index) {
  return absl::StrCat(WithSlash(dir), "ps-", shard_index);
}

std::string GenerationFileName(uint64_t placement_epoch, uint64_t generation) {
  return absl::StrFormat("e%012u-g%012u.ckpt", placement_epoch, generation);
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
    return absl::Status(
        ErrorCodeToStatusCode(error),
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
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint '", path, "' holds shard ", loaded.shard_index,
        ", but this is ps ", index,
        ": a checkpoint of another shard was put in its place; move it back to ",
        ShardCheckpointDir(options_.dir, loaded.shard_index),
        "/, or move it away (an older generation is read then)"));
  }
  if (options_.model_fingerprint != 0 && loaded.format >= 3 &&
      loaded.model_fingerprint != options_.model_fingerprint) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint '%s' holds a model with fingerprint %016x, but the config's "
        "model has fingerprint %016x (model.layers, model.type or "
        "model.block_size changed?): restore the model section the checkpoint "
        "was written with, or move %s away to start from fresh parameters",
        path, loaded.model_fingerprint, options_.model_fingerprint, folder_));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardCheckpoints::Loaded> ShardCheckpoints::ReadNewest() const {
  ASSIGN_OR_RETURN(std::vector<Generation> generations, List());
  Loaded loaded;
  for (const Generation& generation : generations) {
    absl::StatusOr<Checkpoint> checkpoint = ReadCheckpoint(generation.path);
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
  // No generation: the single file of earlier builds, if any.
  const std::string legacy = CheckpointPath(options_.dir, options_.shard_index);
  ASSIGN_OR_RETURN(loaded.checkpoint, ReadCheckpoint(legacy));
  RETURN_IF_ERROR(CheckBelongs(legacy, loaded.checkpoint));
  loaded.path = legacy;
  return loaded;
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
  ASSIGN_OR_RETURN(std::vector<Generation> generations, List());
  RETURN_IF_ERROR(CheckNotTakenOver(epoch));
  uint64_t last = 0;
  for (const Generation& g : generations) last = std::max(last, g.generation);
  checkpoint.shard_index = options_.shard_index;
  checkpoint.model_fingerprint = options_.model_fingerprint;
  checkpoint.generation = last + 1;
  Written written;
  written.path = absl::StrCat(folder_, "/",
                              GenerationFileName(epoch, checkpoint.generation));
  // Checked again just before the rename: another daemon may have taken the
  // shard over while this one was writing. (A take-over between this check
  // and the rename still lands below the new owner's epoch, which readers
  // prefer; the coordinator's lease closes that gap.)
  RETURN_IF_ERROR(WriteCheckpoint(written.path, checkpoint, [&] {
    if (may_write) RETURN_IF_ERROR(may_write());
    return CheckNotTakenOver(epoch);
  }));
  absl::StatusOr<std::vector<Generation>> now = List();
  if (!now.ok()) {
    written.prune_status = now.status();
    return written;
  }
  for (size_t i = static_cast<size_t>(std::max(options_.keep, 1));
       i < now->size(); ++i) {
    std::error_code error;
    if (fs::remove((*now)[i].path, error) || !error) {
      written.removed.push_back((*now)[i].path);
    } else if (written.prune_status.ok()) {
      written.prune_status = absl::Status(
          ErrorCodeToStatusCode(error),
          absl::StrCat("cannot delete old checkpoint '", (*now)[i].path,
                       "': ", error.message()));
    }
  }
  return written;
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

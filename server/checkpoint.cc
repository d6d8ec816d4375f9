// Checkpoint files of a shard: their names, the generations and chains of its
// folder, writing, pruning and restoring them (the byte formats are in
// checkpoint_format.cc).
#include "server/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "server/checkpoint_format.h"

namespace downpour::server {
namespace {

namespace fs = std::filesystem;

using checkpoint_internal::BadManifest;
using checkpoint_internal::EncodeManifest;
using checkpoint_internal::Manifest;
using checkpoint_internal::ReadCheckpointFile;
using checkpoint_internal::ReadManifest;
using checkpoint_internal::Trailer;
using checkpoint_internal::WithFix;
using checkpoint_internal::WriteInFormat;

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

uint64_t SparseRowUpdates(const Checkpoint& checkpoint) {
  uint64_t held = 0;
  for (const auto& [id, rows] : checkpoint.sparse_tables) {
    held += rows.evicted_versions;
    for (uint32_t version : rows.versions) held += version;
  }
  return held;
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

namespace {

// Composes the sparse tables of the delta at `path` (`delta`, rows moved
// out) over `changes`, the deltas' changes before it; DataLoss when a
// table's shape differs from the full cut's (`full`) or the rows do not
// overlay. `changes` is left as it was on error.
absl::Status ComposeTables(const std::string& path, const Checkpoint& full,
                           Checkpoint* delta,
                           std::map<uint32_t, SparseTable::Rows>* changes) {
  std::map<uint32_t, SparseTable::Rows> composed = *changes;
  for (auto& [id, rows] : delta->sparse_tables) {
    for (const auto& [full_id, full_rows] : full.sparse_tables) {
      if (full_id == id && (full_rows.dim != rows.dim ||
                            full_rows.state_slots != rows.state_slots ||
                            full_rows.optimizer != rows.optimizer)) {
        return absl::DataLossError(
            absl::StrCat("checkpoint delta '", path, "': sparse table ", id,
                         " is of another shape than in its full cut"));
      }
    }
    auto it = composed.find(id);
    if (it == composed.end()) {
      composed.emplace(id, std::move(rows));
      continue;
    }
    absl::StatusOr<SparseTable::Rows> over =
        SparseTable::Overlay(it->second, rows);
    if (!over.ok()) {
      return absl::DataLossError(absl::StrCat("checkpoint delta '", path,
                                              "': ", over.status().message()));
    }
    it->second = *std::move(over);
  }
  *changes = std::move(composed);
  return absl::OkStatus();
}

// The state at the chain's last delta (`last`): its blocks and windows
// (whole in every delta), the full cut's rows in `state` with the deltas'
// `changes` over them.
void ApplyChanges(std::map<uint32_t, SparseTable::Rows> changes,
                  Checkpoint last, Checkpoint* state) {
  for (auto& [id, rows] : state->sparse_tables) {
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
    state->sparse_tables.emplace_back(id, std::move(rows));
  }
  state->blocks = std::move(last.blocks);
  state->sequences = std::move(last.sequences);
  state->placement_epoch = last.placement_epoch;
  state->generation = last.generation;
  state->parent_generation = last.parent_generation;
}

}  // namespace

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
    const std::string path = absl::StrCat(
        folder_, "/",
        DeltaFileName(entries[i].placement_epoch, entries[i].generation));
    absl::StatusOr<Checkpoint> delta =
        ReadDelta(path, entries[i], full.generation, parent, state.optimizer);
    absl::Status why = delta.status();
    if (why.ok()) why = ComposeTables(path, state, &*delta, &changes);
    if (!why.ok()) {
      end_at(why, last_path);
      break;
    }
    last = *std::move(delta);
    last_path = path;
    parent = entries[i].generation;
    loaded->deltas.push_back(path);
  }
  if (loaded->deltas.empty()) return;
  ApplyChanges(std::move(changes), std::move(last), &state);
}

absl::StatusOr<Checkpoint> ShardCheckpoints::ReadDelta(
    const std::string& path, const ChainEntry& entry, uint64_t base,
    uint64_t parent, const std::string& optimizer) const {
  Trailer trailer;
  absl::StatusOr<Checkpoint> delta = ReadCheckpointFile(path, &trailer);
  if (!delta.ok()) return delta;
  if (delta->kind != CheckpointKind::kDelta || delta->base_generation != base ||
      delta->parent_generation != parent ||
      delta->generation != entry.generation || trailer.crc != entry.crc ||
      trailer.bytes != entry.bytes) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint delta '%s' is not the one its manifest lists (kind %d, "
        "full cut g%d, parent g%d, CRC 0x%08x; listed: parent g%d, CRC "
        "0x%08x)",
        path, static_cast<int>(delta->kind), delta->base_generation,
        delta->parent_generation, trailer.crc, parent, entry.crc));
  }
  RETURN_IF_ERROR(CheckBelongs(path, *delta));
  if (delta->optimizer != optimizer) {
    return absl::DataLossError(
        absl::StrCat("checkpoint delta '", path, "' holds optimizer ",
                     delta->optimizer, ", its full cut ", optimizer));
  }
  return delta;
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

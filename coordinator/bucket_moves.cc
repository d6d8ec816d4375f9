// Bucket owners, live moves and balance plans.
#include "coordinator/bucket_moves.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

std::string Describe(const proto::BucketMove& m) {
  return absl::StrFormat("bucket move %d (%s, shard %d -> %d)", m.id(),
                         DescribeMoved(m), m.from_shard(), m.to_shard());
}

// Buckets or dense blocks, as Start and CheckFree name them in refusals.
struct What {
  const char* op;     // "move buckets"
  const char* one;    // "bucket"
  const char* many;   // "buckets"
  const char* count;  // after the count, e.g. ", model.sparse_buckets"
};
constexpr What kBuckets{"move buckets", "bucket", "buckets",
                        ", model.sparse_buckets"};
constexpr What kBlocks{"move blocks", "dense block", "blocks", ""};

// Start's checks of `ids` (each at most once, owned by a shard other than
// `to_shard`; entry id of `owners` its shard, -1 for none), grouped by the
// shard owning them into *by_source.
absl::Status GroupByOwner(const std::vector<uint32_t>& ids,
                          const std::vector<int>& owners, int to_shard,
                          const What& what,
                          std::map<int, std::vector<uint32_t>>* by_source) {
  std::set<uint32_t> seen;
  for (uint32_t b : ids) {
    if (b >= owners.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what.op, ": ", what.one, " ", b, " does not exist (", owners.size(),
          " ", what.many, ": 0 to ", static_cast<int64_t>(owners.size()) - 1,
          what.count, ")"));
    }
    if (!seen.insert(b).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what.op, ": ", what.one, " ", b, " is named twice"));
    }
    if (owners[b] == to_shard || owners[b] < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          what.op, ": ", what.one, " ", b, " is on shard ", to_shard,
          " already; name only ", what.many, " of other shards"));
    }
    (*by_source)[owners[b]].push_back(b);
  }
  return absl::OkStatus();
}

// A plan's moves by (from, to), each with its lists ascending.
std::vector<BucketMoves::Planned> InOrder(
    std::map<std::pair<int, int>, BucketMoves::Planned> moves) {
  std::vector<BucketMoves::Planned> plan;
  for (auto& [pair, planned] : moves) {
    planned.from = pair.first;
    planned.to = pair.second;
    std::sort(planned.buckets.begin(), planned.buckets.end());
    std::sort(planned.blocks.begin(), planned.blocks.end());
    plan.push_back(std::move(planned));
  }
  return plan;
}

}  // namespace

BucketMoves::BucketMoves(uint32_t buckets, int shards) : shards_(shards) {
  owners_.resize(buckets);
  for (uint32_t b = 0; b < buckets; ++b) {
    owners_[b] = static_cast<int>(b % static_cast<uint32_t>(shards));
  }
}

int BucketMoves::CountOn(int shard) const {
  return static_cast<int>(std::count(owners_.begin(), owners_.end(), shard));
}

bool BucketMoves::InProgress(const proto::BucketMove& move) const {
  return move.phase() == kCopy || move.phase() == kSwitched;
}

absl::Status BucketMoves::CheckFree(const std::vector<uint32_t>& buckets,
                                    const std::vector<uint32_t>& blocks) const {
  const std::set<uint32_t> wanted(buckets.begin(), buckets.end());
  const std::set<uint32_t> wanted_blocks(blocks.begin(), blocks.end());
  const auto busy = [](const std::set<uint32_t>& ids,
                       const google::protobuf::RepeatedField<uint32_t>& moving,
                       const What& what,
                       const proto::BucketMove& m) -> absl::Status {
    for (uint32_t b : moving) {
      if (ids.count(b) == 0) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          what.op, ": ", what.one, " ", b, " is in ", Describe(m), ", phase '",
          m.phase(), "': wait until it ends (psctl moves), then ask again"));
    }
    return absl::OkStatus();
  };
  for (const proto::BucketMove& m : moves_) {
    if (!InProgress(m)) continue;
    RETURN_IF_ERROR(busy(wanted, m.buckets(), kBuckets, m));
    RETURN_IF_ERROR(busy(wanted_blocks, m.blocks(), kBlocks, m));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<proto::BucketMove>> BucketMoves::Start(
    const std::vector<uint32_t>& buckets, int to_shard,
    const std::string& reason, double now,
    const std::vector<uint32_t>& block_ids, const Blocks& blocks) {
  if (owners_.empty() && !buckets.empty()) {
    return absl::FailedPreconditionError(
        "move buckets: the model has no sparse tables, so there are no hash "
        "buckets to move (move its dense blocks: psctl move-buckets --blocks, "
        "or add-ps and drain-ps)");
  }
  if (buckets.empty() && block_ids.empty()) {
    return absl::InvalidArgumentError(
        "move buckets: no buckets and no blocks named (e.g. --buckets "
        "0-99,200 or --blocks 3)");
  }
  if (to_shard < 0 || to_shard >= shards_) {
    return absl::InvalidArgumentError(
        absl::StrCat("move buckets: shard ", to_shard, " does not exist (",
                     shards_, " shards: 0 to ", shards_ - 1, ")"));
  }
  std::map<int, std::vector<uint32_t>> by_source;
  RETURN_IF_ERROR(
      GroupByOwner(buckets, owners_, to_shard, kBuckets, &by_source));
  std::map<int, std::vector<uint32_t>> blocks_by_source;
  RETURN_IF_ERROR(GroupByOwner(block_ids, blocks.owners, to_shard, kBlocks,
                               &blocks_by_source));
  RETURN_IF_ERROR(CheckFree(buckets, block_ids));
  for (const auto& [from, list] : blocks_by_source) by_source[from];
  std::vector<proto::BucketMove> started;
  for (auto& [from, list] : by_source) {
    std::sort(list.begin(), list.end());
    std::vector<uint32_t>& moved_blocks = blocks_by_source[from];
    std::sort(moved_blocks.begin(), moved_blocks.end());
    proto::BucketMove m;
    m.set_id(next_id_++);
    for (uint32_t b : list) m.add_buckets(b);
    for (uint32_t b : moved_blocks) m.add_blocks(b);
    m.set_from_shard(from);
    m.set_to_shard(to_shard);
    m.set_phase(kCopy);
    m.set_reason(reason);
    m.set_started_seconds(now);
    m.set_switched_seconds(-1);
    m.set_ended_seconds(-1);
    SPDLOG_LOGGER_INFO(L(), "{} started ({}): copying", Describe(m), reason);
    moves_.push_back(m);
    started.push_back(std::move(m));
  }
  return started;
}

proto::BucketMove* BucketMoves::Find(uint64_t id) {
  for (proto::BucketMove& m : moves_) {
    if (m.id() == id) return &m;
  }
  return nullptr;
}

BucketMoves::Changes BucketMoves::Progress(
    int shard,
    const google::protobuf::RepeatedPtrField<proto::BucketMoveProgress>&
        reports,
    uint64_t next_epoch, double now) {
  Changes changes;
  for (const proto::BucketMoveProgress& p : reports) {
    proto::BucketMove* m = Find(p.id());
    if (m == nullptr || m->to_shard() != shard || !InProgress(*m)) continue;
    if (m->rows_copied() != p.rows_copied()) {
      m->set_rows_copied(p.rows_copied());
      changes.changed = true;
    }
    if (m->phase() == kCopy && p.caught_up()) {
      for (uint32_t b : m->buckets()) owners_[b] = m->to_shard();
      m->set_phase(kSwitched);
      m->set_switch_epoch(next_epoch);
      m->set_switched_seconds(now);
      ++changes.switched;
      changes.switched_moves.push_back(*m);
      changes.changed = true;
      SPDLOG_LOGGER_INFO(L(),
                         "{} switched at placement epoch {}: {} rows copied in "
                         "{:.2f} s{}",
                         Describe(*m), next_epoch, m->rows_copied(),
                         now - m->started_seconds(),
                         m->blocks_size() > 0
                             ? "; the dense blocks are copied whole now"
                             : "");
    } else if (m->phase() == kSwitched && p.done()) {
      End(*m, kDone, now);
      changes.changed = true;
      SPDLOG_LOGGER_INFO(L(),
                         "{} done: {} rows, {:.2f} s in all ({:.2f} s after "
                         "the switch)",
                         Describe(*m), m->rows_copied(),
                         now - m->started_seconds(),
                         now - m->switched_seconds());
    }
  }
  if (changes.changed) Trim();
  return changes;
}

void BucketMoves::End(proto::BucketMove& move, const char* phase, double now) {
  move.set_phase(phase);
  move.set_ended_seconds(now);
}

int BucketMoves::ShardGone(int shard, const std::string& why, double now) {
  int rolled = 0;
  for (proto::BucketMove& m : moves_) {
    if (m.phase() != kCopy ||
        (m.from_shard() != shard && m.to_shard() != shard)) {
      continue;
    }
    End(m, kRolledBack, now);
    m.set_reason(why);
    ++rolled;
    SPDLOG_LOGGER_WARN(L(),
                       "{} rolled back after {:.2f} s ({} rows copied): {}; "
                       "shard {} keeps the buckets, start the move again",
                       Describe(m), now - m.started_seconds(), m.rows_copied(),
                       why, m.from_shard());
  }
  if (rolled > 0) Trim();
  return rolled;
}

std::vector<proto::BucketMove> BucketMoves::MovesOf(int shard, bool in) const {
  std::vector<proto::BucketMove> out;
  for (const proto::BucketMove& m : moves_) {
    if (InProgress(m) && (in ? m.to_shard() : m.from_shard()) == shard) {
      out.push_back(m);
    }
  }
  return out;
}

std::vector<int> BucketMoves::Projected() const {
  std::vector<int> owners = owners_;
  for (const proto::BucketMove& m : moves_) {
    if (m.phase() != kCopy) continue;
    for (uint32_t b : m.buckets()) owners[b] = m.to_shard();
  }
  return owners;
}

std::vector<int> BucketMoves::ProjectedBlocks(const Blocks& blocks) const {
  std::vector<int> owners = blocks.owners;
  for (const proto::BucketMove& m : moves_) {
    if (m.phase() != kCopy) continue;
    for (uint32_t b : m.blocks()) {
      if (b < owners.size()) owners[b] = m.to_shard();
    }
  }
  return owners;
}

void BucketMoves::PlanBlocks(
    const std::vector<int>& takers, int drain_shard, const Blocks& blocks,
    std::map<std::pair<int, int>, Planned>* moves) const {
  std::vector<int> owners = ProjectedBlocks(blocks);
  std::set<uint32_t> busy;
  for (const proto::BucketMove& m : moves_) {
    if (InProgress(m)) busy.insert(m.blocks().begin(), m.blocks().end());
  }
  std::map<int, int64_t> load;  // floats per taker
  for (int s : takers) load[s] = 0;
  for (uint32_t b = 0; b < owners.size(); ++b) {
    if (load.count(owners[b]) > 0) load[owners[b]] += blocks.floats[b];
  }
  const auto lighter = [](const auto& a, const auto& b) {
    return a.second < b.second;
  };
  const auto least = [&] {
    return std::min_element(load.begin(), load.end(), lighter)->first;
  };
  const auto move = [&](uint32_t b, int to) {
    Planned& p = (*moves)[{owners[b], to}];
    p.blocks.push_back(b);
    if (load.count(owners[b]) > 0) load[owners[b]] -= blocks.floats[b];
    load[to] += blocks.floats[b];
    owners[b] = to;
    busy.insert(b);
  };
  // The drained shard's blocks, largest first, each to the lightest taker.
  std::vector<uint32_t> drained;
  for (uint32_t b = 0; b < owners.size(); ++b) {
    if (owners[b] == drain_shard && busy.count(b) == 0) drained.push_back(b);
  }
  std::stable_sort(drained.begin(), drained.end(), [&](uint32_t a, uint32_t c) {
    return blocks.floats[a] > blocks.floats[c];
  });
  for (uint32_t b : drained) move(b, least());
  // Then the heaviest taker gives its largest block that narrows the gap.
  for (size_t round = 0; round < owners.size(); ++round) {
    const int heavy =
        std::max_element(load.begin(), load.end(), lighter)->first;
    const int light = least();
    const int64_t gap = load[heavy] - load[light];
    int64_t best = -1;
    for (uint32_t b = 0; b < owners.size(); ++b) {
      if (owners[b] != heavy || busy.count(b) > 0 || blocks.floats[b] >= gap) {
        continue;
      }
      if (best < 0 || blocks.floats[b] > blocks.floats[best]) best = b;
    }
    if (best < 0) break;
    move(static_cast<uint32_t>(best), light);
  }
}

absl::StatusOr<std::vector<BucketMoves::Planned>> BucketMoves::Plan(
    const std::vector<bool>& live, int drain_shard,
    const Blocks& blocks) const {
  std::vector<int> takers;
  for (int s = 0; s < static_cast<int>(live.size()); ++s) {
    if (live[s] && s != drain_shard) takers.push_back(s);
  }
  if (takers.empty()) {
    return absl::FailedPreconditionError(
        "balance: no live shard is left to hold the buckets");
  }
  const std::vector<int> owners = Projected();
  std::set<uint32_t> busy;
  for (const proto::BucketMove& m : moves_) {
    if (InProgress(m)) busy.insert(m.buckets().begin(), m.buckets().end());
  }
  // Target per shard: an even share for the takers (the first ones get the
  // remainder), none for the others.
  const int n = static_cast<int>(takers.size());
  const int total = static_cast<int>(owners.size());
  std::vector<int> target(std::max<size_t>(live.size(), shards_), 0);
  std::vector<std::pair<int, int>> by_count;  // (count, shard)
  for (int s : takers) {
    by_count.push_back(
        {static_cast<int>(std::count(owners.begin(), owners.end(), s)), s});
  }
  // The shards that hold the most keep the extra buckets: fewer moves.
  std::sort(by_count.rbegin(), by_count.rend());
  for (int i = 0; i < n; ++i) {
    target[by_count[i].second] = total / n + (i < total % n ? 1 : 0);
  }
  // Excess buckets, per source, highest first; then deal them to the shards
  // short of their target.
  std::vector<std::vector<uint32_t>> excess(target.size());
  std::vector<int> count(target.size(), 0);
  for (int s : owners) ++count[s];
  for (uint32_t b = owners.size(); b-- > 0;) {
    const int s = owners[b];
    if (count[s] > target[s] && busy.count(b) == 0) {
      excess[s].push_back(b);
      --count[s];
    }
  }
  std::map<std::pair<int, int>, Planned> moves;
  size_t src = 0;
  for (int to = 0; to < static_cast<int>(target.size()); ++to) {
    while (count[to] < target[to]) {
      while (src < excess.size() && excess[src].empty()) ++src;
      if (src == excess.size()) break;  // busy buckets: as even as it gets
      moves[{static_cast<int>(src), to}].buckets.push_back(excess[src].back());
      excess[src].pop_back();
      ++count[to];
    }
  }
  if (!blocks.owners.empty()) PlanBlocks(takers, drain_shard, blocks, &moves);
  return InOrder(std::move(moves));
}

void BucketMoves::Trim() {
  size_t ended = 0;
  for (const proto::BucketMove& m : moves_) ended += !InProgress(m);
  std::vector<proto::BucketMove> kept;
  for (proto::BucketMove& m : moves_) {
    if (!InProgress(m) && ended > kEndedKept) {
      --ended;
      continue;
    }
    kept.push_back(std::move(m));
  }
  moves_ = std::move(kept);
}

void BucketMoves::SaveTo(proto::CoordinatorState* state) const {
  const BucketMoves first(buckets(), shards_);
  if (owners_ != first.owners_) {
    for (int s : owners_) state->add_bucket_owners(s);
  }
  for (const proto::BucketMove& m : moves_) *state->add_bucket_moves() = m;
}

void BucketMoves::Restore(const proto::CoordinatorState& state, double now) {
  if (state.bucket_owners_size() == static_cast<int>(owners_.size())) {
    owners_.assign(state.bucket_owners().begin(), state.bucket_owners().end());
    for (int s : owners_) shards_ = std::max(shards_, s + 1);
  } else if (state.bucket_owners_size() != 0) {
    SPDLOG_LOGGER_WARN(L(),
                       "the saved bucket owners name {} buckets but the model "
                       "has {}: bucket b goes to shard b % {} again",
                       state.bucket_owners_size(), owners_.size(), shards_);
  }
  moves_.assign(state.bucket_moves().begin(), state.bucket_moves().end());
  for (proto::BucketMove& m : moves_) {
    next_id_ = std::max(next_id_, m.id() + 1);
    if (m.phase() != kCopy) continue;
    End(m, kRolledBack, now);
    m.set_reason("the coordinator restarted during the copy");
    SPDLOG_LOGGER_WARN(L(), "{} rolled back: {}", Describe(m), m.reason());
  }
  Trim();
}

absl::StatusOr<std::vector<uint32_t>> ParseBucketList(const std::string& text) {
  std::set<uint32_t> buckets;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    uint32_t lo = 0, hi = 0;
    const bool ok = ends.size() <= 2 && absl::SimpleAtoi(ends[0], &lo) &&
                    absl::SimpleAtoi(ends.back(), &hi) && lo <= hi &&
                    hi < (1u << 24);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("buckets: '", part, "' in '", text,
                       "' is not a bucket or a range (write e.g. 0-99,200)"));
    }
    for (uint64_t b = lo; b <= hi; ++b)
      buckets.insert(static_cast<uint32_t>(b));
  }
  return std::vector<uint32_t>(buckets.begin(), buckets.end());
}

std::string FormatBucketList(const std::vector<uint32_t>& buckets) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < buckets.size();) {
    size_t j = i;
    while (j + 1 < buckets.size() && buckets[j + 1] == buckets[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(buckets[i])
                           : absl::StrCat(buckets[i], "-", buckets[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

namespace {

// FormatBucketList for a line a person reads: past kShownParts parts, the
// first four and the last two around "..." ("685,687,689,691,...,1021,1023";
// `psctl status --json` keeps every move's buckets whole).
std::string ShortBucketList(const std::vector<uint32_t>& buckets) {
  constexpr size_t kShownParts = 8;
  const std::vector<std::string> parts =
      absl::StrSplit(FormatBucketList(buckets), ',');
  if (parts.size() <= kShownParts) return absl::StrJoin(parts, ",");
  return absl::StrCat(absl::StrJoin(parts.begin(), parts.begin() + 4, ","),
                      ",...,",
                      absl::StrJoin(parts.end() - 2, parts.end(), ","));
}

}  // namespace

std::string DescribeMoved(const proto::BucketMove& move) {
  std::string text;
  if (move.buckets_size() > 0 || move.blocks_size() == 0) {
    text = absl::StrFormat(
        "%d buckets (%s)", move.buckets_size(),
        ShortBucketList({move.buckets().begin(), move.buckets().end()}));
  }
  if (move.blocks_size() > 0) {
    absl::StrAppendFormat(
        &text, "%s%d dense blocks (%s)", text.empty() ? "" : " and ",
        move.blocks_size(),
        ShortBucketList({move.blocks().begin(), move.blocks().end()}));
  }
  return text;
}

}  // namespace downpour::coordinator

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

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

std::string Describe(const proto::BucketMove& m) {
  return absl::StrFormat(
      "bucket move %d (%d buckets %s, shard %d -> %d)", m.id(),
      m.buckets_size(),
      FormatBucketList({m.buckets().begin(), m.buckets().end()}),
      m.from_shard(), m.to_shard());
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

absl::Status BucketMoves::CheckFree(
    const std::vector<uint32_t>& buckets) const {
  const std::set<uint32_t> wanted(buckets.begin(), buckets.end());
  for (const proto::BucketMove& m : moves_) {
    if (!InProgress(m)) continue;
    for (uint32_t b : m.buckets()) {
      if (wanted.count(b) == 0) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "move buckets: bucket ", b, " is in ", Describe(m), ", phase '",
          m.phase(), "': wait until it ends (psctl moves), then ask again"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<proto::BucketMove>> BucketMoves::Start(
    const std::vector<uint32_t>& buckets, int to_shard,
    const std::string& reason, double now) {
  if (owners_.empty()) {
    return absl::FailedPreconditionError(
        "move buckets: the model has no sparse tables, so there are no hash "
        "buckets to move (dense blocks do not move)");
  }
  if (buckets.empty()) {
    return absl::InvalidArgumentError(
        "move buckets: no buckets named (e.g. --buckets 0-99,200)");
  }
  if (to_shard < 0 || to_shard >= shards_) {
    return absl::InvalidArgumentError(
        absl::StrCat("move buckets: shard ", to_shard, " does not exist (",
                     shards_, " shards: 0 to ", shards_ - 1, ")"));
  }
  std::map<int, std::vector<uint32_t>> by_source;
  std::set<uint32_t> seen;
  for (uint32_t b : buckets) {
    if (b >= owners_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "move buckets: bucket ", b, " does not exist (", owners_.size(),
          " buckets: 0 to ", owners_.size() - 1, ", model.sparse_buckets)"));
    }
    if (!seen.insert(b).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("move buckets: bucket ", b, " is named twice"));
    }
    if (owners_[b] == to_shard) {
      return absl::FailedPreconditionError(
          absl::StrCat("move buckets: bucket ", b, " is on shard ", to_shard,
                       " already; name only buckets of other shards"));
    }
    by_source[owners_[b]].push_back(b);
  }
  if (absl::Status free = CheckFree(buckets); !free.ok()) return free;
  std::vector<proto::BucketMove> started;
  for (auto& [from, list] : by_source) {
    std::sort(list.begin(), list.end());
    proto::BucketMove m;
    m.set_id(next_id_++);
    for (uint32_t b : list) m.add_buckets(b);
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
      changes.changed = true;
      SPDLOG_LOGGER_INFO(L(),
                         "{} switched at placement epoch {}: {} rows copied in "
                         "{:.2f} s",
                         Describe(*m), next_epoch, m->rows_copied(),
                         now - m->started_seconds());
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

absl::StatusOr<std::vector<BucketMoves::Planned>> BucketMoves::Plan(
    const std::vector<bool>& live, int drain_shard) const {
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
  std::map<std::pair<int, int>, std::vector<uint32_t>> moves;
  size_t src = 0;
  for (int to = 0; to < static_cast<int>(target.size()); ++to) {
    while (count[to] < target[to]) {
      while (src < excess.size() && excess[src].empty()) ++src;
      if (src == excess.size()) break;  // busy buckets: as even as it gets
      moves[{static_cast<int>(src), to}].push_back(excess[src].back());
      excess[src].pop_back();
      ++count[to];
    }
  }
  std::vector<Planned> plan;
  for (auto& [pair, list] : moves) {
    std::sort(list.begin(), list.end());
    plan.push_back({pair.first, pair.second, std::move(list)});
  }
  return plan;
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

}  // namespace downpour::coordinator

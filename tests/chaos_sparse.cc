// The chaos harness's sparse job and elastic faults (see chaos_sparse.h).
#include "tests/chaos_sparse.h"

#include <signal.h>

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "coordinator/bucket_moves.h"
#include "google/protobuf/util/json_util.h"
#include "server/checkpoint.h"
#include "tests/daemon_harness.h"

namespace downpour::chaos::internal {
namespace {

bool Open(const proto::BucketMove& m) {
  return m.phase() == "copy" || m.phase() == "switched";
}

std::string DescribeMove(const proto::BucketMove& m) {
  std::string text = absl::StrFormat(
      "move %d (buckets %s, shard %d -> %d): %s", m.id(),
      coordinator::FormatBucketList({m.buckets().begin(), m.buckets().end()}),
      m.from_shard(), m.to_shard(), m.phase());
  if (m.phase() == "rolled back") absl::StrAppend(&text, ": ", m.reason());
  return text;
}

// The last line of `text` that says something.
std::string LastLine(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    absl::string_view line = absl::StripAsciiWhitespace(*it);
    if (!line.empty()) return std::string(line.substr(0, 200));
  }
  return "";
}

}  // namespace

void WriteSparseData(const std::string& dir, int examples) {
  testing::WriteSparseLibsvm(dir + "/train.svm", examples, 1);
  testing::WriteSparseLibsvm(dir + "/test.svm", 1000, 2);
}

std::string SparseJobYaml(const std::string& dir, int epochs) {
  return absl::StrCat(
      "data:\n  source: libsvm\n  stream: true\n  classes: [-1, +1]\n  path: ",
      dir, "/train.svm\n  test_path: ", dir,
      "/test.svm\n"
      "model:\n  type: sparse_linear\n  task: binary\n  sparse_buckets: ",
      kSparseBuckets,
      "\n"
      "optimizer:\n  type: ftrl\n  learning_rate: 0.2\n  l1: 0.5\n  l2: 1\n"
      "training:\n  batch_size: 32\n  epochs: ",
      epochs, "\n  eval_every_steps: 0\n");
}

absl::StatusOr<uint64_t> CheckpointRowUpdates(const std::string& dir,
                                              int shards) {
  uint64_t held = 0;
  for (int shard = 0; shard < shards; ++shard) {
    absl::StatusOr<server::Checkpoint> c =
        server::ReadNewestCheckpoint(dir, shard);
    if (!c.ok()) return c.status();
    held += server::SparseRowUpdates(*c);
  }
  return held;
}

absl::StatusOr<std::map<int, proto::MemberReport>> FinalWorkerReports(
    const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  proto::GetHistoryResponse history;
  google::protobuf::util::JsonParseOptions lenient;
  lenient.ignore_unknown_fields = true;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(text, &history, lenient);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", parsed.message().as_string()));
  }
  std::map<int, proto::MemberReport> reports;
  for (const proto::HistorySample& sample : history.samples()) {
    for (const auto& m : sample.members()) {
      if (m.role() == "worker") reports[m.index()] = m.report();
    }
  }
  return reports;
}

void SparseView::NoteStatus(const proto::ClusterStatusResponse& status) {
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() != "worker") continue;
    if (m.report().step() > 0 || m.report().finished()) {
      reports_[m.index()] = m.report();
    }
  }
  // A coordinator restarted from its state lists the moves again.
  if (status.bucket_moves_size() > 0 || moves_.empty()) {
    moves_.assign(status.bucket_moves().begin(), status.bucket_moves().end());
  }
}

void SparseView::NoteFinalState(const proto::CoordinatorState& state) {
  moves_.assign(state.bucket_moves().begin(), state.bucket_moves().end());
  final_state_ = true;
}

void SparseView::NotePlacement(const proto::GetPlacementResponse& placement) {
  if (placement.epoch() == 0) return;  // not ready (a coordinator restarting)
  placement_ = placement;
  placement_read_ = true;
}

std::vector<uint32_t> SparseView::BucketsOf(int shard) const {
  for (const proto::ShardInfo& s : placement_.shards()) {
    if (s.index() == shard) return {s.buckets().begin(), s.buckets().end()};
  }
  return {};
}

const proto::MemberReport* SparseView::LastReport(int index) const {
  auto it = reports_.find(index);
  return it == reports_.end() ? nullptr : &it->second;
}

std::vector<int> SparseView::Reported() const {
  std::vector<int> slots;
  for (const auto& [index, report] : reports_) slots.push_back(index);
  return slots;
}

void SparseView::Fill(Observed* o) const {
  o->placement_read = placement_read_;
  for (const proto::ShardInfo& s : placement_.shards()) {
    o->buckets[s.index()] = {s.buckets().begin(), s.buckets().end()};
  }
  // The placement's own list of moves in progress (unless the final state
  // was read), and the status's (or the final state's) of all.
  o->moves_source = final_state_ ? "the coordinator's state file at the end"
                                 : "the last status read";
  std::set<uint64_t> open;
  for (const proto::BucketMove& m : placement_.moves()) {
    if (Open(m) && !final_state_) open.insert(m.id());
  }
  for (const proto::BucketMove& m : moves_) {
    o->moves.push_back(DescribeMove(m));
    if (Open(m)) open.insert(m.id());
  }
  for (const proto::BucketMove& m : moves_) {
    if (open.count(m.id()) > 0) o->open_moves.push_back(DescribeMove(m));
  }
  for (const proto::BucketMove& m : placement_.moves()) {
    if (open.count(m.id()) > 0 && std::none_of(moves_.begin(), moves_.end(),
                                               [&](const proto::BucketMove& s) {
                                                 return s.id() == m.id();
                                               })) {
      o->open_moves.push_back(DescribeMove(m));
    }
  }
}

std::string ElasticFaults::Psctl(const std::string& what,
                                 const std::string& coordinator,
                                 std::vector<std::string> args) {
  if (coordinator.empty()) return " skipped: no coordinator address";
  std::vector<std::string> argv = {bin_dir_ + "/tools/psctl", args[0],
                                   "--coordinator", coordinator};
  argv.insert(argv.end(), args.begin() + 1, args.end());
  const std::string log =
      absl::StrCat(dir_, "/psctl-", psctl_.size() + 1, ".log");
  absl::StatusOr<std::unique_ptr<Subprocess>> p =
      Subprocess::Start(what, argv, log);
  if (!p.ok()) return absl::StrCat(" failed: ", p.status().message());
  // A refusal comes at once; a move that started runs on (not waited for).
  const absl::Time until = absl::Now() + absl::Milliseconds(1500);
  std::optional<int> rc;
  while (!(rc = (*p)->Poll()).has_value() && absl::Now() < until &&
         wait_(absl::Milliseconds(50))) {
  }
  std::string note;
  if (!rc.has_value()) {
    note = absl::StrCat(" started (psctl pid ", (*p)->pid(), ")");
  } else if (*rc == 0) {
    note = absl::StrCat(" done: ", LastLine((*p)->LogTail(3)));
  } else if (absl::StrContains((*p)->LogTail(3), "rolled back")) {
    // Started, and rolled back within the wait (a shard died meanwhile).
    note = absl::StrCat(" started, rolled back (exit ", *rc,
                        "): ", LastLine((*p)->LogTail(3)));
  } else {
    note = absl::StrCat(" skipped: refused (exit ", *rc,
                        "): ", LastLine((*p)->LogTail(3)));
  }
  psctl_.push_back({what, std::move(*p)});
  return note;
}

std::string ElasticFaults::Move(const Fault& f, const std::string& coordinator,
                                const SparseView& view) {
  if (!view.placement_read()) return " skipped: no placement read yet";
  const std::vector<uint32_t> held = view.BucketsOf(1 - f.index);
  if (held.empty()) {
    return absl::StrCat(" skipped: shard ", 1 - f.index, " holds no bucket");
  }
  const int count =
      std::clamp<int>(f.bucket_count, 1, static_cast<int>(held.size()));
  const size_t first = std::min<size_t>(
      static_cast<size_t>(f.bucket_share * held.size()), held.size() - count);
  const std::vector<uint32_t> range(held.begin() + first,
                                    held.begin() + first + count);
  const std::string buckets = coordinator::FormatBucketList(range);
  return absl::StrCat(" buckets ", buckets, " of shard ", 1 - f.index, ":",
                      Psctl("psctl move-buckets", coordinator,
                            {"move-buckets", "--to", absl::StrCat(f.index),
                             "--buckets", buckets, "--wait_s", "60"}));
}

std::string ElasticFaults::Join(const std::string& coordinator) {
  if (coordinator.empty()) return " skipped: no coordinator address";
  const std::string log =
      absl::StrCat(dir_, "/joined-worker-", joined_.size() + 1, ".log");
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(
      "joined worker",
      {bin_dir_ + "/worker/ps_worker", "--config", config_, "--join",
       "--listen", "127.0.0.1:0", "--coordinator", coordinator},
      log);
  if (!p.ok()) return absl::StrCat(" failed: ", p.status().message());
  // One that cannot join (no free slot, no --join in this build) ends soon.
  const absl::Time until = absl::Now() + absl::Seconds(2);
  std::optional<int> rc;
  while (!(rc = (*p)->Poll()).has_value() && absl::Now() < until &&
         wait_(absl::Milliseconds(50))) {
  }
  std::string note = rc.has_value()
                         ? absl::StrCat(" skipped: it exited (", *rc,
                                        "): ", LastLine((*p)->LogTail(3)))
                         : absl::StrCat(" pid ", (*p)->pid());
  joined_.push_back({"joined worker", std::move(*p)});
  return note;
}

std::string ElasticFaults::Drain(const Fault& f, const std::string& coordinator,
                                 const proto::ClusterStatusResponse* status) {
  std::vector<int> listed;
  if (status != nullptr) {
    for (const proto::MemberStatus& m : status->members()) {
      if (m.role() == "worker" && m.alive() && !m.report().finished()) {
        listed.push_back(m.index());
      }
    }
  }
  if (listed.empty()) return " skipped: no live worker listed";
  const int worker = listed[f.index % listed.size()];
  return absl::StrCat(" worker ", worker, ":",
                      Psctl("psctl drain-worker", coordinator,
                            {"drain-worker", absl::StrCat(worker)}));
}

std::vector<std::string> ElasticFaults::Finish() {
  std::vector<std::string> notes;
  for (auto* group : {&psctl_, &joined_}) {
    for (Command& c : *group) {
      std::optional<int> rc = c.process->Wait(absl::Seconds(5));
      std::string how;
      if (!rc.has_value()) {
        c.process->Stop(absl::Seconds(2));
        how = "still running at the end: stopped";
      } else {
        how = absl::StrCat("exit ", *rc);
      }
      notes.push_back(absl::StrCat(c.what, " (pid ", c.process->pid(), "): ",
                                   how, ": ", LastLine(c.process->LogTail(3))));
    }
  }
  return notes;
}

void CheckSparseInvariants(const Observed& o, std::vector<std::string>* v) {
  const uint64_t held = o.held_row_updates, acked = o.acked_row_updates;
  if (held > acked + o.acked_row_slack) {
    v->push_back(absl::StrCat(
        "sparse: the final checkpoints hold ", held, " row updates, more than ",
        "the ", acked, " the workers acknowledged (+", o.acked_row_slack,
        " allowed for ended worker processes): a row update applied twice"));
  }
  // A loss reported (a shard back from a checkpoint) may leave fewer.
  if (held < acked && o.acked_pushes_lost == 0 && o.loss_exact) {
    v->push_back(absl::StrCat("sparse: ", acked - held,
                              " acknowledged row updates missing from the "
                              "final checkpoints (",
                              held, " held, ", acked,
                              " acknowledged), none reported lost"));
  }
  for (int slot : o.rows_unread) {
    v->push_back(absl::StrCat("sparse: worker ", slot,
                              "'s final report was never read"));
  }
  if (!o.placement_read) {
    v->push_back("sparse: no placement was read while the job ran");
    return;
  }
  std::map<uint32_t, std::vector<int>> owners;
  for (const auto& [shard, buckets] : o.buckets) {
    for (uint32_t b : buckets) owners[b].push_back(shard);
  }
  for (const auto& [bucket, shards] : owners) {
    if (shards.size() > 1) {
      v->push_back(absl::StrCat("sparse: bucket ", bucket, " owned by shards ",
                                absl::StrJoin(shards, " and ")));
    }
  }
  std::vector<uint32_t> unowned;
  for (int b = 0; b < o.sparse_buckets; ++b) {
    if (owners.count(b) == 0) unowned.push_back(b);
  }
  if (!unowned.empty()) {
    v->push_back(absl::StrCat("sparse: buckets ",
                              coordinator::FormatBucketList(unowned),
                              " owned by no shard"));
  }
  for (const std::string& m : o.open_moves) {
    v->push_back(absl::StrCat("sparse: ", m, " left open after the job ended (",
                              o.moves_source, ")"));
  }
}

}  // namespace downpour::chaos::internal

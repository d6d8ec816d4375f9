// ConsistencyGate: the ssp/bsp decisions of a shard's pushes and the state
// they keep beside Consistency's clocks and round sums.
#include "server/consistency_gate.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/wire_encoding.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

}  // namespace

ConsistencyGate::ConsistencyGate(const Config& config, int index,
                                 Counters* counters)
    : index_(index),
      counters_(counters),
      consistency_(config.training.consistency, config.training.max_staleness) {
  if (consistency_.mode() == Consistency::Mode::kSsp) {
    counters_->stats().ssp_max_lead.Set(0);
  }
}

absl::Status ConsistencyGate::HoldError(const std::string& why,
                                        int waited_for) {
  const absl::Time now = absl::Now();
  absl::Time& logged = wait_logged_[waited_for];
  if (now - logged >= kWaitLogInterval) {
    logged = now;
    SPDLOG_LOGGER_INFO(L(), "ps {}: {}", index_, why);
  }
  return absl::UnavailableError(why);
}

bool ConsistencyGate::Hold(absl::Mutex* mu, absl::Time until, bool* waited) {
  if (!*waited) {
    (consistency_.mode() == Consistency::Mode::kSsp
         ? counters_->stats().ssp_waits
         : counters_->stats().bsp_waits)
        .Increment(1);
  }
  *waited = true;
  if (released_) return false;
  struct Args {
    const ConsistencyGate* gate;
    uint64_t seen;
  } args{this, generation_};
  const absl::Condition changed(
      +[](Args* a) { return a->gate->generation() != a->seen; }, &args);
  return mu->AwaitWithDeadline(changed, until) && !released_;
}

bool ConsistencyGate::SetActiveWorkers(const std::vector<int>& workers) {
  if (consistency_.active_known() &&
      consistency_.active() == std::set<int>(workers.begin(), workers.end())) {
    return false;
  }
  SPDLOG_LOGGER_INFO(L(), "ps {}: active workers [{}]", index_,
                     absl::StrJoin(workers, ", "));
  consistency_.SetActiveWorkers(workers);
  return true;
}

ConsistencyGate::Route ConsistencyGate::RouteOf(int32_t worker,
                                                bool tracked) const {
  if (consistency_.mode() != Consistency::Mode::kBsp || !tracked) {
    return Route::kDirect;
  }
  if (consistency_.Gated(worker) || consistency_.BspHasPending(worker)) {
    return Route::kRound;
  }
  // A worker this ps does not count in its rounds yet (the coordinator has
  // not told it so). Applied alone here while another ps takes the same step
  // into a round, the two shards' rounds would stay a step apart for good,
  // each waiting for the worker's other step: so it waits to be counted (a
  // heartbeat at most).
  return worker >= 0 ? Route::kAwaitCounting : Route::kDirect;
}

absl::Status ConsistencyGate::NotCountedError(int32_t worker) {
  return HoldError(
      absl::StrCat("bsp: worker ", worker, " is not among ps ", index_,
                   "'s active workers yet: its push waits for the "
                   "coordinator's next word"),
      worker);
}

absl::Status ConsistencyGate::SspHoldError(int32_t worker,
                                           const Consistency::Wait& wait) {
  return HoldError(
      absl::StrCat("ssp: worker ", worker, "'s push to block ", wait.block,
                   " waits for worker ", wait.worker, " (clock ",
                   wait.slowest_clock, " vs ", wait.clock, ", max_staleness ",
                   consistency_.max_staleness(), ")"),
      wait.worker);
}

void ConsistencyGate::Applied(int32_t worker, const std::vector<uint32_t>& ids,
                              uint64_t clock) {
  if (consistency_.mode() == Consistency::Mode::kAsync) return;
  const int64_t lead = consistency_.SspApplied(worker, ids, clock);
  if (lead > max_lead_) {
    max_lead_ = lead;
    counters_->stats().ssp_max_lead.Set(static_cast<double>(lead));
  }
  ++generation_;
}

std::vector<Consistency::BlockGradient> ConsistencyGate::BspGradients(
    const wire::PushView& request, int64_t* bytes) {
  std::vector<Consistency::BlockGradient> gradients;
  *bytes = 0;
  for (const wire::BlockRef& block : request.blocks) {
    const auto encoding = static_cast<WireEncoding>(block.encoding);
    gradients.push_back({block.id, block.data,
                         block.size / BytesPerElement(encoding), encoding});
    *bytes += block.size;
  }
  // A sparse table joins as a round of no floats; its rows wait in
  // bsp_rows_ until the round completes.
  for (const wire::SparseRef& rows : request.sparse) {
    gradients.push_back(
        {SparseRoundId(rows.table), nullptr, 0, WireEncoding::kFloat32});
    *bytes += static_cast<int64_t>(rows.keys_size + rows.values_size);
  }
  return gradients;
}

Consistency::Contribution ConsistencyGate::Contribute(
    const wire::PushView& request,
    const std::vector<Consistency::BlockGradient>& gradients,
    std::vector<SparseTables::DecodedRows>* rows) {
  const int32_t worker = request.worker_id;
  const Consistency::Contribution contribution =
      consistency_.BspContribute(worker, request.sequence, gradients);
  if (contribution == Consistency::Contribution::kAdded) {
    for (size_t i = 0; i < rows->size(); ++i) {
      bsp_rows_[request.sparse[i].table][worker] = std::move((*rows)[i]);
    }
    rows->clear();
  }
  return contribution;
}

std::vector<std::pair<int, uint64_t>> ConsistencyGate::TakeSparseRound(
    uint32_t id, const SparseTables& tables, SparseRound* round) {
  const uint32_t table = id - SparseRoundId(0);
  const std::vector<int> contributors = consistency_.BspContributors(id);
  round->table = table;
  std::map<int, SparseTables::DecodedRows>& held = bsp_rows_[table];
  std::vector<const SparseTables::DecodedRows*> parts;
  for (int worker : contributors) {
    auto it = held.find(worker);
    if (it != held.end()) parts.push_back(&it->second);
  }
  std::vector<float> none;
  if (table >= tables.size()) return consistency_.BspTakeRound(id, &none);
  const int dim = tables.dim(table);
  // The union of the contributors' keys (each ascending), summed in
  // worker order, so a round gives the same rows whatever the arrival.
  std::vector<uint64_t>& keys = round->keys;
  for (const SparseTables::DecodedRows* p : parts) {
    std::vector<uint64_t> merged;
    merged.reserve(keys.size() + p->keys.size());
    std::set_union(keys.begin(), keys.end(), p->keys.begin(), p->keys.end(),
                   std::back_inserter(merged));
    keys.swap(merged);
  }
  std::vector<float>& mean = round->mean;
  std::vector<uint32_t>& counts = round->counts;
  mean.assign(keys.size() * dim, 0.0f);
  counts.assign(keys.size(), 0);
  for (const SparseTables::DecodedRows* p : parts) {
    size_t k = 0;
    for (size_t i = 0; i < p->keys.size(); ++i) {
      while (keys[k] != p->keys[i]) ++k;
      for (int j = 0; j < dim; ++j) mean[k * dim + j] += p->grads[i * dim + j];
      counts[k] += p->counts.empty() ? 1 : p->counts[i];
    }
  }
  const float n = static_cast<float>(std::max<size_t>(1, contributors.size()));
  for (float& g : mean) g /= n;
  for (int worker : contributors) held.erase(worker);
  return consistency_.BspTakeRound(id, &none);
}

uint64_t ConsistencyGate::RoundVersion(uint32_t block) const {
  const auto it = round_version_.find(block);
  return it == round_version_.end() ? 0 : it->second;
}

absl::Status ConsistencyGate::BspHoldError(
    int32_t worker, const std::vector<Consistency::BlockGradient>& gradients,
    Consistency::Contribution contribution) {
  // Whom the first unfinished block's round waits for.
  std::vector<int> missing;
  uint32_t block = 0;
  for (const Consistency::BlockGradient& g : gradients) {
    missing = consistency_.BspWaitingFor(g.block);
    block = g.block;
    if (!missing.empty()) break;
  }
  const std::string what =
      IsSparseRound(block)
          ? absl::StrCat("sparse table ", block - SparseRoundId(0))
          : absl::StrCat("block ", block);
  return HoldError(
      absl::StrCat("bsp: worker ", worker, "'s push to ", what,
                   contribution == Consistency::Contribution::kBusy
                       ? " waits for its previous round"
                       : " waits for the round",
                   " (missing workers [", absl::StrJoin(missing, ", "), "])"),
      missing.empty() ? worker : missing.front());
}

}  // namespace downpour::server

// The members of the cluster, their identities, liveness and outages.
#include "coordinator/membership.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/push_key.h"
#include "coordinator/member_identity.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

}  // namespace

const char* MemberRoleName(MemberRole role) {
  switch (role) {
    case MemberRole::kPs:
      return "ps";
    case MemberRole::kWorker:
      return "worker";
    case MemberRole::kStandby:
      return "standby";
  }
  return "?";
}

std::optional<MemberRole> ParseMemberRole(absl::string_view name) {
  for (MemberRole role :
       {MemberRole::kPs, MemberRole::kWorker, MemberRole::kStandby}) {
    if (name == MemberRoleName(role)) return role;
  }
  return std::nullopt;
}

absl::Status LeaseAllowsTakeOver(MemberRole role, int index,
                                 const std::string& address,
                                 const std::string& serving,
                                 absl::Duration silent, absl::Duration lease) {
  if (silent >= lease) return absl::OkStatus();
  const std::string held = absl::StrFormat(
      "%s %d's place is held by the process registered from %s, which "
      "heartbeated %.1f s ago; a new process may take it only once that "
      "process's lease (heartbeat.timeout_s = %.1f s) runs out without a "
      "heartbeat",
      MemberRoleName(role), index, serving, absl::ToDoubleSeconds(silent),
      absl::ToDoubleSeconds(lease));
  SPDLOG_LOGGER_WARN(L(), "refused {} {} from {}: its lease is held by {}",
                     MemberRoleName(role), index, address, serving);
  if (role == MemberRole::kPs) {
    return absl::AlreadyExistsError(absl::StrCat(
        "register: ", held,
        ": a second daemon cannot take a live shard. This daemon rejoins as "
        "a spare and takes the shard over if the server is declared dead"));
  }
  return absl::UnavailableError(absl::StrCat(
      "register: ", held,
      " (retried until then). If that process still runs, stop it first or "
      "use another index"));
}

Membership::Membership(const ClusterSection& cluster, Clock* clock,
                       absl::Time start)
    : clock_(clock),
      start_(start),
      configured_standbys_(cluster.standby_ps.size()),
      configured_ps_(cluster.ps.size()),
      configured_workers_(cluster.workers.size()),
      worker_slots_(WorkerSlots(cluster)),
      last_heard_(start) {
  for (size_t i = 0; i < cluster.ps.size(); ++i) {
    ps_.push_back({MemberRole::kPs, static_cast<int>(i), cluster.ps[i]});
  }
  for (size_t i = 0; i < cluster.standby_ps.size(); ++i) {
    standby_.push_back(
        {MemberRole::kStandby, static_cast<int>(i), cluster.standby_ps[i]});
  }
  for (size_t i = 0; i < cluster.workers.size(); ++i) {
    workers_.push_back(
        {MemberRole::kWorker, static_cast<int>(i), cluster.workers[i]});
  }
}

int Membership::AddPs(const std::string& address) {
  const int index = static_cast<int>(ps_.size());
  ps_.push_back({MemberRole::kPs, index, address});
  return index;
}

int Membership::JoinedPsAt(const std::string& address) const {
  for (size_t i = configured_ps_; i < ps_.size(); ++i) {
    if (ps_[i].address == address) return static_cast<int>(i);
  }
  return -1;
}

int Membership::RestoreJoined(const proto::CoordinatorState& state) {
  for (const std::string& address : state.added_ps()) AddPs(address);
  int workers = 0;
  // Joined worker slots were taken in order, so their records come in order.
  for (const proto::MemberRecord& r : state.members()) {
    if (r.role() != MemberRoleName(MemberRole::kWorker) || !r.joined() ||
        r.index() != static_cast<int>(workers_.size()) ||
        r.index() >= worker_slots_) {
      continue;
    }
    workers_.push_back({MemberRole::kWorker, r.index(), r.address()});
    workers_.back().joined = true;
    ++workers;
  }
  return state.added_ps_size() + workers;
}

Member* Membership::JoinWorker(const std::string& address) {
  Member* slot = nullptr;
  for (size_t i = configured_workers_; i < workers_.size(); ++i) {
    if (workers_[i].drained && !workers_[i].alive) {
      slot = &workers_[i];
      break;
    }
  }
  if (slot == nullptr) {
    if (static_cast<int>(workers_.size()) >= worker_slots_) return nullptr;
    const int index = static_cast<int>(workers_.size());
    workers_.push_back({MemberRole::kWorker, index, address});
    slot = &workers_.back();
  }
  Retire(*slot);  // a drained slot's old process is no member any more
  slot->address = address;
  slot->joined = true;
  slot->drained = false;
  slot->report.Clear();
  return slot;
}

Member* Membership::Find(MemberRole role, int index) {
  return const_cast<Member*>(std::as_const(*this).Find(role, index));
}

const Member* Membership::Find(MemberRole role, int index) const {
  const std::vector<Member>& members = role == MemberRole::kPs       ? ps_
                                       : role == MemberRole::kWorker ? workers_
                                                                     : standby_;
  if (index < 0 || index >= static_cast<int>(members.size())) return nullptr;
  return &members[index];
}

absl::Status Membership::CheckIndex(MemberRole role, int index) const {
  if (Find(role, index) != nullptr) return absl::OkStatus();
  const bool worker = role == MemberRole::kWorker;
  const size_t n = worker                    ? workers_.size()
                   : role == MemberRole::kPs ? ps_.size()
                                             : standby_.size();
  return absl::InvalidArgumentError(absl::StrCat(
      "register: ", MemberRoleName(role), " index ", index,
      " is not in the config (", n, " in cluster.",
      worker                    ? "workers"
      : role == MemberRole::kPs ? "ps"
                                : "standby_ps",
      ": valid indices are 0 to ", static_cast<int64_t>(n) - 1, ")"));
}

absl::Status Membership::MayDrain(int index) const {
  const Member* m = Find(MemberRole::kWorker, index);
  if (m == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "drain-worker: there is no worker ", index, " in this job (",
        workers_.size(), " worker slots in use: valid indices are 0 to ",
        static_cast<int64_t>(workers_.size()) - 1,
        "; psctl status lists them)"));
  }
  const std::string who = absl::StrCat("drain-worker: worker ", index);
  if (m->drained) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, " is drained already: nothing to do"));
  }
  if (!m->registered) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, " has not registered: it holds no data parts to hand over"));
  }
  if (m->report.finished()) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, " has already finished its steps: it holds nothing to hand over"));
  }
  for (const Member& w : workers_) {
    if (w.index != index && w.alive && !w.report.finished()) {
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "drain-worker: worker ", index,
      " is the last one training: its parts would wait; stop the job "
      "instead"));
}

absl::Status Membership::CheckConfiguredStandby(int index) const {
  const size_t configured = configured_standbys_;
  if (index >= 0 && index < static_cast<int>(configured)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "register: standby index ", index, " is not in the config (", configured,
      " in cluster.standby_ps: valid indices are 0 to ",
      static_cast<int64_t>(configured) - 1, ")"));
}

Membership::KeyMatch Membership::Identify(const Member& m,
                                          const std::string& key) const {
  if (SameKey(key, m.key)) return KeyMatch::kCurrent;
  for (const std::string& retired : m.retired_keys) {
    if (SameKey(key, retired)) return KeyMatch::kRetired;
  }
  return KeyMatch::kNone;
}

bool Membership::Admit(Member& m, const std::string& key) {
  if (m.registered && SameKey(key, m.key)) return false;
  Retire(m);
  m.key = NewMemberKey();
  m.incarnation = ++last_incarnation_;
  m.push_key = m.role == MemberRole::kWorker ? NewPushKey() : 0;
  return true;
}

void Membership::Retire(Member& m) {
  if (m.key.empty()) return;
  m.retired_keys.push_back(std::move(m.key));
  m.key.clear();
  if (m.retired_keys.size() > kRetiredKeys) {
    m.retired_keys.erase(m.retired_keys.begin());
  }
}

bool Membership::ServesOrBacksUp(const Member& m) {
  if (m.role == MemberRole::kPs) return true;
  return m.role == MemberRole::kStandby &&
         (m.serving_index >= 0 || m.replica_of >= 0);
}

void Membership::AddWorkerIncarnations(
    const Member& to,
    google::protobuf::RepeatedPtrField<proto::WorkerIncarnation>* out) const {
  if (!ServesOrBacksUp(to)) return;
  for (const Member& w : workers_) {
    if (!w.registered || w.incarnation == 0) continue;
    proto::WorkerIncarnation* i = out->Add();
    i->set_worker(w.index);
    i->set_incarnation(w.incarnation);
    if (w.push_key != 0) {
      i->set_push_key_digest(PushKeyDigest(w.index, w.incarnation, w.push_key));
    }
  }
}

void Membership::Touch(Member& m) {
  // A new registration of a member declared dead ends its outage.
  if (m.registered && !m.alive) CloseOutage(m, "restarted");
  m.registered = true;
  m.alive = true;
  m.last_heartbeat = clock_->Now();
  m.lease_heard = m.last_heartbeat;
  last_heard_ = m.last_heartbeat;
}

void Membership::Heard(Member& m, const proto::MemberReport& report) {
  if (!m.alive) {
    SPDLOG_LOGGER_INFO(L(), "{} {} is alive again", MemberRoleName(m.role),
                       m.index);
    CloseOutage(m, "alive again");
  }
  m.alive = true;
  m.last_heartbeat = clock_->Now();
  m.lease_heard = m.last_heartbeat;
  last_heard_ = m.last_heartbeat;
  m.report = report;
  m.reported_finished = report.finished();
  if (m.drained) m.report.set_finished(true);
}

int Membership::ExpireSilent(absl::Duration timeout,
                             const std::function<void(Member&)>& on_death) {
  const absl::Time now = clock_->Now();
  int changed = 0;
  for (auto* group : {&ps_, &workers_, &standby_}) {
    for (Member& m : *group) {
      if (!m.alive || now - m.last_heartbeat <= timeout) continue;
      m.alive = false;
      ++changed;
      if (m.role == MemberRole::kWorker && m.report.finished()) {
        SPDLOG_LOGGER_INFO(L(), "worker {} at {} left after finishing", m.index,
                           m.address);
        continue;
      }
      SPDLOG_LOGGER_WARN(
          L(),
          "{} {} at {} is dead: no heartbeat for {:.1f} s (timeout {:.1f} s)",
          MemberRoleName(m.role), m.index, m.address,
          absl::ToDoubleSeconds(now - m.last_heartbeat),
          absl::ToDoubleSeconds(timeout));
      OpenOutage(m);
      on_death(m);
    }
  }
  return changed;
}

int Membership::HoldJudgement() {
  const absl::Time now = clock_->Now();
  int given = 0;
  for (auto* group : {&ps_, &workers_, &standby_}) {
    for (Member& m : *group) {
      if (!m.alive) continue;
      m.last_heartbeat = std::max(m.last_heartbeat, now);
      // Its lease too: a place is not handed to a newcomer for a silence
      // that was the coordinator's own (a ps restarted from its checkpoint
      // took a shard from the standby serving it, newer by 1,311 pushes,
      // right after the coordinator's network came back). A member without
      // a lease (restored after an orderly stop) gets none.
      if (m.lease_heard != absl::InfinitePast()) {
        m.lease_heard = std::max(m.lease_heard, now);
      }
      ++given;
    }
  }
  return given;
}

bool Membership::HearsNobody(absl::Duration silence) const {
  if (clock_->Now() - last_heard_ <= silence) return false;
  int expected = 0;
  for (const auto* group : {&ps_, &workers_, &standby_}) {
    for (const Member& m : *group) {
      const bool finished =
          m.role == MemberRole::kWorker && m.report.finished();
      if (m.alive && !finished) ++expected;
    }
  }
  return expected >= 2;
}

void Membership::OpenOutage(const Member& m) {
  proto::MemberOutage outage;
  outage.set_role(MemberRoleName(m.role));
  outage.set_index(m.index);
  outage.set_address(m.address);
  outage.set_start_seconds(absl::ToDoubleSeconds(clock_->Now() - start_));
  outage.set_end_seconds(-1);
  outages_.push_back(std::move(outage));
  if (outages_.size() > kOutagesKept) outages_.erase(outages_.begin());
}

void Membership::CloseOutage(const Member& m, const char* how) {
  for (proto::MemberOutage& o : outages_) {
    if (o.end_seconds() >= 0 || o.role() != MemberRoleName(m.role) ||
        o.index() != m.index) {
      continue;
    }
    o.set_end_seconds(absl::ToDoubleSeconds(clock_->Now() - start_));
    o.set_ended_by(how);
  }
}

int Membership::SpareSlotFor(
    const proto::RegisterServerRequest& request) const {
  const size_t first = configured_standbys_;
  const int index = request.index();
  if (index >= static_cast<int>(first) &&
      index < static_cast<int>(standby_.size()) && standby_[index].spare &&
      !request.member_key().empty() &&
      SameKey(request.member_key(), standby_[index].key)) {
    return index;  // its own slot (e.g. after a coordinator restart)
  }
  for (size_t i = first; i < standby_.size(); ++i) {
    if (standby_[i].address == request.address()) return static_cast<int>(i);
  }
  for (size_t i = first; i < standby_.size(); ++i) {
    if (!standby_[i].alive && standby_[i].serving_index < 0) {
      return static_cast<int>(i);
    }
  }
  if (Spares() < MaxSpares()) {
    return static_cast<int>(standby_.size());
  }
  return -1;
}

bool Membership::SpareSlotTaken(int slot, const std::string& address) const {
  return slot > static_cast<int>(standby_.size()) ||
         (slot < static_cast<int>(standby_.size()) &&
          standby_[slot].address != address && standby_[slot].alive);
}

Member& Membership::SpareSlot(int slot, const std::string& address) {
  if (slot == static_cast<int>(standby_.size())) {
    standby_.push_back({MemberRole::kStandby, slot, address});
    standby_.back().spare = true;
  }
  return standby_[slot];
}

void Membership::AddActiveWorkers(bool bsp,
                                  proto::HeartbeatResponse* response) const {
  for (const Member& w : workers_) {
    const bool never_registered = !w.registered && w.incarnation == 0;
    if ((w.registered && w.alive && !w.report.finished()) ||
        (bsp && never_registered)) {
      response->add_active_workers(w.index);
    }
  }
  response->set_active_workers_known(true);
}

void Membership::AddStatus(absl::Time now,
                           proto::ClusterStatusResponse* response) const {
  for (const auto* group : {&ps_, &workers_, &standby_}) {
    for (const Member& m : *group) {
      proto::MemberStatus* out = response->add_members();
      out->set_role(MemberRoleName(m.role));
      out->set_index(m.index);
      out->set_address(m.address);
      out->set_alive(m.alive);
      out->set_registered(m.registered);
      out->set_seconds_since_heartbeat(
          m.registered ? absl::ToDoubleSeconds(now - m.last_heartbeat) : -1);
      *out->mutable_report() = m.report;
      // A drained worker counts as finished; its status shows what it said.
      if (m.drained) out->mutable_report()->set_finished(m.reported_finished);
      out->set_serving_index(m.role == MemberRole::kStandby ? m.serving_index
                                                            : -1);
      out->set_replica_of(m.role == MemberRole::kStandby ? m.replica_of : -1);
      out->set_spare(m.spare);
      out->set_former_shard(m.spare ? m.former_shard : -1);
      out->set_joined(m.joined);
      out->set_drained(m.drained);
    }
  }
  for (const proto::MemberOutage& o : outages_) *response->add_outages() = o;
}

void Membership::SaveTo(proto::CoordinatorState* state) const {
  state->set_last_incarnation(last_incarnation_);
  for (size_t i = configured_ps_; i < ps_.size(); ++i) {
    state->add_added_ps(ps_[i].address);
  }
  for (const auto* group : {&ps_, &workers_, &standby_}) {
    for (const Member& m : *group) {
      proto::MemberRecord* r = state->add_members();
      r->set_role(MemberRoleName(m.role));
      r->set_index(m.index);
      r->set_address(m.address);
      r->set_registered(m.registered);
      r->set_finished(m.report.finished());
      r->set_serving_index(m.serving_index);
      r->set_applied_total(m.applied_total);
      r->set_replica_of(m.replica_of);
      r->set_member_key(m.key);
      for (const std::string& k : m.retired_keys) r->add_retired_keys(k);
      r->set_incarnation(m.incarnation);
      r->set_push_key(m.push_key);
      r->set_spare(m.spare);
      r->set_former_shard(m.former_shard);
      r->set_joined(m.joined);
      r->set_drained(m.drained);
      if (m.role == MemberRole::kWorker && (m.drained || m.report.finished())) {
        *r->mutable_final_report() = m.report;
      }
    }
  }
}

int Membership::Restore(const proto::CoordinatorState& state) {
  last_incarnation_ = state.last_incarnation();
  int restored = 0;
  for (const proto::MemberRecord& r : state.members()) {
    const std::optional<MemberRole> role = ParseMemberRole(r.role());
    // Spare slots follow the configured standbys, in order.
    if (role == MemberRole::kStandby && r.spare() && r.registered() &&
        r.index() == static_cast<int>(standby_.size()) &&
        Spares() < MaxSpares()) {
      SpareSlot(r.index(), r.address());
    }
    Member* m = role.has_value() ? Find(*role, r.index()) : nullptr;
    if (m == nullptr || !r.registered()) continue;
    m->address = r.address();
    m->key = r.member_key();
    m->retired_keys.assign(r.retired_keys().begin(), r.retired_keys().end());
    m->incarnation = r.incarnation();
    m->push_key = r.push_key();
    Touch(*m);  // a full timeout to heartbeat again before being declared dead
    // A coordinator that stopped in order was stopped with its job: the
    // members' processes are gone, and new ones need not wait for a lease.
    if (state.stopped_cleanly()) m->lease_heard = absl::InfinitePast();
    // A state file from before member keys: the member registers again (its
    // heartbeats get FailedPrecondition) and gets a key.
    if (m->key.empty()) m->registered = m->alive = false;
    if (r.has_final_report()) m->report = r.final_report();
    m->report.set_finished(r.finished());
    m->serving_index = r.serving_index();
    m->replica_of = m->role == MemberRole::kStandby ? r.replica_of() : -1;
    m->applied_total = r.applied_total();
    m->spare = r.spare();
    m->former_shard = r.spare() ? r.former_shard() : -1;
    m->joined = m->joined || r.joined();
    m->drained = m->role == MemberRole::kWorker && r.drained();
    if (m->drained) m->report.set_finished(true);
    ++restored;
  }
  return restored;
}

}  // namespace downpour::coordinator

// Membership: identities, liveness, outages, spare slots and the refusal of a
// second process for a live member.
#include "coordinator/membership.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ClusterSection Cluster() {
  ClusterSection cluster;
  cluster.ps = {"10.0.0.1:1", "10.0.0.1:2"};
  cluster.workers = {"10.0.0.2:1", "10.0.0.2:2", "10.0.0.2:3"};
  cluster.standby_ps = {"10.0.0.3:1"};
  return cluster;
}

class MembershipTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  Membership members_{Cluster(), &clock_, clock_.Now()};
};

TEST_F(MembershipTest, FindsEachConfiguredMemberAndNoOther) {
  ASSERT_NE(members_.Find(MemberRole::kWorker, 2), nullptr);
  EXPECT_EQ(members_.Find(MemberRole::kWorker, 2)->address, "10.0.0.2:3");
  EXPECT_EQ(members_.Find(MemberRole::kWorker, 3), nullptr);
  EXPECT_EQ(members_.Find(MemberRole::kPs, -1), nullptr);
  EXPECT_THAT(members_.CheckIndex(MemberRole::kPs, 1), IsOk());
  EXPECT_THAT(
      members_.CheckIndex(MemberRole::kWorker, 5),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("register: worker index 5 is not in the config "
                         "(3 in cluster.workers: valid indices are 0 to 2)")));
  EXPECT_THAT(members_.CheckConfiguredStandby(1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("1 in cluster.standby_ps")));
}

TEST_F(MembershipTest, AdmitGivesANewProcessANewIdentityAndRetiresTheOld) {
  Member& w = *members_.Find(MemberRole::kWorker, 0);
  EXPECT_TRUE(members_.Admit(w, ""));
  members_.Touch(w);
  const std::string first = w.key;
  EXPECT_EQ(w.incarnation, 1u);
  EXPECT_NE(w.push_key, 0u);
  EXPECT_FALSE(members_.Admit(w, first));  // the same process again
  EXPECT_EQ(w.incarnation, 1u);
  EXPECT_TRUE(members_.Admit(w, ""));  // a new one
  EXPECT_EQ(w.incarnation, 2u);
  EXPECT_EQ(members_.Identify(w, w.key), Membership::KeyMatch::kCurrent);
  EXPECT_EQ(members_.Identify(w, first), Membership::KeyMatch::kRetired);
  EXPECT_EQ(members_.Identify(w, "stranger"), Membership::KeyMatch::kNone);
  EXPECT_EQ(members_.Identify(w, ""), Membership::KeyMatch::kNone);
}

TEST_F(MembershipTest, KeepsOnlyTheNewestRetiredKeys) {
  Member& ps = *members_.Find(MemberRole::kPs, 0);
  for (size_t i = 0; i < Membership::kRetiredKeys + 3; ++i) {
    members_.Admit(ps, "");
    members_.Touch(ps);
  }
  EXPECT_EQ(ps.retired_keys.size(), Membership::kRetiredKeys);
}

TEST_F(MembershipTest, ExpireSilentJudgesInOrderAndOpensOutages) {
  for (auto* group : {&members_.ps(), &members_.workers()}) {
    for (Member& m : *group) {
      members_.Admit(m, "");
      members_.Touch(m);
    }
  }
  members_.workers()[1].report.set_finished(true);
  clock_.Advance(absl::Seconds(5));
  members_.Touch(members_.workers()[2]);  // heard just now
  std::vector<std::string> deaths;
  const int changed = members_.ExpireSilent(absl::Seconds(3), [&](Member& m) {
    deaths.push_back(absl::StrCat(MemberRoleName(m.role), m.index));
  });
  EXPECT_EQ(changed, 4);  // two ps, worker 0, finished worker 1
  EXPECT_THAT(deaths, ElementsAre("ps0", "ps1", "worker0"));
  proto::ClusterStatusResponse status;
  members_.AddStatus(clock_.Now(), &status);
  EXPECT_EQ(status.outages_size(), 3);
  EXPECT_EQ(status.outages(0).end_seconds(), -1);

  members_.Touch(members_.ps()[0]);  // it registers again
  status.Clear();
  members_.AddStatus(clock_.Now(), &status);
  EXPECT_EQ(status.outages(0).ended_by(), "restarted");
}

TEST_F(MembershipTest, HoldJudgementGivesLiveMembersAFreshTimeout) {
  Member& ps = members_.ps()[0];
  Member& w = members_.workers()[0];
  members_.Touch(ps);
  members_.Touch(w);
  clock_.Advance(absl::Seconds(10));
  EXPECT_TRUE(members_.HearsNobody(absl::Seconds(5)));
  EXPECT_EQ(members_.HoldJudgement(), 2);
  EXPECT_EQ(members_.ExpireSilent(absl::Seconds(5), [](Member&) {}), 0);
  // Nor is a place taken for the coordinator's own silence: their leases
  // run from now too (a ps and a worker registering elsewhere wait).
  EXPECT_THAT(
      LeaseAllowsTakeOver(MemberRole::kPs, 0, "10.0.0.9:1", ps.address,
                          clock_.Now() - ps.lease_heard, absl::Seconds(5)),
      StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(
      LeaseAllowsTakeOver(MemberRole::kWorker, 0, "10.0.0.9:1", w.address,
                          clock_.Now() - w.lease_heard, absl::Seconds(5)),
      StatusIs(absl::StatusCode::kUnavailable));
  // Holding judgement is not hearing from anyone.
  EXPECT_TRUE(members_.HearsNobody(absl::Seconds(5)));
  members_.Heard(w, proto::MemberReport());
  EXPECT_FALSE(members_.HearsNobody(absl::Seconds(5)));
}

TEST_F(MembershipTest, SpareSlotsFollowTheConfiguredStandbysAndAreBounded) {
  proto::RegisterServerRequest request;
  request.set_address("10.0.0.9:1");
  EXPECT_EQ(members_.SpareSlotFor(request), 1);
  Member& spare = members_.SpareSlot(1, request.address());
  EXPECT_TRUE(spare.spare);
  members_.Admit(spare, "");
  members_.Touch(spare);
  EXPECT_EQ(members_.Spares(), 1u);
  EXPECT_EQ(members_.SpareSlotFor(request), 1);  // its address again
  EXPECT_TRUE(members_.SpareSlotTaken(1, "10.0.0.9:2"));
  EXPECT_FALSE(members_.SpareSlotTaken(1, request.address()));
  for (size_t i = members_.Spares(); i < members_.MaxSpares(); ++i) {
    request.set_address(absl::StrCat("10.0.0.8:", i));
    Member& m =
        members_.SpareSlot(members_.SpareSlotFor(request), request.address());
    members_.Admit(m, "");
    members_.Touch(m);
  }
  request.set_address("10.0.0.7:1");
  EXPECT_EQ(members_.SpareSlotFor(request), -1);
}

TEST_F(MembershipTest, SaveAndRestoreKeepIdentities) {
  Member& w = members_.workers()[1];
  members_.Admit(w, "");
  members_.Touch(w);
  proto::CoordinatorState state;
  members_.SaveTo(&state);
  EXPECT_EQ(state.members_size(), 6);

  Membership restored(Cluster(), &clock_, clock_.Now());
  EXPECT_EQ(restored.Restore(state), 1);
  const Member& r = restored.workers()[1];
  EXPECT_TRUE(r.registered && r.alive);
  EXPECT_EQ(r.key, w.key);
  EXPECT_EQ(r.incarnation, w.incarnation);
  EXPECT_EQ(r.push_key, w.push_key);
  Member& other = restored.workers()[0];
  EXPECT_TRUE(restored.Admit(other, ""));
  EXPECT_EQ(other.incarnation, w.incarnation + 1);  // incarnations go on
}

TEST(LeaseAllowsTakeOverTest, RefusesOnlyWhileTheLeaseRuns) {
  const absl::Duration lease = absl::Seconds(3);
  // Silent for its lease: the place may be taken, whatever the role.
  for (MemberRole role :
       {MemberRole::kPs, MemberRole::kWorker, MemberRole::kStandby}) {
    EXPECT_THAT(LeaseAllowsTakeOver(role, 0, "10.0.0.5:1", "10.0.0.1:1",
                                    absl::Seconds(3), lease),
                IsOk());
  }
  // Heartbeated within it: retried (Unavailable) until it runs out...
  EXPECT_THAT(
      LeaseAllowsTakeOver(MemberRole::kWorker, 1, "a:1", "b:1",
                          absl::Seconds(2.9), lease),
      StatusIs(absl::StatusCode::kUnavailable,
               HasSubstr("worker 1's place is held by the process registered "
                         "from b:1, which heartbeated 2.9 s ago")));
  EXPECT_THAT(LeaseAllowsTakeOver(MemberRole::kStandby, 0, "10.0.0.1:2",
                                  "10.0.0.1:1", absl::ZeroDuration(), lease),
              StatusIs(absl::StatusCode::kUnavailable));
  // ...but a ps rejoins as a spare, from any host.
  for (const char* from : {"10.0.0.1:2", "10.0.0.5:1"}) {
    EXPECT_THAT(LeaseAllowsTakeOver(MemberRole::kPs, 0, from, "10.0.0.1:1",
                                    absl::Seconds(1), lease),
                StatusIs(absl::StatusCode::kAlreadyExists,
                         HasSubstr("rejoins as a spare")));
  }
}

TEST(MemberRoleTest, NamesRoundTrip) {
  for (MemberRole role :
       {MemberRole::kPs, MemberRole::kWorker, MemberRole::kStandby}) {
    EXPECT_EQ(ParseMemberRole(MemberRoleName(role)), role);
  }
  EXPECT_EQ(ParseMemberRole("janitor"), std::nullopt);
}

}  // namespace
}  // namespace downpour::coordinator

#include "tools/status_table.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::tools {
namespace {

using ::testing::HasSubstr;

TEST(StatusTableTest, ShowsEveryMemberWithItsFigures) {
  proto::ClusterStatusResponse status;
  status.set_placement_epoch(3);
  proto::MemberStatus* ps = status.add_members();
  ps->set_role("ps");
  ps->set_address("127.0.0.1:7001");
  ps->set_registered(true);
  ps->set_alive(true);
  ps->mutable_report()->set_pushes(42);
  ps->mutable_report()->set_bytes(3.5e6);
  ps->mutable_report()->set_loss(NAN);
  proto::MemberStatus* worker = status.add_members();
  worker->set_role("worker");
  worker->set_index(1);
  worker->set_registered(true);
  worker->set_alive(false);
  worker->mutable_report()->set_accuracy(0.9512);
  worker->mutable_report()->set_loss(0.25);
  const std::string table = FormatStatusTable(status);
  EXPECT_THAT(table, HasSubstr("placement epoch 3"));
  EXPECT_THAT(table, HasSubstr("127.0.0.1:7001"));
  EXPECT_THAT(table, HasSubstr("3.5 MB"));
  EXPECT_THAT(table, HasSubstr("DEAD"));
  EXPECT_THAT(table, HasSubstr("0.9512"));
}

// A regression worker has no accuracy: the TEST column shows its rmse.
TEST(StatusTableTest, RegressionWorkersShowTheirRmse) {
  proto::ClusterStatusResponse status;
  proto::MemberStatus* worker = status.add_members();
  worker->set_role("worker");
  worker->set_registered(true);
  worker->set_alive(true);
  worker->mutable_report()->set_step(10);
  worker->mutable_report()->set_accuracy(NAN);
  (*worker->mutable_report()->mutable_metrics())["rmse"] = 53.7368;
  (*worker->mutable_report()->mutable_metrics())["r2"] = 0.455;
  EXPECT_EQ(TestFigure(worker->report()), 53.7368);
  EXPECT_THAT(FormatStatusTable(status), HasSubstr("53.7368"));
  proto::MemberReport classifier;
  classifier.set_accuracy(0.9);
  EXPECT_EQ(TestFigure(classifier), 0.9);
}

TEST(StatusTableTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(2.5e9), "2.50 GB");
}

}  // namespace
}  // namespace downpour::tools

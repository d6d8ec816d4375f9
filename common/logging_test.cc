#include "common/logging.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

TEST(LoggingTest, EachComponentHasItsOwnNamedLogger) {
  const struct {
    Logger id;
    const char* name;
  } cases[] = {{Logger::kServer, "server"},
               {Logger::kWorker, "worker"},
               {Logger::kCoordinator, "coordinator"},
               {Logger::kRpc, "rpc"},
               {Logger::kGpu, "gpu"},
               {Logger::kTool, "tool"},
               {Logger::kServe, "serve"}};
  for (const auto& c : cases) {
    ASSERT_NE(Log(c.id), nullptr) << c.name;
    EXPECT_EQ(Log(c.id)->name(), c.name);
    EXPECT_STREQ(LoggerName(c.id), c.name);
    EXPECT_EQ(Log(c.id), Log(c.id)) << "created once";
  }
  EXPECT_NE(Log(Logger::kServer), Log(Logger::kWorker));
}

TEST(LoggingTest, InitLoggingSetsEveryLoggersLevel) {
  ASSERT_THAT(InitLogging("ps 1", "warn"), IsOk());
  EXPECT_EQ(Log(Logger::kGpu)->level(), spdlog::level::warn);
  EXPECT_EQ(Log(Logger::kServer)->level(), spdlog::level::warn);
  ASSERT_THAT(InitLogging("", "info"), IsOk());
  EXPECT_EQ(Log(Logger::kServer)->level(), spdlog::level::info);
  EXPECT_THAT(
      InitLogging("", "loud"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'loud'")));
}

}  // namespace
}  // namespace downpour

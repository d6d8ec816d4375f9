#include "coordinator/state_file.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

std::string TestPath() {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/" +
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::remove_all(dir);
  return dir + "/coordinator.state";
}

proto::CoordinatorState State(uint64_t epoch) {
  proto::CoordinatorState state;
  state.set_placement_epoch(epoch);
  return state;
}

TEST(StateFileTest, NoFileIsNotFound) {
  StateFile file(TestPath());
  EXPECT_THAT(file.Read(), StatusIs(absl::StatusCode::kNotFound));
}

TEST(StateFileTest, ReadsBackWhatItWrote) {
  StateFile file(TestPath());
  ASSERT_THAT(file.Write(1, State(7)), IsOk());
  absl::StatusOr<proto::CoordinatorState> read = file.Read();
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->placement_epoch(), 7u);
  EXPECT_EQ(read->format(), 1u);
}

TEST(StateFileTest, AnOlderSnapshotNeverReplacesANewerOne) {
  StateFile file(TestPath());
  ASSERT_THAT(file.Write(2, State(2)), IsOk());
  ASSERT_THAT(file.Write(1, State(1)), IsOk());  // arrived late: dropped
  EXPECT_EQ(file.Read()->placement_epoch(), 2u);
  ASSERT_THAT(file.Write(3, State(3)), IsOk());
  EXPECT_EQ(file.Read()->placement_epoch(), 3u);
}

TEST(StateFileTest, AnUnreadableFileIsFailedPreconditionNamingTheFix) {
  const std::string path = TestPath();
  std::filesystem::create_directories(path);  // exists, cannot be read
  StateFile file(path);
  EXPECT_THAT(file.Read(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                    HasSubstr("coordinator state '" + path +
                                              "' exists but cannot be read")));
  EXPECT_THAT(file.Read().status().message(), HasSubstr("move it away"));
}

TEST(StateFileTest, GarbageIsDataLoss) {
  const std::string path = TestPath();
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path());
  { std::ofstream(path) << "\xff\xff\xff garbage"; }
  EXPECT_THAT(StateFile(path).Read(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("is unreadable or of another format")));
}

}  // namespace
}  // namespace downpour::coordinator

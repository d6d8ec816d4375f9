#include "common/parse_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(std::vector<std::string>, set, {}, "overrides, as the daemons take");

namespace downpour {
namespace {

using ::testing::ElementsAre;

TEST(ParseFlagsTest, EveryRepeatedSetCounts) {
  std::vector<std::string> args = {"bin",
                                   "--set",
                                   "data.path=a.csv",
                                   "--set=cluster.workers=[127.0.0.1:0, "
                                   "127.0.0.1:0]",
                                   "-set",
                                   "training.epochs=3",
                                   "--",
                                   "--set=ignored"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  EXPECT_THAT(RepeatedSetValues(argv.size(), argv.data()),
              ElementsAre("data.path=a.csv",
                          "cluster.workers=[127.0.0.1:0, 127.0.0.1:0]",
                          "training.epochs=3"));
  ParseFlags(argv.size(), argv.data());
  // The flag splits at commas; config.h's MergeOverrideFragments glues the
  // list back together.
  EXPECT_THAT(absl::GetFlag(FLAGS_set),
              ElementsAre("data.path=a.csv", "cluster.workers=[127.0.0.1:0",
                          " 127.0.0.1:0]", "training.epochs=3"));
}

}  // namespace
}  // namespace downpour

// Tests of reading a config file and its YAML document
// (common/config_yaml.h), through the loader: malformed, empty, missing,
// oversized and multi-document files.
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/config_test_util.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

using config_testing::BadCase;
using config_testing::ExpectAllFail;
using config_testing::Parse;
using config_testing::WriteTempFile;

TEST(ConfigTest, MalformedYamlNamesLine) {
  ExpectAllFail({
      {"training:\n  batch_size: [1, 2\n", "cfg.yaml:3: malformed YAML: "},
      {"training:\n  batch_size: 1\n bad: 2\n", "malformed YAML: "},
      {"model: {type: mlp\n", "cfg.yaml:2: malformed YAML: "},
      {"training:\n  steps: 1\n---\nmodel:\n  type: mlp\n",
       "cfg.yaml:4: expected one YAML document"},
  });
}

// Found by tools/fuzz/config_fuzzer: yaml-cpp 0.7's LoadAll never returned
// (allocating all the while) on a file starting with ','. Each case must
// answer at all; what it answers is the loader's usual verdict.
TEST(ConfigTest, LeadingCommaDoesNotHang) {
  for (const char* text :
       {",\n", ", a\n", "# c\n, x\n", "---\n,\n",
        ", 127.0.0.1:0, 127.0.0.1:0\ncluster:\n  ps: []\n"}) {
    EXPECT_THAT(Parse(text), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("malformed YAML: ")))
        << text;
  }
  EXPECT_THAT(Parse("# nothing\n---\n"), IsOk());
  EXPECT_THAT(Parse("---\ndata:\n  source: synthetic\n---\n"), IsOk());
  EXPECT_THAT(Parse("  , x\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "cfg.yaml:1: malformed YAML: ', x' holds no key: a "
                       "config is a mapping of sections (cluster:, model:, "
                       "...)"));
}

TEST(ConfigTest, MissingFileIsNotFound) {
  EXPECT_THAT(
      LoadConfig("/nonexistent/cluster.yaml"),
      StatusIs(absl::StatusCode::kNotFound,
               "config file '/nonexistent/cluster.yaml' not found: check "
               "the path given to --config"));
  const char* dir = std::getenv("TEST_TMPDIR");
  ASSERT_NE(dir, nullptr);
  EXPECT_THAT(LoadConfig(dir), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("is a directory")));
}

TEST(ConfigTest, EmptyConfigFileIsRefused) {
  for (const std::string text :
       {"", "\n  \n", "# nothing yet\n\n# more\n", "---\n# a comment\n...\n"}) {
    const std::string path = WriteTempFile("empty.yaml", text);
    EXPECT_THAT(LoadConfig(path),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("empty.yaml: config file is empty"),
                               HasSubstr("deploy/configs/mnist_local.yaml"))))
        << "text: '" << text << "'";
  }
}

TEST(ConfigTest, ConfigFileIsReadUpToOneMiB) {
  const std::string big =
      WriteTempFile("big.yaml", "# " + std::string(2 << 20, 'x') + "\n");
  EXPECT_THAT(LoadConfig(big),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("big.yaml' is larger than 1048576 bytes")));
  // An endless device fails at once instead of being read for ever.
  EXPECT_THAT(LoadConfig("/dev/zero"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'/dev/zero' is larger than 1048576 bytes")));
}

}  // namespace
}  // namespace downpour

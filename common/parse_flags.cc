// ParseFlags: absl's parser, with its exit(1) turned into the documented
// status by an atexit hook armed only while it runs.
#include "common/parse_flags.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/exit_codes.h"

namespace downpour {
namespace {

// The status to exit with when absl ends the process while parsing; -1 when
// not parsing (a later exit() keeps its own status).
std::atomic<int> g_parse_exit{-1};

void ExitWithParseStatus() {
  const int code = g_parse_exit.load();
  if (code < 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

bool OwnFlag(absl::string_view file) {
  return !absl::StrContains(file, "absl/");
}

}  // namespace

void SetUsage(absl::string_view usage) {
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = OwnFlag;
  usage_config.contains_helpshort_flags = OwnFlag;
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(usage);
}

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    absl::string_view name = arg;
    if (!absl::ConsumePrefix(&name, "--")) absl::ConsumePrefix(&name, "-");
    if (name == "help" || name == "helpfull" || name == "helpshort" ||
        name == "helppackage" || name == "version" ||
        absl::StartsWith(name, "helpon=") ||
        absl::StartsWith(name, "helpmatch=")) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> RepeatedSetValues(int argc, char** argv) {
  std::vector<std::string> values;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--")) absl::ConsumePrefix(&arg, "-");
    if (absl::ConsumePrefix(&arg, "set=")) {
      values.emplace_back(arg);
    } else if (arg == "set" && i + 1 < argc) {
      values.emplace_back(argv[++i]);
    }
  }
  return values;
}

std::vector<char*> ParseFlags(int argc, char** argv) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(ExitWithParseStatus); });
  g_parse_exit.store(AsksForHelp(argc, argv) ? 0 : kExitConfig);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  // absl keeps only the last of a repeated list flag; every --set counts.
  const std::vector<std::string> sets = RepeatedSetValues(argc, argv);
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag("set");
  if (sets.size() > 1 && flag != nullptr) {
    std::string error;
    if (!flag->ParseFrom(absl::StrJoin(sets, ","), &error)) {
      std::fprintf(stderr, "--set: %s\n", error.c_str());
      std::exit(kExitConfig);
    }
  }
  g_parse_exit.store(-1);
  return rest;
}

}  // namespace downpour

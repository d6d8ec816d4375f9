// ParseFlags: absl's parser, with its exit(1) turned into the documented
// status by an atexit hook armed only while it runs.
#include "common/parse_flags.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/flags/parse.h"
#include "absl/strings/match.h"
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

}  // namespace

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

std::vector<char*> ParseFlags(int argc, char** argv) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(ExitWithParseStatus); });
  g_parse_exit.store(AsksForHelp(argc, argv) ? 0 : kExitConfig);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  g_parse_exit.store(-1);
  return rest;
}

}  // namespace downpour

// Command-line parsing with the exit statuses docs/OPERATIONS.md promises.
//
//   int main(int argc, char** argv) {
//     std::vector<char*> args = downpour::ParseFlags(argc, argv);
//
// absl::ParseCommandLine ends the process with status 1 both for a bad flag
// (unknown, or a value that is not a number / not allowed) and, in the Abseil
// we build on, for --help. Every binary here calls ParseFlags instead: a bad
// flag prints absl's message naming the flag ("ERROR: Illegal value 'abc'
// specified for flag 'index'") and exits 2 (kExitConfig); --help, --helpfull,
// --helpshort, --helppackage, --helpon=, --helpmatch= and --version exit 0.
#ifndef DOWNPOUR_COMMON_PARSE_FLAGS_H_
#define DOWNPOUR_COMMON_PARSE_FLAGS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace downpour {

// Sets `usage` as the program's usage message and makes --help and
// --helpshort list the program's own flags only (those defined outside
// Abseil's absl/ files). Call once, from main, before ParseFlags.
void SetUsage(absl::string_view usage);

// absl::ParseCommandLine(argc, argv) with the exit statuses above. Returns the
// positional arguments (argv[0] first). Call once, from main.
// A --set given several times counts every time (absl keeps only the last
// value of a repeated flag): `--set a.b=1 --set c.d=2` is `--set a.b=1,c.d=2`.
std::vector<char*> ParseFlags(int argc, char** argv);

// The values of every --set (--set=V, --set V, -set ...) before "--".
std::vector<std::string> RepeatedSetValues(int argc, char** argv);

// True when argv asks for help or the version (see above), before any "--".
bool AsksForHelp(int argc, char** argv);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_PARSE_FLAGS_H_

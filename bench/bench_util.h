// Small helpers the benchmark binaries share.
#ifndef DOWNPOUR_BENCH_BENCH_UTIL_H_
#define DOWNPOUR_BENCH_BENCH_UTIL_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace downpour::bench {

// Prints "<program>: <what>: <status>" and exits 1 when status is not OK.
void CheckOrExit(const absl::Status& status, const std::string& program,
                 const std::string& what);

// "1,16" -> {1, 16}; entries that are not integers are skipped.
std::vector<int> ParseInts(const std::string& text);

// Prints "\ntotal <seconds since start, %.1f> s\n" on stdout: a run's last
// line.
void PrintTotal(std::chrono::steady_clock::time_point start);

// A benchmark's main: parses the command line's flags, then returns run().
int ParseFlagsAndRun(int argc, char** argv, int (*run)());

// True when `name` is one of the comma-separated `sections`.
bool SectionOn(const std::string& sections, const std::string& name);

// The median (upper one for an even count); 0 for none.
double Median(std::vector<double> values);

// `flag` when set, else the bazel-bin folder this binary was built into (the
// one holding coordinator/, server/, worker/), as an absolute path.
std::string BinDirOr(const std::string& flag);

// `flag` when set, else a new /tmp/downpour-<name>-XXXXXX folder; exits 1
// ("<name>: mkdtemp: ...") when it cannot be made.
std::string RunDirOr(const std::string& flag, const std::string& name);

}  // namespace downpour::bench

#endif  // DOWNPOUR_BENCH_BENCH_UTIL_H_

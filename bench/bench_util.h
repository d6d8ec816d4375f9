// Small helpers the benchmark binaries share.
#ifndef DOWNPOUR_BENCH_BENCH_UTIL_H_
#define DOWNPOUR_BENCH_BENCH_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace downpour::bench {

// Prints "<program>: <what>: <status>" and exits 1 when status is not OK.
void CheckOrExit(const absl::Status& status, const std::string& program,
                 const std::string& what);

// "1,16" -> {1, 16}; entries that are not integers are skipped.
std::vector<int> ParseInts(const std::string& text);

// True when `name` is one of the comma-separated `sections`.
bool SectionOn(const std::string& sections, const std::string& name);

// The median (upper one for an even count); 0 for none.
double Median(std::vector<double> values);

}  // namespace downpour::bench

#endif  // DOWNPOUR_BENCH_BENCH_UTIL_H_

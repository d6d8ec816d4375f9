// Shared benchmark helpers.
#include "bench/bench_util.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace downpour::bench {

void CheckOrExit(const absl::Status& status, const std::string& program,
                 const std::string& what) {
  if (status.ok()) return;
  absl::FPrintF(stderr, "%s: %s: %s\n", program, what, status.ToString());
  std::exit(1);
}

std::vector<int> ParseInts(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v;
    if (absl::SimpleAtoi(part, &v)) out.push_back(v);
  }
  return out;
}

bool SectionOn(const std::string& sections, const std::string& name) {
  for (absl::string_view s : absl::StrSplit(sections, ',')) {
    if (s == name) return true;
  }
  return false;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

}  // namespace downpour::bench

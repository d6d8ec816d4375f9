// Shared benchmark helpers.
#include "bench/bench_util.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/flags/parse.h"
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

void PrintTotal(std::chrono::steady_clock::time_point start) {
  absl::PrintF("\ntotal %.1f s\n", std::chrono::duration<double>(
                                       std::chrono::steady_clock::now() - start)
                                       .count());
}

int ParseFlagsAndRun(int argc, char** argv, int (*run)()) {
  absl::ParseCommandLine(argc, argv);
  return run();
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

std::string BinDirOr(const std::string& flag) {
  std::string bin_dir = flag;
  if (bin_dir.empty()) {
    std::error_code error;
    const std::filesystem::path self =
        std::filesystem::read_symlink("/proc/self/exe", error);
    bin_dir = error ? "bazel-bin" : self.parent_path().parent_path().string();
  }
  return std::filesystem::absolute(bin_dir).string();
}

std::string RunDirOr(const std::string& flag, const std::string& name) {
  if (!flag.empty()) return flag;
  std::string pattern = "/tmp/downpour-" + name + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror((name + ": mkdtemp").c_str());
    std::exit(1);
  }
  return pattern;
}

}  // namespace downpour::bench

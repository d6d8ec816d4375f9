// Prints the parse speed (MB/s of text, one core) of the data readers on
// generated numeric data, median of 3 runs, plus gunzip of the CSV, and the
// streaming of a generated Criteo-like file written to a temp folder
// (PartReader alone, and with ParseCriteoRows):
//   bazel run //bench:reader_bench [-- megabytes [csv|libsvm|gunzip|criteo]]
// (default 50 MB, every reader). Each line gives MB/s of wall time
// (absl::Now) and of this thread's CPU time: on a shared machine the second
// is the per-core speed.
#include <time.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "data/criteo_parser.h"
#include "data/csv_reader.h"
#include "data/file_reader.h"
#include "data/input_parts.h"
#include "data/libsvm_reader.h"
#include "data/sparse_dataset.h"
#include "data/table.h"

namespace downpour {
namespace {

constexpr int kColumns = 30;  // 29 features and a label
constexpr int kRuns = 3;

// Numeric CSV of about `bytes`: values like "-0.123456" and "12.5", as a
// scaler or pandas writes them, and a class label 0..9.
std::string MakeCsv(size_t bytes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::string text;
  text.reserve(bytes + 1024);
  for (int c = 0; c + 1 < kColumns; ++c) absl::StrAppend(&text, "f", c, ",");
  text += "label\n";
  while (text.size() < bytes) {
    for (int c = 0; c + 1 < kColumns; ++c) {
      absl::StrAppendFormat(&text, "%.6g,", normal(rng));
    }
    absl::StrAppend(&text, rng() % 10, "\n");
  }
  return text;
}

// LIBSVM of about `bytes`: ~30 of 200 features per row, labels +1/-1.
std::string MakeLibsvm(size_t bytes) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::string text;
  text.reserve(bytes + 1024);
  while (text.size() < bytes) {
    text += rng() % 2 ? "+1" : "-1";
    int index = 0;
    for (int k = 0; k < 30; ++k) {
      index += 1 + rng() % 12;
      absl::StrAppendFormat(&text, " %d:%.6g", index, normal(rng));
    }
    text += "\n";
  }
  return text;
}

std::string Gzip(const std::string& text) {
  uLongf size = compressBound(text.size()) + 32;
  std::string out(size, '\0');
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
               Z_DEFAULT_STRATEGY);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = text.size();
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = out.size();
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// Criteo-like text of about `bytes`: label, 13 integers (10% missing, mostly
// small), 26 categoricals of 8 hex digits (15% missing); ~220 bytes a line.
std::string MakeCriteo(size_t bytes) {
  std::mt19937 rng(3);
  std::geometric_distribution<int> small(0.02);
  std::string text;
  text.reserve(bytes + 1024);
  while (text.size() < bytes) {
    text += rng() % 4 == 0 ? '1' : '0';
    for (int i = 0; i < 13; ++i) {
      text += '\t';
      if (rng() % 10 != 0) absl::StrAppend(&text, small(rng) - 1);
    }
    for (int j = 0; j < 26; ++j) {
      text += '\t';
      if (rng() % 100 >= 15) {
        absl::StrAppendFormat(&text, "%08x", rng() % (1000u << (j % 10)));
      }
    }
    text += '\n';
  }
  return text;
}

// Writes `text` to a file; false on failure.
bool WriteFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// MB/s of wall time and of CPU time, medians over kRuns runs.
struct Rate {
  double wall = 0;
  double cpu = 0;
};

// The median rates of kRuns runs of fn() on `bytes` of input; 0 if fn fails.
template <typename Fn>
Rate MedianMbPerSecond(size_t bytes, Fn fn) {
  std::vector<double> wall, cpu;
  for (int r = 0; r < kRuns; ++r) {
    const absl::Time start = absl::Now();
    const double cpu_start = ThreadCpuSeconds();
    if (!fn()) return Rate();
    cpu.push_back(bytes / 1e6 / (ThreadCpuSeconds() - cpu_start));
    wall.push_back(bytes / 1e6 / absl::ToDoubleSeconds(absl::Now() - start));
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return Rate{wall[kRuns / 2], cpu[kRuns / 2]};
}

bool Check(const absl::StatusOr<data::Table>& t) {
  if (!t.ok()) std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
  return t.ok();
}

void Print(const char* what, const Rate& rate) {
  std::printf("  %-44s %8.1f MB/s wall %8.1f MB/s cpu\n", what, rate.wall,
              rate.cpu);
}

// Streams one part over the whole file with 1 MiB chunks, parsing each
// chunk's rows into a dataset emptied per chunk (keeping its capacity, as a
// worker reuses its batch) when `parse`.
bool StreamCriteo(const std::vector<data::InputFile>& files, bool parse) {
  data::PartReader reader(files, data::PlanParts(files, 1)[0]);
  data::TextChunk chunk;
  data::SparseDataset rows;
  int64_t bytes = 0;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&chunk);
    if (!more.ok())
      std::fprintf(stderr, "%s\n", more.status().ToString().c_str());
    if (!more.ok()) return false;
    if (!*more) break;
    bytes += chunk.text.size();
    if (!parse) continue;
    rows.offsets.assign(1, 0);
    rows.keys.clear();
    rows.values.clear();
    rows.fields.clear();
    rows.y.clear();
    const absl::Status s = data::ParseCriteoRows(chunk.text, "bench", 1, &rows);
    if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
    if (!s.ok()) return false;
  }
  return bytes == files[0].size;
}

bool BenchCriteo(size_t bytes) {
  const std::string text = MakeCriteo(bytes);
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/reader_bench_criteo.txt");
  if (!WriteFile(path, text)) return false;
  absl::StatusOr<std::vector<data::InputFile>> files =
      data::ExpandInputs({path});
  if (!files.ok()) return false;
  const std::string title = absl::StrFormat(
      "criteo %.1f MB (page cache), PartReader alone", text.size() / 1e6);
  const Rate read = MedianMbPerSecond(
      text.size(), [&] { return StreamCriteo(*files, false); });
  Print(title.c_str(), read);
  const Rate parse = MedianMbPerSecond(
      text.size(), [&] { return StreamCriteo(*files, true); });
  Print("criteo, PartReader + ParseCriteoRows", parse);
  std::remove(path.c_str());
  return read.wall > 0 && parse.wall > 0;
}

int Main(size_t megabytes, const std::string& only) {
  const size_t bytes = megabytes << 20;
  const bool all = only.empty();
  std::printf("reader_bench: median of %d runs, one thread\n", kRuns);
  bool ok = true;
  if (all || only == "csv" || only == "gunzip") {
    const std::string csv = MakeCsv(bytes);
    const std::string title =
        absl::StrFormat("csv %.1f MB, %d columns", csv.size() / 1e6, kColumns);
    if (all || only == "csv") {
      const Rate plain = MedianMbPerSecond(csv.size(), [&] {
        return Check(data::ParseCsv(csv, "bench.csv", data::CsvOptions()));
      });
      Print(title.c_str(), plain);
      data::CsvOptions mean;
      mean.missing = data::Missing::kMean;
      const Rate with_mean = MedianMbPerSecond(csv.size(), [&] {
        return Check(data::ParseCsv(csv, "bench.csv", mean));
      });
      Print("csv, missing: mean", with_mean);
      ok = ok && plain.wall > 0 && with_mean.wall > 0;
    }
    if (all || only == "gunzip") {
      const std::string gz = Gzip(csv);
      const Rate gunzip = MedianMbPerSecond(csv.size(), [&] {
        absl::StatusOr<std::string> text = data::MaybeGunzip(gz, "bench.gz");
        return text.ok() && text->size() == csv.size();
      });
      Print(absl::StrFormat("gunzip %.1f MB to the csv (MB/s of output)",
                            gz.size() / 1e6)
                .c_str(),
            gunzip);
      ok = ok && gunzip.wall > 0;
    }
  }
  if (all || only == "libsvm") {
    const std::string svm = MakeLibsvm(bytes);
    const Rate rate = MedianMbPerSecond(svm.size(), [&] {
      return Check(data::ParseLibsvm(svm, "bench.svm", data::LibsvmOptions()));
    });
    Print(
        absl::StrFormat("libsvm %.1f MB, 30 of ~360 features", svm.size() / 1e6)
            .c_str(),
        rate);
    ok = ok && rate.wall > 0;
  }
  if (all || only == "criteo") ok = BenchCriteo(bytes) && ok;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace downpour

int main(int argc, char** argv) {
  const long mb = argc > 1 ? std::atol(argv[1]) : 50;
  return downpour::Main(mb > 0 ? static_cast<size_t>(mb) : 50,
                        argc > 2 ? argv[2] : "");
}

// A synthetic click log in Criteo's Kaggle text format, at any size and
// deterministic from a seed, with labels from a known logistic model (so the
// best achievable test AUC is known: "bayes_auc").
//
//   bazel build -c opt //bench/criteo:gen_criteo
//   bazel-bin/bench/criteo/gen_criteo --out /tmp/criteo/train.txt
//       --bytes 4G --test_out /tmp/criteo/test.txt --test_rows 100000 --seed 1
//   (one command line)
//
// Each line is `label \t I1..I13 \t C1..C26 \n` (40 tab-separated fields):
//   label: 0 or 1, drawn from the model's probability (about 25.6 % are 1);
//   I1..I13: floor(exp(mu_i + sigma_i * N(0,1))) (heavy-tailed, mostly 0..100,
//     up to 10^9), empty with probability 5..45 % by field; I2 is -1 in 3 %
//     of rows, as in Criteo;
//   C1..C26: 8 lowercase hex digits, the rank r of a Zipf(1.1) draw over the
//     field's vocabulary put through a bijection of 32-bit numbers (distinct
//     ranks, distinct strings); vocabularies are log-spaced, C1 10 values up
//     to C26 10^6; empty with probability 0.5..4 % by field.
// The model: logit = b + sum over present C fields of w(Cj, value) + sum over
// present I fields of w(Ii, t) + sum over 5 C-field pairs, both present, of
// u(pair, value_a, value_b), where t = v <= 2 ? v : floor(ln(v)^2) (the token
// the Downpour Criteo reader makes: feature "I<i>" value t). The w and u are
// Normal(0, sigma) drawn from a hash of (seed, field, value); b makes 25.6 %
// of a calibration sample's probabilities positive on average. Scales are set
// for a Bayes AUC near 0.78 (a linear learner without the pairs gets less).
//
// Flags: --out and --rows N and/or --bytes SIZE (K, M, G, T = 2^10, 2^20,
// 2^30, 2^40; stops after the first line that reaches SIZE), --test_out
// (optional: without it the test rows are drawn for bayes_auc but not
// written), --test_rows (100000, a stream of the seed of its own), --seed (1).
// Same seed and flags, same bytes: the generator is splitmix64, normals are
// Box-Muller, Zipf draws invert a precomputed CDF (no std:: distributions).
// Only libm's exp, log, pow, sin and cos could differ (in the last bit, on
// another libm or CPU), which would change a value in rare rows.
// Prints rows, bytes, positive share per file, the bias, `bayes_auc <value>`
// (exact, ties as half) and the MB/s of the training file.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/parse_flags.h"

ABSL_FLAG(std::string, out, "", "training file to write (required)");
ABSL_FLAG(int64_t, rows, 0,
          "training rows (0: --bytes alone decides; with --bytes too, the "
          "first limit reached stops)");
ABSL_FLAG(std::string, bytes, "",
          "training file size, e.g. 400M or 4G (stops at the first line "
          "that reaches it)");
ABSL_FLAG(std::string, test_out, "", "test file to write (optional)");
ABSL_FLAG(int64_t, test_rows, 100000, "test rows");
ABSL_FLAG(uint64_t, seed, 1, "seed of the model and of both files");

namespace {

constexpr int kIntFields = 13;
constexpr int kCatFields = 26;
constexpr double kZipfExponent = 1.1;
constexpr double kPositiveShare = 0.256;
constexpr int kCalibrationRows = 200000;
constexpr double kSigmaCat = 0.21;   // sd of w(Cj, value)
constexpr double kSigmaInt = 0.15;   // sd of w(Ii, t)
constexpr double kSigmaPair = 0.30;  // sd of u(pair, a, b)
constexpr int kMaxToken = 500;       // t of v <= 2^31 is at most 461
constexpr int64_t kMaxInt = 1000000000;

// Stream numbers of the seed: the model's tables, the bias sample, the files.
enum Stream : uint64_t { kModel = 1, kCalibration = 2, kTrain = 3, kTest = 4 };

// Per integer field: log-scale mean and sd, and the missing probability.
struct IntShape {
  double mu, sigma, missing;
};
constexpr IntShape kIntShapes[kIntFields] = {
    {0.3, 1.4, 0.45}, {1.5, 1.9, 0.05}, {1.8, 1.6, 0.21}, {1.4, 1.1, 0.22},
    {7.5, 2.2, 0.05}, {3.0, 1.9, 0.22}, {1.5, 1.8, 0.05}, {2.6, 1.0, 0.05},
    {3.7, 1.5, 0.05}, {0.2, 0.8, 0.45}, {0.8, 1.2, 0.05}, {0.1, 1.2, 0.45},
    {1.6, 1.2, 0.22}};

// The C-field pairs (0-based) with an interaction term.
constexpr std::pair<int, int> kPairs[] = {
    {1, 4}, {2, 8}, {5, 10}, {0, 13}, {7, 9}};

// SplitMix64's finalizer: a bijection of 64-bit numbers.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Hash3(uint64_t a, uint64_t b, uint64_t c) {
  return Mix64(Mix64(Mix64(a) ^ b) + c);
}

double ToUnit(uint64_t x) { return (x >> 11) * 0x1.0p-53; }

// A Normal(0, 1) from two 64-bit hashes (Box-Muller, cosine branch).
double NormalFrom(uint64_t h1, uint64_t h2) {
  const double u1 = 1.0 - ToUnit(h1);  // (0, 1]
  return std::sqrt(-2.0 * std::log(u1)) *
         std::cos(6.283185307179586 * ToUnit(h2));
}

// SplitMix64 with Box-Muller normals (the second of each pair kept).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  double Uniform() { return ToUnit(Next()); }
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(1.0 - Uniform()));
    const double a = 6.283185307179586 * Uniform();
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }

 private:
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// The token the Downpour reader makes of integer v.
int IntToken(int64_t v) {
  if (v <= 2) return static_cast<int>(v);
  const double l = std::log(static_cast<double>(v));
  return static_cast<int>(std::floor(l * l));
}

// A bijection of 32-bit numbers keyed by `key`: rank -> the hex value.
uint32_t Permute32(uint32_t x, uint32_t key) {
  x ^= key;
  x = (x ^ (x >> 16)) * 0x7feb352dU;
  x = (x ^ (x >> 15)) * 0x846ca68bU;
  x ^= x >> 16;
  return x + key * 0x9e3779b9U;
}

// One categorical field: the Zipf CDF over ranks, a guide table for O(1)
// inversion, and the weight of each rank's value.
struct CatField {
  std::vector<double> cdf;      // cdf[r] = P(rank <= r); the last is 1
  std::vector<uint32_t> guide;  // guide[k]: least r with cdf[r] > k / size
  std::vector<float> weight;    // w(field, value of rank r)
  uint32_t key = 0;             // Permute32 key: rank -> value
  double missing = 0;

  uint32_t Draw(double u) const {
    uint32_t r = guide[static_cast<size_t>(u * guide.size())];
    while (cdf[r] <= u) ++r;
    return r;
  }
  uint32_t Value(uint32_t rank) const { return Permute32(rank, key); }
};

CatField MakeCatField(uint64_t seed, int j) {
  CatField f;
  const size_t n = static_cast<size_t>(
      std::llround(std::pow(10.0, 1.0 + 5.0 * j / (kCatFields - 1))));
  f.key = static_cast<uint32_t>(Hash3(seed, kModel, 1000 + j));
  f.missing = 0.005 + 0.035 * ((j * 7) % kCatFields) / (kCatFields - 1);
  f.cdf.resize(n);
  double sum = 0;
  for (size_t r = 0; r < n; ++r) {
    sum += std::pow(static_cast<double>(r + 1), -kZipfExponent);
    f.cdf[r] = sum;
  }
  for (double& c : f.cdf) c /= sum;
  f.cdf[n - 1] = 1.0;
  f.guide.resize(n);
  size_t r = 0;
  for (size_t k = 0; k < n; ++k) {
    while (f.cdf[r] <= static_cast<double>(k) / n) ++r;
    f.guide[k] = static_cast<uint32_t>(r);
  }
  f.weight.resize(n);
  const uint64_t field_seed = Hash3(seed, kModel, 2000 + j);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = Hash3(field_seed, f.Value(i), 0);
    f.weight[i] = kSigmaCat * NormalFrom(h, Mix64(h));
  }
  return f;
}

// The logistic model: per-field tables and the bias.
struct Model {
  uint64_t seed = 0;
  std::vector<CatField> cat;
  std::vector<std::vector<float>> int_weight;  // [i][t + 1], t in -1..500
  double bias = 0;

  // u(pair p, value a, value b).
  double PairWeight(int p, uint32_t a, uint32_t b) const {
    const uint64_t h =
        Hash3(seed ^ 0x5a17ULL, p, (static_cast<uint64_t>(a) << 32) | b);
    return kSigmaPair * NormalFrom(h, Mix64(h + 1));
  }
};

Model MakeModel(uint64_t seed) {
  Model m;
  m.seed = seed;
  for (int j = 0; j < kCatFields; ++j) m.cat.push_back(MakeCatField(seed, j));
  m.int_weight.assign(kIntFields, std::vector<float>(kMaxToken + 2));
  for (int i = 0; i < kIntFields; ++i) {
    for (int t = -1; t <= kMaxToken; ++t) {
      const uint64_t h =
          Hash3(seed, kModel, (static_cast<uint64_t>(3000 + i) << 32) + t + 1);
      m.int_weight[i][t + 1] = kSigmaInt * NormalFrom(h, Mix64(h));
    }
  }
  return m;
}

// One drawn row; kMissing marks an empty field.
constexpr int64_t kMissingInt = INT64_MIN;
struct Row {
  int64_t ints[kIntFields];
  bool cat_present[kCatFields];
  uint32_t cat_rank[kCatFields];
};

// Draws the row's fields into *row and returns its logit without the bias.
double DrawRow(const Model& m, Rng& rng, Row* row) {
  double logit = 0;
  for (int i = 0; i < kIntFields; ++i) {
    const IntShape& s = kIntShapes[i];
    int64_t v = kMissingInt;
    if (rng.Uniform() >= s.missing) {
      const double x = std::exp(s.mu + s.sigma * rng.Normal());
      v = x >= kMaxInt ? kMaxInt : static_cast<int64_t>(x);
      if (i == 1 && rng.Uniform() < 0.03) v = -1;
      logit += m.int_weight[i][IntToken(v) + 1];
    }
    row->ints[i] = v;
  }
  for (int j = 0; j < kCatFields; ++j) {
    const CatField& f = m.cat[j];
    const bool present = rng.Uniform() >= f.missing;
    const double u = rng.Uniform();  // drawn either way: fields independent
    row->cat_present[j] = present;
    if (!present) continue;
    row->cat_rank[j] = f.Draw(u);
    logit += f.weight[row->cat_rank[j]];
  }
  int p = 0;
  for (const auto& [a, b] : kPairs) {
    if (row->cat_present[a] && row->cat_present[b]) {
      logit += m.PairWeight(p, m.cat[a].Value(row->cat_rank[a]),
                            m.cat[b].Value(row->cat_rank[b]));
    }
    ++p;
  }
  return logit;
}

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// The bias that makes the mean probability of a calibration sample
// kPositiveShare (bisection: the mean is increasing in the bias).
double CalibrateBias(const Model& m) {
  Rng rng(Hash3(m.seed, kCalibration, 0));
  Row row;
  std::vector<double> logits(kCalibrationRows);
  for (double& z : logits) z = DrawRow(m, rng, &row);
  double lo = -20, hi = 20;
  for (int it = 0; it < 60; ++it) {
    const double mid = (lo + hi) / 2;
    double sum = 0;
    for (double z : logits) sum += Sigmoid(z + mid);
    (sum / logits.size() > kPositiveShare ? hi : lo) = mid;
  }
  return (lo + hi) / 2;
}

// Buffered output of text lines to a FILE (or nowhere when path is empty).
class LineWriter {
 public:
  // Creates the file's folder when it is missing (as `mkdir -p`).
  explicit LineWriter(const std::string& path) {
    if (!path.empty()) {
      const std::filesystem::path parent =
          std::filesystem::path(path).parent_path();
      std::error_code ignored;  // fopen says what is wrong
      if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
      file_ = std::fopen(path.c_str(), "wb");
    }
    failed_ = !path.empty() && file_ == nullptr;
    buffer_.reserve(kFlushAt + 4096);
  }
  ~LineWriter() { Close(); }
  bool failed() const { return failed_; }
  uint64_t bytes() const { return bytes_; }
  std::string* buffer() { return &buffer_; }
  void LineDone(size_t start) {
    bytes_ += buffer_.size() - start;
    if (buffer_.size() >= kFlushAt) Flush();
  }
  // Returns false when a write or the close failed.
  bool Close() {
    Flush();
    if (file_ != nullptr && std::fclose(file_) != 0) failed_ = true;
    file_ = nullptr;
    return !failed_;
  }

 private:
  static constexpr size_t kFlushAt = 1 << 20;
  void Flush() {
    if (file_ != nullptr && !buffer_.empty() &&
        std::fwrite(buffer_.data(), 1, buffer_.size(), file_) !=
            buffer_.size()) {
      failed_ = true;
    }
    buffer_.clear();
  }
  std::FILE* file_ = nullptr;
  std::string buffer_;
  uint64_t bytes_ = 0;
  bool failed_ = false;
};

void AppendInt(int64_t v, std::string* out) {
  char digits[24];
  char* end = digits + sizeof(digits);
  char* p = end;
  const bool negative = v < 0;
  uint64_t u = negative ? 0 - static_cast<uint64_t>(v) : v;
  do {
    *--p = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (negative) *--p = '-';
  out->append(p, end - p);
}

void AppendHex8(uint32_t x, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  char s[8];
  for (int k = 7; k >= 0; --k, x >>= 4) s[k] = kHex[x & 15];
  out->append(s, 8);
}

void AppendRow(const Model& m, int label, const Row& row, std::string* out) {
  out->push_back(static_cast<char>('0' + label));
  for (int i = 0; i < kIntFields; ++i) {
    out->push_back('\t');
    if (row.ints[i] != kMissingInt) AppendInt(row.ints[i], out);
  }
  for (int j = 0; j < kCatFields; ++j) {
    out->push_back('\t');
    if (row.cat_present[j]) AppendHex8(m.cat[j].Value(row.cat_rank[j]), out);
  }
  out->push_back('\n');
}

// What writing one file gave.
struct StreamStats {
  int64_t rows = 0;
  int64_t positives = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  bool ok = true;
};

// Writes rows of stream `stream` to `path` until `max_rows` rows (when > 0)
// or `max_bytes` bytes (when > 0) are reached. Appends (logit, label) of each
// row to *scored when it is not null.
StreamStats WriteStream(const Model& m, uint64_t stream,
                        const std::string& path, int64_t max_rows,
                        uint64_t max_bytes,
                        std::vector<std::pair<double, int>>* scored) {
  const auto start = std::chrono::steady_clock::now();
  Rng rng(Hash3(m.seed, stream, 0));
  LineWriter writer(path);
  StreamStats stats;
  Row row;
  while (!writer.failed() && (max_rows <= 0 || stats.rows < max_rows) &&
         (max_bytes == 0 || writer.bytes() < max_bytes)) {
    const double logit = m.bias + DrawRow(m, rng, &row);
    const int label = rng.Uniform() < Sigmoid(logit) ? 1 : 0;
    const size_t line_start = writer.buffer()->size();
    AppendRow(m, label, row, writer.buffer());
    writer.LineDone(line_start);
    ++stats.rows;
    stats.positives += label;
    if (scored != nullptr) scored->emplace_back(logit, label);
  }
  stats.ok = writer.Close();
  stats.bytes = writer.bytes();
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return stats;
}

// The AUC of the scores against the labels: the share of (positive,
// negative) pairs the score orders right, a tie counting half.
double Auc(std::vector<std::pair<double, int>> scored) {
  std::sort(scored.begin(), scored.end());
  double positives = 0, rank_sum = 0;
  size_t i = 0;
  while (i < scored.size()) {
    size_t j = i;
    while (j < scored.size() && scored[j].first == scored[i].first) ++j;
    const double mid_rank = (i + 1 + j) / 2.0;  // ranks i+1..j, 1-based
    for (size_t k = i; k < j; ++k) {
      if (scored[k].second == 1) {
        positives += 1;
        rank_sum += mid_rank;
      }
    }
    i = j;
  }
  const double negatives = scored.size() - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

// "4G" -> 4 * 2^30; "123" -> 123; false on anything else.
bool ParseSize(std::string text, uint64_t* size) {
  uint64_t scale = 1;
  if (!text.empty()) {
    const char* const units = "KMGT";
    const char* u = std::strchr(units, std::toupper(text.back()));
    if (u != nullptr && *u != '\0') {
      scale = uint64_t{1} << (10 * (u - units + 1));
      text.pop_back();
    }
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n == 0) return false;
  *size = n * scale;
  return true;
}

void PrintStats(const char* name, const StreamStats& s) {
  absl::PrintF(
      "%s rows %d bytes %d positive_share %.4f seconds %.1f MB/s %.1f\n", name,
      s.rows, s.bytes,
      s.rows > 0 ? static_cast<double>(s.positives) / s.rows : 0.0, s.seconds,
      s.bytes / 1e6 / std::max(s.seconds, 1e-9));
}

// Prints the file's figures; false (with a message) when writing it failed.
bool Report(const char* name, const std::string& path, const StreamStats& s) {
  if (!s.ok) {
    absl::FPrintF(stderr, "gen_criteo: writing %s file %s failed: %s\n", name,
                  path, std::strerror(errno));
    return false;
  }
  PrintStats(name, s);
  return true;
}

int Run() {
  const std::string out = absl::GetFlag(FLAGS_out);
  const int64_t rows = absl::GetFlag(FLAGS_rows);
  uint64_t max_bytes = 0;
  const std::string bytes = absl::GetFlag(FLAGS_bytes);
  if (out.empty() || (rows <= 0 && bytes.empty()) ||
      (!bytes.empty() && !ParseSize(bytes, &max_bytes)) ||
      absl::GetFlag(FLAGS_test_rows) <= 0) {
    absl::FPrintF(stderr,
                  "gen_criteo: need --out, --rows N (> 0) or --bytes SIZE "
                  "(like 400M or 4G), and --test_rows N (> 0); got --rows %d "
                  "--bytes '%s' --test_rows %d\n",
                  rows, bytes, absl::GetFlag(FLAGS_test_rows));
    return 2;
  }
  Model m = MakeModel(absl::GetFlag(FLAGS_seed));
  m.bias = CalibrateBias(m);
  absl::PrintF("seed %d bias %.4f\n", m.seed, m.bias);
  if (!Report("train", out,
              WriteStream(m, kTrain, out, rows, max_bytes, nullptr))) {
    return 1;
  }
  const std::string test_out = absl::GetFlag(FLAGS_test_out);
  std::vector<std::pair<double, int>> scored;
  if (!Report("test", test_out,
              WriteStream(m, kTest, test_out, absl::GetFlag(FLAGS_test_rows), 0,
                          &scored))) {
    return 1;
  }
  absl::PrintF("bayes_auc %.4f\n", Auc(std::move(scored)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  downpour::SetUsage(
      "gen_criteo --out train.txt (--rows N | --bytes 4G) [--test_out "
      "test.txt] [--test_rows 100000] [--seed 1]: a synthetic Criteo-format "
      "click log with labels from a known logistic model");
  downpour::ParseFlags(argc, argv);
  return Run();
}

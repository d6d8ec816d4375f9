// End to end for sparse models (issue 21): a sparse_linear job trains
// through the launcher on 2 ps and 1 worker, `psctl export` writes its
// nonzero rows from the checkpoints, and `predict` on the job's test file
// reports the job's own final AUC (the same model, the same rows, the same
// keys); Debian's python3-numpy running docs/DATA.md's lines reproduces
// predict's probabilities. Once on a LIBSVM file of 64-bit ids, once on a
// CSV file of categorical, bucketized, numeric, text and ignored columns.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "deploy/launcher_lib.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/sparse_model.h"
#include "server/checkpoint.h"
#include "tests/daemon_harness.h"
#include "tests/run_job.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::downpour::testing::IsOk;
using ::testing::HasSubstr;

constexpr char kPython[] = "/usr/bin/python3";

using testing::Figure;
using testing::ReadText;
using testing::RunToEnd;

// `rows` examples of 25 features (values 0.5 or 1) from 2000 ids spread over
// the whole uint64 range; the label is 1 when the values of the "positive"
// ids (a third of them) sum past 7.3, flipped for 3 % of the rows.
void WriteLibsvm(const std::string& path, int rows, uint64_t seed) {
  std::mt19937_64 id_rng(11);  // the same ids in every file
  std::vector<uint64_t> ids(2000);
  for (uint64_t& id : ids) id = id_rng() | (uint64_t{1} << 63);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, 1999);
  std::uniform_real_distribution<double> unit(0, 1);
  std::ofstream out(path);
  for (int r = 0; r < rows; ++r) {
    std::string line;
    double positive = 0;
    for (int f = 0; f < 25; ++f) {
      const int i = pick(rng);
      const double value = f % 4 == 0 ? 0.5 : 1;
      positive += i % 3 == 0 ? value : 0;
      absl::StrAppend(&line, " ", ids[i], ":", value);
    }
    const bool label = (positive > 7.3) != (unit(rng) < 0.03);
    out << (label ? "+1" : "-1") << line << "\n";
  }
}

// A CSV file: id (ignored), city (categorical), income (bucketized), score
// (numeric value), notes (text), label yes/no from a noisy linear score of
// them; a few fields missing.
void WriteCsv(const std::string& path, int rows, uint32_t seed,
              bool with_label) {
  const char* cities[] = {"Oslo", "Lima", "Pune", "Kyiv", "Accra", "Quito"};
  const double city_effect[] = {1.5, -1, 0.5, -0.5, 1, -1.5};
  const char* words[] = {"late", "paid", "Early", "default", "bonus", "the"};
  const double word_effect[] = {-1, 1, 0.8, -1.5, 0.5, 0};
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> six(0, 5);
  std::ofstream out(path);
  out << "id,city,income,score,notes" << (with_label ? ",label" : "") << "\n";
  for (int r = 0; r < rows; ++r) {
    const int city = six(gen);
    const double income = 30 + 10 * normal(gen);
    const double score = normal(gen);
    double s = city_effect[city] + (income > 35 ? 1 : -0.5) + 0.8 * score;
    std::string notes;
    for (int w = 0; w < 3; ++w) {
      const int k = six(gen);
      s += word_effect[k];
      absl::StrAppend(&notes, w ? " " : "", words[k], w == 2 ? "!" : "");
    }
    const bool label = s + 0.8 * normal(gen) > 0;
    out << r << "," << (r % 17 == 0 ? "NA" : cities[city]) << ","
        << (r % 23 == 0 ? "" : absl::StrCat(income)) << "," << score << ",\""
        << notes << "\"" << (with_label ? (label ? ",yes" : ",no") : "")
        << "\n";
  }
}

// docs/DATA.md's lines (the sparse model in NumPy), then every example of
// argv[2] (LIBSVM or CSV as the meta says) against predict's argv[3].
constexpr char kNumpy[] = R"(
import csv, json, re, sys, numpy as np
from bisect import bisect_right
m = np.load(sys.argv[1]); meta = json.loads(str(m["meta"]))
keys, weights, bias = m["keys"], m["weights"], float(m["bias"][0])
def weight(k):  # a key absent from the model weighs 0
    i = np.searchsorted(keys, np.uint64(k))
    return float(weights[i]) if i < len(keys) and keys[i] == np.uint64(k) else 0.0
def predict(entries):  # (key, value) pairs of one example
    z = bias + sum(weight(k) * v for k, v in entries)
    return 1 / (1 + np.exp(-z)) if meta["output"] == "sigmoid" else z
def hash_bytes(b):
    M = 2**64 - 1; h = 0xcbf29ce484222325
    for c in b: h = ((h ^ c) * 0x100000001b3) & M
    h ^= h >> 33; h = (h * 0xff51afd7ed558ccd) & M
    h ^= h >> 33; h = (h * 0xc4ceb9fe1a85ec53) & M
    return h ^ (h >> 33)
feature_key = lambda field, value: hash_bytes(field.encode() + b"\x1f" + value.encode())
def csv_entries(row):  # row: {header name: field} of one CSV line
    out = []
    for c in meta["data"]["columns"]:
        v = row[c["name"]].strip()
        if v.upper() in ("", "NA", "N/A", "NAN", "?") or c["kind"] == "ignore": continue
        if c["kind"] == "categorical": out.append((feature_key(c["name"], v), 1.0))
        elif c["kind"] == "text": out += [(feature_key(c["name"], t.decode()), 1.0) for t in re.findall(rb"[a-z0-9]+", v.encode().lower())]
        elif c.get("boundaries"): out.append((feature_key(c["name"], "b%d" % bisect_right(c["boundaries"], float(v))), 1.0))
        else: out.append((hash_bytes(c["name"].encode()), float(v)))
    return out
if meta["data"]["source"] == "libsvm":
    p = [predict([(int(k), float(v)) for k, v in (f.split(":") for f in line.split()[1:])])
         for line in open(sys.argv[2]) if line.strip()]
else:
    p = [predict(csv_entries(row)) for row in csv.DictReader(open(sys.argv[2]))]
pred = np.loadtxt(sys.argv[3], delimiter=",", skiprows=1, ndmin=1)
print("rows %d maxdiff %.3g" % (len(p), abs(np.array(p) - pred).max()))
)";

bool HaveNumpy() {
  return RunToEnd({kPython, "-c", "import numpy"},
                  testing::TestDir() + "/numpy_check.log") == 0;
}

class SparseExportTest : public ::testing::Test {
 protected:
  // Trains a sparse_linear job of `model_and_data` (YAML: the model, data
  // and optimizer sections) on 2 ps and 1 worker; its final AUC in *auc.
  // One worker: the model it evaluates last is the one each ps checkpoints
  // when the job ends. The AUC is the summary's (the worker's final
  // evaluation, from its final heartbeat, which member_agent asks twice).
  void Train(const std::string& name, const std::string& model_and_data,
             double* auc) {
    dir_ = testing::TestDir() + "/" + name;
    fs::create_directories(dir_);
    fs::remove_all(testing::TestDir() + "/coordinator");  // a fresh job
    const std::string yaml = testing::LoopbackConfig(
        2, 1,
        absl::StrCat(model_and_data,
                     "training:\n  batch_size: 32\n  epochs: 5\n"
                     "  eval_every_steps: 0\n  seed: 5\n"
                     "checkpoint:\n  dir: ",
                     dir_, "/ckpt\n  interval_s: 60\n"));
    config_path_ = testing::WriteConfig(name + ".yaml", yaml);
    absl::StatusOr<LaunchSummary> summary =
        testing::RunJob(config_path_, dir_ + "/run");
    ASSERT_THAT(summary, IsOk());
    ASSERT_EQ(summary->outcome, "succeeded") << summary->failure;
    *auc = testing::FinalMetric(*summary, "auc");
    ASSERT_GT(*auc, 0.75) << "the model did not learn (or no final AUC): "
                          << summary->stop_reason;
  }

  // psctl export from the job's checkpoints; its output in *log.
  void Export(const std::string& npz, std::string* log) {
    const int rc = RunToEnd(
        {testing::BinDir() + "/tools/psctl", "export", "--config", config_path_,
         "--checkpoint_dir", dir_ + "/ckpt", "--out", npz},
        dir_ + "/export.log");
    *log = ReadText(dir_ + "/export.log");
    ASSERT_EQ(rc, 0) << *log;
  }

  // predict of `data` into `out`; its stderr in *log.
  void Predict(const std::string& npz, const std::string& data,
               const std::string& out, std::string* log) {
    const int rc = RunToEnd({testing::BinDir() + "/tools/predict", "--model",
                             npz, "--data", data, "--out", out},
                            out + ".log");
    *log = ReadText(out + ".log");
    ASSERT_EQ(rc, 0) << *log;
  }

  // NumPy's probabilities of `data` against predict's `predictions`.
  void ExpectNumpyAgrees(const std::string& npz, const std::string& data,
                         const std::string& predictions, int rows) {
    if (!HaveNumpy()) {
      std::fprintf(stderr,
                   "skipping the NumPy check: %s has no numpy "
                   "(Debian python3-numpy)\n",
                   kPython);
      return;
    }
    const std::string script = dir_ + "/check.py";
    std::ofstream(script) << kNumpy;
    ASSERT_EQ(RunToEnd({kPython, script, npz, data, predictions},
                       dir_ + "/numpy.log"),
              0)
        << ReadText(dir_ + "/numpy.log");
    const std::string log = ReadText(dir_ + "/numpy.log");
    EXPECT_EQ(Figure(log, "rows"), rows) << log;
    EXPECT_LT(Figure(log, "maxdiff"), 1e-6) << log;
  }

  std::string dir_;
  std::string config_path_;
};

TEST_F(SparseExportTest, LibsvmWith64BitIdsExportsAndPredictsTheJobsAuc) {
  const std::string base = testing::TestDir() + "/svm_data";
  fs::create_directories(base);
  WriteLibsvm(base + "/train.svm", 4000, 1);
  WriteLibsvm(base + "/test.svm", 800, 2);
  double job_auc = NAN;
  ASSERT_NO_FATAL_FAILURE(Train(
      "svm",
      absl::StrCat("model:\n  type: sparse_linear\n  task: binary\n"
                   "  sparse_buckets: 32\n"
                   "optimizer:\n  type: ftrl\n  learning_rate: 0.2\n"
                   "  l1: 0.5\n  l2: 1\n"
                   "data:\n  source: libsvm\n  path: ",
                   base, "/train.svm\n  test_path: ", base, "/test.svm\n"),
      &job_auc));

  // The checkpoints: rows held, and how many l1 left at exactly 0.
  int64_t rows = 0, nonzero = 0;
  for (int shard = 0; shard < 2; ++shard) {
    auto checkpoint = server::ReadNewestCheckpoint(dir_ + "/ckpt", shard);
    ASSERT_THAT(checkpoint, IsOk());
    const auto& table = checkpoint->sparse_tables.at(0).second;
    rows += static_cast<int64_t>(table.keys.size());
    for (size_t r = 0; r < table.keys.size(); ++r)
      nonzero += table.data[3 * r] != 0;
  }
  ASSERT_GT(rows, nonzero) << "l1 keeps some weights at exactly 0";

  const std::string npz = dir_ + "/model.npz";
  std::string log;
  ASSERT_NO_FATAL_FAILURE(Export(npz, &log));
  EXPECT_THAT(log, HasSubstr(absl::StrCat(nonzero, " nonzero weights of ", rows,
                                          " rows")));
  std::fprintf(stderr, "%s", log.c_str());

  const std::string predictions = dir_ + "/predictions.csv";
  ASSERT_NO_FATAL_FAILURE(Predict(npz, base + "/test.svm", predictions, &log));
  EXPECT_THAT(log, HasSubstr("predict: metrics on " + base +
                             "/test.svm (800 examples): auc"));
  EXPECT_NEAR(Figure(log, "auc"), job_auc, 1e-4) << log;
  EXPECT_THAT(ReadText(predictions), ::testing::StartsWith("p_+1\n"));
  ExpectNumpyAgrees(npz, base + "/test.svm", predictions, 800);

  // A live cluster cannot list its rows: export says to use checkpoints,
  // before it looks for a cluster.
  const int rc =
      RunToEnd({testing::BinDir() + "/tools/psctl", "export", "--config",
                config_path_, "--out", dir_ + "/live.npz"},
               dir_ + "/live.log");
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(ReadText(dir_ + "/live.log"),
              HasSubstr("exported from checkpoints only"));
  EXPECT_THAT(ReadText(dir_ + "/live.log"),
              HasSubstr("(checkpoint.dir: " + dir_ + "/ckpt)"));

  // On a schedule (export.interval_s): the first export writes, the next
  // finds no update in the (finished) job's checkpoints and writes nothing.
  ASSERT_EQ(RunToEnd({testing::BinDir() + "/tools/psctl", "export", "--config",
                      config_path_, "--checkpoint_dir", dir_ + "/ckpt", "--out",
                      dir_ + "/scheduled.npz", "--set",
                      "export.interval_s=0.05", "--count", "2"},
                     dir_ + "/scheduled.log"),
            0)
      << ReadText(dir_ + "/scheduled.log");
  const std::string scheduled = ReadText(dir_ + "/scheduled.log");
  EXPECT_THAT(scheduled,
              HasSubstr("every 0.05 s (export.interval_s), 2 times"));
  EXPECT_THAT(scheduled, HasSubstr("wrote " + dir_ + "/scheduled.npz"));
  EXPECT_THAT(scheduled, HasSubstr("no update since the last export"));
  EXPECT_EQ(ReadText(dir_ + "/scheduled.npz"), ReadText(npz));

  // A schedule started beside the job, before its first checkpoint, waits
  // for it (the README starts both at once) instead of failing; once the
  // checkpoints appear it writes the same model.
  const std::string later = dir_ + "/later_ckpt";
  absl::StatusOr<std::unique_ptr<Subprocess>> waiting = Subprocess::Start(
      "psctl export",
      {testing::BinDir() + "/tools/psctl", "export", "--config", config_path_,
       "--checkpoint_dir", later, "--out", dir_ + "/later.npz", "--set",
       "export.interval_s=0.05", "--count", "1"},
      dir_ + "/later.log");
  ASSERT_THAT(waiting, IsOk());
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return ReadText(dir_ + "/later.log")
                   .find("waiting for the job's first checkpoint in " +
                         later) != std::string::npos;
      },
      absl::Seconds(30)))
      << ReadText(dir_ + "/later.log");
  EXPECT_FALSE((*waiting)->Poll().has_value()) << "it waits, not fails";
  fs::copy(dir_ + "/ckpt", later, fs::copy_options::recursive);
  const std::optional<int> rc_later = (*waiting)->Wait(absl::Seconds(60));
  ASSERT_TRUE(rc_later.has_value()) << ReadText(dir_ + "/later.log");
  EXPECT_EQ(*rc_later, 0) << ReadText(dir_ + "/later.log");
  // The same model (its meta's origin names the other folder).
  absl::StatusOr<model::SparseModel> first = model::ReadSparseModel(npz);
  absl::StatusOr<model::SparseModel> second =
      model::ReadSparseModel(dir_ + "/later.npz");
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->keys, first->keys);
  EXPECT_EQ(second->weights, first->weights);
  EXPECT_EQ(second->bias, first->bias);
}

TEST_F(SparseExportTest, CsvColumnsAreHashedAndBucketedAsInTraining) {
  const std::string base = testing::TestDir() + "/csv_data";
  fs::create_directories(base);
  WriteCsv(base + "/train.csv", 3000, 1, true);
  WriteCsv(base + "/test.csv", 600, 2, true);
  WriteCsv(base + "/unlabelled.csv", 600, 2, false);
  double job_auc = NAN;
  ASSERT_NO_FATAL_FAILURE(
      Train("csv",
            absl::StrCat("model:\n  type: sparse_linear\n  task: binary\n"
                         "  sparse_buckets: 16\n"
                         "optimizer:\n  type: ftrl\n  learning_rate: 0.1\n"
                         "  l1: 0.1\n  l2: 1\n"
                         "data:\n  source: csv\n  path: ",
                         base, "/train.csv\n  test_path: ", base,
                         "/test.csv\n"
                         "  label_column: label\n  classes: [no, yes]\n"
                         "  categorical: [city]\n  bucketize: [income]\n"
                         "  quantile_buckets: 5\n  numeric: [score]\n"
                         "  text: [notes]\n  ignore: [id]\n"),
            &job_auc));
  const std::string npz = dir_ + "/model.npz";
  std::string log;
  ASSERT_NO_FATAL_FAILURE(Export(npz, &log));
  std::fprintf(stderr, "%s", log.c_str());

  const std::string predictions = dir_ + "/predictions.csv";
  ASSERT_NO_FATAL_FAILURE(Predict(npz, base + "/test.csv", predictions, &log));
  EXPECT_NEAR(Figure(log, "auc"), job_auc, 1e-4) << log;
  EXPECT_THAT(ReadText(predictions), ::testing::StartsWith("p_yes\n"));
  ExpectNumpyAgrees(npz, base + "/test.csv", predictions, 600);

  // Without the label column: the same predictions, no metrics.
  const std::string unlabelled = dir_ + "/unlabelled.csv.out";
  ASSERT_NO_FATAL_FAILURE(
      Predict(npz, base + "/unlabelled.csv", unlabelled, &log));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("auc")));
  EXPECT_EQ(ReadText(unlabelled), ReadText(predictions));
}

}  // namespace
}  // namespace downpour

// End to end: a cluster trains on CSV files, `psctl export` writes the model
// from its checkpoints, and both `predict` and NumPy (Debian's python3-numpy,
// reading the .npz as docs/DATA.md shows) reproduce the cluster's final
// evaluation of the test file.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "deploy/launcher_lib.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/run_job.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::downpour::testing::IsOk;

constexpr char kPython[] = "/usr/bin/python3";

// Three named classes by which of three linear scores of 4 features is
// largest, with noise: learnable, not perfectly.
void WriteCsv(const std::string& path, int rows, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  std::ofstream out(path);
  out << "f0,f1,f2,f3,label\n";
  const char* names[] = {"red", "green", "blue"};
  for (int i = 0; i < rows; ++i) {
    double f[4];
    for (double& v : f) v = normal(gen);
    const double s[3] = {f[0] + 0.5 * f[1], f[2] - 0.3 * f[0], f[3] + f[1]};
    int best = 0;
    for (int c = 1; c < 3; ++c) {
      if (s[c] + 0.4 * normal(gen) > s[best]) best = c;
    }
    out << f[0] * 10 << "," << f[1] + 5 << "," << f[2] << "," << f[3] * 0.1
        << "," << names[best] << "\n";
  }
}

using testing::Figure;
using testing::ReadText;
using testing::RunToEnd;

constexpr char kNumpy[] = R"(
import csv, json, sys
import numpy as np
m = np.load(sys.argv[1])
meta = json.loads(str(m["meta"]))
rows = list(csv.reader(open(sys.argv[2])))
header, rows = rows[0], rows[1:]
li = header.index("label")
x = np.array([[float(v) for j, v in enumerate(r) if j != li] for r in rows])
y = np.array([meta["class_names"].index(r[li]) for r in rows])
a = (x - m["input_mean"]) / m["input_std"]
n = len(meta["layers"]) - 1
for l in range(1, n + 1):
    a = a @ m["fc%d.weight" % l].astype(np.float64) + m["fc%d.bias" % l]
    if l < n:
        a = np.maximum(a, 0)
a = a - a.max(1, keepdims=True)
p = np.exp(a)
p /= p.sum(1, keepdims=True)
accuracy = float((p.argmax(1) == y).mean())
logloss = float(-np.log(p[np.arange(len(y)), y]).mean())
pred = np.loadtxt(sys.argv[3], delimiter=",", skiprows=1, ndmin=2)
print("accuracy %.6f logloss %.6f maxdiff %.3g" % (accuracy, logloss, abs(pred - p).max()))
)";

TEST(ExportTest, PredictAndNumpyReproduceTheClustersEvaluation) {
  if (RunToEnd({kPython, "-c", "import numpy"},
               testing::TestDir() + "/numpy_check.log") != 0) {
    GTEST_SKIP() << kPython << " with numpy is missing (Debian python3-numpy; "
                 << "deploy/install_deps.sh installs it)";
  }
  const std::string dir = testing::TestDir();
  WriteCsv(dir + "/train.csv", 600, 1);
  WriteCsv(dir + "/test.csv", 150, 2);
  // One worker: the parameters it evaluates last are the ones the ps
  // checkpoints when the job ends.
  const std::string yaml = testing::LoopbackConfig(
      1, 1,
      absl::StrCat("model:\n  task: multiclass\n  type: mlp\n"
                   "  layers: [4, 8, 3]\n"
                   "optimizer:\n  type: adam\n  learning_rate: 0.02\n"
                   "training:\n  batch_size: 32\n  epochs: 15\n"
                   "  eval_every_steps: 0\n"
                   "data:\n  source: csv\n  path: ",
                   dir, "/train.csv\n  test_path: ", dir, "/test.csv\n"));
  const std::string config_path = testing::WriteConfig("cluster.yaml", yaml);
  absl::StatusOr<LaunchSummary> summary =
      testing::RunJob(config_path, dir + "/run");
  ASSERT_THAT(summary, IsOk());
  ASSERT_EQ(summary->outcome, "succeeded") << summary->failure;
  const double cluster_accuracy = testing::FinalMetric(*summary, "accuracy");
  const double cluster_logloss = testing::FinalMetric(*summary, "logloss");
  ASSERT_GT(cluster_accuracy, 0.6) << "the model did not learn";

  const std::string npz = dir + "/model.npz";
  const std::string bin = testing::BinDir();
  ASSERT_EQ(
      RunToEnd({bin + "/tools/psctl", "export", "--config", config_path,
                "--checkpoint_dir", dir + "/run/checkpoints", "--out", npz},
               dir + "/export.log"),
      0)
      << ReadText(dir + "/export.log");
  const std::string predictions = dir + "/predictions.csv";
  ASSERT_EQ(RunToEnd({bin + "/tools/predict", "--model", npz, "--data",
                      dir + "/test.csv", "--out", predictions},
                     dir + "/predict.log"),
            0)
      << ReadText(dir + "/predict.log");
  const std::string predict_log = ReadText(dir + "/predict.log");
  const std::string script = dir + "/check.py";
  std::ofstream(script) << kNumpy;
  ASSERT_EQ(RunToEnd({kPython, script, npz, dir + "/test.csv", predictions},
                     dir + "/numpy.log"),
            0)
      << ReadText(dir + "/numpy.log");
  const std::string numpy_log = ReadText(dir + "/numpy.log");

  // The same figures to the printed precision (4 decimals), three ways.
  EXPECT_NEAR(Figure(predict_log, "accuracy"), cluster_accuracy, 5e-5)
      << predict_log;
  EXPECT_NEAR(Figure(predict_log, "logloss"), cluster_logloss, 5e-5)
      << predict_log;
  EXPECT_NEAR(Figure(numpy_log, "accuracy"), cluster_accuracy, 5e-5)
      << numpy_log;
  EXPECT_NEAR(Figure(numpy_log, "logloss"), cluster_logloss, 5e-5) << numpy_log;
  // predict's probabilities are NumPy's.
  EXPECT_LT(Figure(numpy_log, "maxdiff"), 1e-5) << numpy_log;
}

}  // namespace
}  // namespace downpour

// tools/predict as a user runs it, on models written here (no cluster): the
// width check before the labels, an empty file, --output probability, margin
// and class with full precision, metrics named after their file, and
// waiting for a --model file and a serving daemon that come later.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/export.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::ReadText;
using ::downpour::testing::RunToEnd;
using ::testing::HasSubstr;
using ::testing::Not;

// A binary linear model over `features` CSV columns (no header, the label
// last, classes "no" and "yes"): margin = sum of weights[i] * x[i] + bias,
// inputs unstandardized (mean 0, std 1).
model::ExportedModel LinearModel(int features, std::vector<float> weights,
                                 float bias) {
  Config config;
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kLinear;
  config.model.layers = {features, 1};
  config.data.source = DataSource::kCsv;
  config.data.header = false;
  std::vector<std::string> names;
  for (int i = 0; i < features; ++i) names.push_back(absl::StrCat("x", i));
  model::ExportedModel m;
  m.meta = model::MakeMeta(config, {"no", "yes"}, names,
                           std::vector<float>(features, 0),
                           std::vector<float>(features, 1));
  weights.resize(features, 0);
  m.params = weights;  // fc1.weight [features, 1], then fc1.bias
  m.params.push_back(bias);
  return m;
}

class PredictTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TestDir(); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // Runs predict with `args`; its exit status, its stderr and stdout in
  // *log.
  int Predict(const std::vector<std::string>& args, std::string* log) {
    std::vector<std::string> argv = {testing::BinDir() + "/tools/predict"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string path =
        dir_ + "/predict" + std::to_string(runs_++) + ".log";
    const int rc = RunToEnd(argv, path);
    *log = ReadText(path);
    return rc;
  }

  std::string dir_;
  int runs_ = 0;
};

// A 30-feature model on a file of 64 columns: the width, named with the
// file and line, not a label error about column 63's number.
TEST_F(PredictTest, ReportsTheWidthBeforeTheLabels) {
  const std::string model = dir_ + "/model.npz";
  ASSERT_THAT(model::WriteModel(model, LinearModel(30, {1}, 0)), IsOk());
  std::string row;
  for (int c = 0; c < 64; ++c) absl::StrAppend(&row, c ? "," : "", 0.25 * c);
  const std::string data = Write("wide.csv", row + "\n" + row + "\n");
  std::string log;
  EXPECT_EQ(Predict({"--model", model, "--data", data}, &log), 2) << log;
  EXPECT_THAT(log, HasSubstr(data + ":1: has 64 columns; the model was "
                                    "trained on 30 features (+1 label)"));
  EXPECT_THAT(log, Not(HasSubstr("label '")));  // no label error
  EXPECT_THAT(log, Not(HasSubstr("class")));
}

// An empty file (or blanks only) is reported at line 1, saying what was
// expected.
TEST_F(PredictTest, ReportsAnEmptyFileAtLine1) {
  const std::string model = dir_ + "/model.npz";
  ASSERT_THAT(model::WriteModel(model, LinearModel(2, {1}, 0)), IsOk());
  for (const std::string text : {"", "\n  \n"}) {
    const std::string data = Write("empty.csv", text);
    std::string log;
    EXPECT_EQ(Predict({"--model", model, "--data", data}, &log), 2) << log;
    EXPECT_THAT(log, HasSubstr(data + ":1: the file is empty; expected CSV "
                                      "rows of 3 columns (2 features and "
                                      "the label"))
        << log;
  }
}

// The three --output kinds from one run each: margins as the model computes
// them, probabilities with full precision (1 / (1 + e^-25) is not written
// as 1), classes by the threshold; metrics named after the file, and equal
// to those recomputed from the written probabilities.
TEST_F(PredictTest, WritesMarginsProbabilitiesAndClassesInFull) {
  const std::string model = dir_ + "/model.npz";
  ASSERT_THAT(model::WriteModel(model, LinearModel(2, {1, 0}, 0)), IsOk());
  const std::vector<double> margins = {25, -3, 0.5, -0.25};
  const std::vector<int> labels = {1, 1, 0, 0};
  std::string text;
  for (size_t i = 0; i < margins.size(); ++i) {
    absl::StrAppend(&text, margins[i], ",7,", labels[i] ? "yes" : "no", "\n");
  }
  const std::string data = Write("x.csv", text);

  auto column = [&](const std::string& output, std::string* log) {
    const std::string out = dir_ + "/" + output + ".csv";
    EXPECT_EQ(Predict({"--model", model, "--data", data, "--output", output,
                       "--out", out},
                      log),
              0)
        << *log;
    std::vector<std::string> lines =
        absl::StrSplit(ReadText(out), '\n', absl::SkipEmpty());
    return lines;
  };
  std::string log;
  const std::vector<std::string> m = column("margin", &log);
  ASSERT_EQ(m.size(), 5u) << log;
  EXPECT_EQ(m[0], "margin");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(std::stod(m[i + 1]), margins[i]);

  const std::vector<std::string> p = column("probability", &log);
  ASSERT_EQ(p.size(), 5u) << log;
  EXPECT_EQ(p[0], "p_yes");
  double logloss = 0;
  for (int i = 0; i < 4; ++i) {
    const double want = 1 / (1 + std::exp(-margins[i]));
    double got = 0;
    ASSERT_TRUE(absl::SimpleAtod(p[i + 1], &got)) << p[i + 1];
    EXPECT_EQ(got, want) << p[i + 1];
    logloss -= std::log(labels[i] ? got : 1 - got);
  }
  EXPECT_NE(p[1], "1");
  EXPECT_LT(std::stod(p[1]), 1);
  EXPECT_THAT(log, HasSubstr("predict: metrics on " + data +
                             " (4 examples): auc 0.5000"));
  EXPECT_THAT(log, Not(HasSubstr("test")));
  EXPECT_NEAR(testing::Figure(log, "logloss"), logloss / 4, 5e-5) << log;
  EXPECT_NEAR(testing::Figure(log, "accuracy"), 0.5, 5e-5) << log;

  const std::vector<std::string> c = column("class", &log);
  EXPECT_EQ(absl::StrJoin(c, " "), "class yes no yes no");

  EXPECT_EQ(
      Predict({"--model", model, "--data", data, "--output", "odds"}, &log), 2);
  EXPECT_THAT(log, HasSubstr("--output must be probability, margin or class"));
}

// A --model that appears after predict started (psctl export writes it
// after the job's first checkpoint) is waited for, saying so; with
// --wait_s=0 its absence is an error at once naming the file and the fix.
TEST_F(PredictTest, WaitsForAModelFileThatAppearsLater) {
  const std::string model = dir_ + "/later.npz";
  const std::string data = Write("x.csv", "1,2,yes\n-1,0,no\n");
  std::string log;
  EXPECT_EQ(Predict({"--model", model, "--data", data, "--wait_s", "0"}, &log),
            2);
  EXPECT_THAT(log, HasSubstr("cannot open '" + model + "'"));
  EXPECT_THAT(log, HasSubstr("psctl export --out " + model));
  EXPECT_THAT(log, HasSubstr("--wait_s"));

  const std::string path = dir_ + "/waiting.log";
  absl::StatusOr<std::unique_ptr<Subprocess>> predict =
      Subprocess::Start("predict",
                        {testing::BinDir() + "/tools/predict", "--model", model,
                         "--data", data, "--out", dir_ + "/p.csv"},
                        path);
  ASSERT_THAT(predict, IsOk());
  absl::SleepFor(absl::Seconds(1));
  ASSERT_THAT(model::WriteModel(model, LinearModel(2, {1, 0}, 0)), IsOk());
  EXPECT_EQ((*predict)->Wait(absl::Seconds(60)), 0) << ReadText(path);
  EXPECT_THAT(ReadText(path),
              HasSubstr("predict: waiting for " + model +
                        " (psctl export writes it after the job's first "
                        "checkpoint); --wait_s=60"));
  EXPECT_THAT(ReadText(path), HasSubstr("predict: metrics on " + data));
  EXPECT_EQ(ReadText(dir_ + "/p.csv").substr(0, 6), "p_yes\n");
}

// predict --server against a daemon that is up but serves no model yet:
// --wait_s=0 fails at once saying so; otherwise predict waits until the
// daemon loads the file written after it started.
TEST_F(PredictTest, WaitsForTheDaemonToServeAModel) {
  const std::string model = dir_ + "/model.npz";
  const std::string served = dir_ + "/served.npz";
  ASSERT_THAT(model::WriteModel(model, LinearModel(2, {1, 0}, 0)), IsOk());
  const std::string data = Write("x.csv", "1,2,yes\n-1,0,no\n");
  const std::string config =
      testing::WriteConfig("serve.yaml", "logging:\n  level: info\n");
  absl::StatusOr<std::unique_ptr<Subprocess>> serve = testing::StartDaemon(
      "serve", "serve/serve",
      {"--config", config, "--model", served, "--listen", "127.0.0.1:0",
       "--port_file", dir_ + "/serve.port", "--reload_interval_s", "0.1"});
  ASSERT_THAT(serve, IsOk());
  absl::StatusOr<std::string> address =
      testing::WaitForPort(**serve, dir_ + "/serve.port");
  ASSERT_THAT(address, IsOk());

  std::string log;
  EXPECT_EQ(Predict({"--model", model, "--data", data, "--server", *address,
                     "--wait_s", "0"},
                    &log),
            1);
  EXPECT_THAT(log, HasSubstr("no model served (--wait_s=0); it serves no "
                             "model yet: it waits for " +
                             served));

  const std::string path = dir_ + "/waiting.log";
  absl::StatusOr<std::unique_ptr<Subprocess>> predict = Subprocess::Start(
      "predict",
      {testing::BinDir() + "/tools/predict", "--model", model, "--data", data,
       "--server", *address, "--out", dir_ + "/p.csv"},
      path);
  ASSERT_THAT(predict, IsOk());
  absl::SleepFor(absl::Seconds(1.5));
  ASSERT_THAT(model::WriteModel(served, LinearModel(2, {1, 0}, 0)), IsOk());
  EXPECT_EQ((*predict)->Wait(absl::Seconds(60)), 0) << ReadText(path);
  EXPECT_THAT(ReadText(path),
              HasSubstr("predict: waiting for the daemon at " + *address +
                        " to serve a model (it serves no model yet"));
  EXPECT_THAT(ReadText(path), HasSubstr("predict: metrics on " + data));
}

}  // namespace
}  // namespace downpour

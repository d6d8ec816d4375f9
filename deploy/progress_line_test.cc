#include "deploy/progress_line.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Everything written to a temporary FILE, read back.
std::string Written(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[256];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
    text.append(buffer, n);
  return text;
}

TEST(FormatProgressTest, FiguresAndEta) {
  ProgressFigures f;
  f.elapsed_s = 12.3;
  f.steps = 1000;
  f.planned_steps = 4000;
  f.steps_per_sec = 100;
  f.examples_per_sec = 6400;
  f.mean_loss = 0.25;
  f.best_accuracy = 0.9;
  f.running = 2;
  f.workers = 2;
  EXPECT_EQ(
      FormatProgress(f),
      "[  12.3 s] step 1000/4000 25% | 6400 ex/s | loss 0.2500 | acc 0.9000 | "
      "2/2 workers | ETA 30 s");
  f.staleness_p99 = 3;
  EXPECT_THAT(FormatProgress(f),
              HasSubstr("| acc 0.9000 | stale p99 3 | 2/2 workers"));
  f.planned_steps = 1000000;
  EXPECT_THAT(FormatProgress(f), HasSubstr("ETA 2.8 h"));
}

TEST(FormatProgressTest, StreamingWorkersShowDataReadAndItsEta) {
  ProgressFigures f;
  f.elapsed_s = 60;
  f.steps = 1000;
  f.planned_steps = 4000;
  f.steps_per_sec = 100;
  f.running = 2;
  f.workers = 2;
  f.data_bytes_read = 1'200'000'000;
  f.data_bytes_total = 4'000'000'000;
  f.data_bytes_per_sec = 20'000'000;  // 2.8 GB left: 140 s
  EXPECT_THAT(
      FormatProgress(f),
      HasSubstr("| 2/2 workers | data 1.2 of 4.0 GB (30 %), ETA 2 min"));
  EXPECT_THAT(FormatProgress(f), Not(HasSubstr("| ETA")));  // one ETA
  f.data_bytes_per_sec = 0;                                 // no rate yet
  EXPECT_THAT(FormatProgress(f),
              testing::EndsWith("data 1.2 of 4.0 GB (30 %)"));
  f.data_bytes_read = 5'000'000;
  f.data_bytes_total = 20'000'000;
  EXPECT_THAT(FormatProgress(f), HasSubstr("data 5.0 of 20.0 MB (25 %)"));
  f.data_bytes_total = 0;  // in-memory data: the steps' ETA
  EXPECT_THAT(FormatProgress(f), Not(HasSubstr("data")));
  EXPECT_THAT(FormatProgress(f), HasSubstr("| ETA 30 s"));
}

TEST(FormatProgressTest, NoRateOrLossOnceEveryWorkerHasStopped) {
  ProgressFigures f;
  f.elapsed_s = 13;
  f.steps = 3780;
  f.planned_steps = 3780;
  f.best_accuracy = 0.963;
  f.workers = 2;
  EXPECT_EQ(FormatProgress(f),
            "[  13.0 s] step 3780/3780 100% | acc 0.9630 | 0/2 workers");
}

TEST(FormatProgressTest, WorkersThatJoinedOrWereDrainedAreCounted) {
  ProgressFigures f;
  f.elapsed_s = 13;
  f.steps = 100;
  f.running = 2;
  f.workers = 3;
  EXPECT_THAT(FormatProgress(f), Not(HasSubstr("joined")));
  f.joined = 1;
  f.drained = 1;
  EXPECT_THAT(FormatProgress(f),
              HasSubstr("| 2/3 workers (1 joined, 1 drained)"));
}

TEST(FormatProgressTest, UnknownsAreDashesAndNoEta) {
  ProgressFigures f;
  f.workers = 3;
  const std::string line = FormatProgress(f);
  EXPECT_THAT(line, HasSubstr("loss - | acc - | 0/3 workers"));
  EXPECT_THAT(line, Not(HasSubstr("ETA")));
  EXPECT_THAT(line, Not(HasSubstr("stale")));
  EXPECT_THAT(line, Not(HasSubstr("%")));
}

TEST(PlannedStepsTest, EpochsOverEachPartition) {
  Config config;
  config.cluster.workers = {"a", "b"};
  config.data.train_examples = 3000;
  config.training.batch_size = 32;
  config.training.epochs = 16;
  EXPECT_EQ(PlannedSteps(config), 2 * 16 * ((1500 + 31) / 32));
  config.data.train_examples = 3;  // parts of 2 and 1 examples
  config.training.epochs = 1;
  EXPECT_EQ(PlannedSteps(config), 2);
  config.training.steps = 50;
  EXPECT_EQ(PlannedSteps(config), 100);
  // max_workers 3: parts of 1000; worker 0 starts with parts 0 and 2.
  config.training.steps = 0;
  config.training.epochs = 16;
  config.data.train_examples = 3000;
  config.cluster.max_workers = 3;
  EXPECT_EQ(PlannedSteps(config),
            16 * ((2000 + 31) / 32) + 16 * ((1000 + 31) / 32));
  config.cluster.max_workers = 0;
  // Streamed data: rows are not known ahead (the line shows bytes instead).
  config.training.steps = 0;
  config.data.source = DataSource::kCriteo;
  EXPECT_EQ(PlannedSteps(config), 0);
}

TEST(ProgressLineTest, PlainLinesWhenNotATerminal) {
  std::FILE* file = std::tmpfile();
  {
    ProgressLine line(file, /*tty=*/false);
    line.Update("one");
    line.Event("worker 1 finished");
    line.Update("two");
  }
  EXPECT_EQ(Written(file), "one\nworker 1 finished\ntwo\n");
  std::fclose(file);
}

TEST(ProgressLineTest, OneRefreshingLineOnATerminal) {
  std::FILE* file = std::tmpfile();
  {
    ProgressLine line(file, /*tty=*/true);
    line.Update("one");
    line.Update("two");
    line.Event("worker 1 finished");
    line.Finish();
    line.Finish();  // idempotent
  }
  EXPECT_EQ(Written(file),
            "\rone\x1b[K\rtwo\x1b[K\r\x1b[Kworker 1 finished\ntwo\x1b[K\n");
  std::fclose(file);
}

TEST(ProgressLineTest, NullOutputWritesNothing) {
  // Nowhere to write must not mean the process's own stdout or stderr.
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  for (bool tty : {true, false}) {
    ProgressLine line(nullptr, tty);
    line.Update("x");
    line.Event("y");
    line.Finish();
  }
  std::fflush(stdout);
  std::fflush(stderr);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace downpour

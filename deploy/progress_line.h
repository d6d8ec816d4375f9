// The launcher's live progress: one line that refreshes in place on a terminal
// (carriage return, clear to the end of the line) and plain lines otherwise, so
// a log file or CI output gets one line per period. Events (a worker finished,
// the accuracy mark was reached) print as their own lines above it.
//
//   ProgressLine line(stdout, isatty(fileno(stdout)));
//   line.Update(FormatProgress(figures));
//   line.Event("worker 1 finished: test accuracy 0.9512");
//   line.Finish();
#ifndef DOWNPOUR_DEPLOY_PROGRESS_LINE_H_
#define DOWNPOUR_DEPLOY_PROGRESS_LINE_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/config.h"

namespace downpour {

// What the progress line shows.
struct ProgressFigures {
  double elapsed_s = 0;
  int64_t steps = 0;          // over all workers
  int64_t planned_steps = 0;  // over all workers; 0 = unknown
  double steps_per_sec = 0;   // measured over the last period; 0 = unknown
  double examples_per_sec = 0;
  double mean_loss = NAN;      // of the running workers
  double best_accuracy = NAN;  // the best of metric's values
  // The task's main test metric, as the line names it: "acc", "auc", "rmse".
  std::string metric = "acc";
  // The largest of the workers' staleness p99 (since start); NaN = unknown.
  double staleness_p99 = NAN;
  int running = 0;
  int workers = 0;
  // Workers that joined the running job (ps_worker --join) and that were
  // drained (psctl drain-worker) so far; shown when not 0.
  int joined = 0;
  int drained = 0;
  // Workers that stream their data, summed over them: bytes of their parts
  // read so far and to read over all epochs (0/0: none streams), and the
  // rate since the launcher's first figure (0 = unknown).
  int64_t data_bytes_read = 0;
  int64_t data_bytes_total = 0;
  double data_bytes_per_sec = 0;
};

// "[  12.3 s] step 14534/37800 38% | 108233 ex/s | loss 0.0067 | acc 0.9240 |
// stale p99 3 | 2/2 workers | ETA 21 s", with "(1 joined, 1 drained)" after
// the workers once any did. The staleness part is left out while
// unknown. ETA is what the planned steps still take at the
// measured rate (the job may stop earlier at training.target_accuracy); it is
// left out while unknown. When workers stream their data, "| data 1.2 of 4.0
// GB (30 %), ETA 3 min" follows the workers instead: the ETA is what the bytes
// left take at the rate since the start.
std::string FormatProgress(const ProgressFigures& figures);

// Steps the config plans over all workers: training.steps each, or
// training.epochs passes over each worker's partition (example i belongs to
// worker i mod W) in batches of training.batch_size.
int64_t PlannedSteps(const Config& config);

// Not thread-safe. Writes nothing when `out` is null.
class ProgressLine {
 public:
  ProgressLine(std::FILE* out, bool tty);
  ~ProgressLine() { Finish(); }

  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Terminal: redraws the line (cut to the terminal's width). Otherwise: prints
  // `text` as a line.
  void Update(const std::string& text);
  // Prints `text` as a line of its own; on a terminal the progress line is
  // redrawn below it.
  void Event(const std::string& text);
  // Ends the progress line (a newline on a terminal) so later output starts on
  // a fresh line. Idempotent.
  void Finish();

 private:
  std::string Fit(const std::string& text) const;

  std::FILE* const out_;
  const bool tty_;
  std::string shown_;  // the line on screen (terminal only), "" if none
};

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_PROGRESS_LINE_H_

// Progress line rendering. The terminal path uses only "\r" and "\x1b[K" (erase
// to end of line), which every terminal emulator in use understands.
#include "deploy/progress_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace downpour {
namespace {

std::string Duration(double seconds) {
  if (seconds < 90) return absl::StrFormat("%.0f s", seconds);
  if (seconds < 5400) return absl::StrFormat("%.0f min", seconds / 60);
  return absl::StrFormat("%.1f h", seconds / 3600);
}

// " | data 1.2 of 4.0 GB (30 %), ETA 3 min": both in the total's unit.
std::string DataPart(const ProgressFigures& f) {
  const double total = static_cast<double>(f.data_bytes_total);
  const auto [unit, scale] = total >= 1e9   ? std::make_pair("GB", 1e9)
                             : total >= 1e6 ? std::make_pair("MB", 1e6)
                             : total >= 1e3 ? std::make_pair("kB", 1e3)
                                            : std::make_pair("B", 1.0);
  std::string out =
      absl::StrFormat(" | data %.1f of %.1f %s (%d %%)",
                      f.data_bytes_read / scale, total / scale, unit,
                      static_cast<int>(std::min<int64_t>(
                          100, 100 * f.data_bytes_read / f.data_bytes_total)));
  if (f.data_bytes_per_sec > 0 && f.running > 0) {
    const double left = std::max<double>(0, total - f.data_bytes_read);
    absl::StrAppend(&out, ", ETA ", Duration(left / f.data_bytes_per_sec));
  }
  return out;
}

}  // namespace

std::string FormatProgress(const ProgressFigures& f) {
  std::string out = absl::StrFormat("[%6.1f s] step %d", f.elapsed_s, f.steps);
  if (f.planned_steps > 0) {
    absl::StrAppendFormat(&out, "/%d %d%%", f.planned_steps,
                          static_cast<int>(std::min<int64_t>(
                              100, 100 * f.steps / f.planned_steps)));
  }
  // Rate and loss are those of the running workers: once every worker has
  // stopped after training, a "0 ex/s | loss -" would read like a fault.
  if (f.running > 0 || f.steps == 0) {
    absl::StrAppendFormat(&out, " | %.0f ex/s | loss %s", f.examples_per_sec,
                          std::isfinite(f.mean_loss)
                              ? absl::StrFormat("%.4f", f.mean_loss)
                              : "-");
  }
  absl::StrAppendFormat(&out, " | %s %s", f.metric,
                        std::isfinite(f.best_accuracy)
                            ? absl::StrFormat("%.4f", f.best_accuracy)
                            : "-");
  if (std::isfinite(f.staleness_p99)) {
    absl::StrAppendFormat(&out, " | stale p99 %.0f", f.staleness_p99);
  }
  absl::StrAppendFormat(&out, " | %d/%d workers", f.running, f.workers);
  if (f.joined > 0 || f.drained > 0) {
    absl::StrAppendFormat(&out, " (%d joined, %d drained)", f.joined,
                          f.drained);
  }
  if (f.data_bytes_total > 0) {
    absl::StrAppend(&out, DataPart(f));
  } else if (f.planned_steps > 0 && f.steps_per_sec > 0 && f.running > 0) {
    const double remaining = std::max<int64_t>(0, f.planned_steps - f.steps);
    absl::StrAppend(&out, " | ETA ", Duration(remaining / f.steps_per_sec));
  }
  return out;
}

int64_t PlannedSteps(const Config& config) {
  const int64_t workers = config.cluster.workers.size();
  if (workers == 0) return 0;
  if (config.training.steps > 0) return config.training.steps * workers;
  // Streamed data: rows are counted as they are read (the line shows bytes).
  if (StreamsData(config.data)) return 0;
  // The split is cut into WorkerSlots parts (example i in part i % S);
  // worker k starts with parts k, k + W, ... below S.
  const int64_t n = config.data.train_examples;
  const int64_t slots = WorkerSlots(config.cluster);
  const int64_t batch = std::max(1, config.training.batch_size);
  int64_t total = 0;
  for (int64_t k = 0; k < workers; ++k) {
    int64_t examples = 0;
    for (int64_t p = k; p < slots; p += workers) {
      examples += (n - p + slots - 1) / slots;  // i < n with i % S == p
    }
    total += config.training.epochs * ((examples + batch - 1) / batch);
  }
  return total;
}

ProgressLine::ProgressLine(std::FILE* out, bool tty) : out_(out), tty_(tty) {}

std::string ProgressLine::Fit(const std::string& text) const {
  struct winsize size = {};
  if (ioctl(fileno(out_), TIOCGWINSZ, &size) != 0 || size.ws_col == 0)
    return text;
  // One column spare: writing the last column makes some terminals wrap.
  const size_t width = size.ws_col - 1;
  return text.size() <= width ? text : text.substr(0, width);
}

void ProgressLine::Update(const std::string& text) {
  if (out_ == nullptr) return;
  if (tty_) {
    shown_ = Fit(text);
    std::fputs(absl::StrCat("\r", shown_, "\x1b[K").c_str(), out_);
  } else {
    std::fputs(absl::StrCat(text, "\n").c_str(), out_);
  }
  std::fflush(out_);
}

void ProgressLine::Event(const std::string& text) {
  if (out_ == nullptr) return;
  if (tty_ && !shown_.empty()) {
    std::fputs(absl::StrCat("\r\x1b[K", text, "\n", shown_, "\x1b[K").c_str(),
               out_);
  } else {
    std::fputs(absl::StrCat(text, "\n").c_str(), out_);
  }
  std::fflush(out_);
}

void ProgressLine::Finish() {
  if (out_ == nullptr || !tty_ || shown_.empty()) return;
  std::fputs("\n", out_);
  std::fflush(out_);
  shown_.clear();
}

}  // namespace downpour

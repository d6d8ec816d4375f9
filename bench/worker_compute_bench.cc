// Worker compute throughput: examples/s of CpuBackend::LossAndGradient (and
// with a plain SGD update after each step, as PyTorch's reference figure
// includes) for one model and several batch sizes, on --blas_threads OpenBLAS
// threads.
//
//   bazel run //bench:worker_compute_bench -- --batches=64,128
//
// PERF_NOTES.md's target: >= 41k examples/s (PyTorch 1.13, one thread) for
// 784-256-128-10 at batch 128. The machine is shared and noisy, so each figure
// is the median of --trials timed runs of --seconds each.
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "worker/cpu/cpu_backend.h"

ABSL_FLAG(std::string, layers, "784,256,128,10", "model layer widths");
ABSL_FLAG(std::string, batches, "64,128", "batch sizes to measure");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads");
ABSL_FLAG(int, trials, 7, "timed runs per figure; the median is reported");
ABSL_FLAG(double, seconds, 0.5, "length of one timed run");

namespace downpour::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Workload {
  std::vector<float> params, grad, x;
  std::vector<float> labels;  // class indices, as floats
};

Workload MakeWorkload(const ModelSpec& spec, int batch) {
  Workload w;
  w.params = spec.InitAll(1);
  w.grad.resize(spec.num_params());
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  w.x.resize(static_cast<size_t>(batch) * spec.layers().front());
  for (float& v : w.x) v = pixel(gen);
  for (int i = 0; i < batch; ++i) {
    w.labels.push_back(static_cast<float>(gen() % spec.layers().back()));
  }
  return w;
}

// Seconds of CPU time this process has used (all threads).
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Examples per wall-clock second and per CPU second of one timed run. On a
// shared machine the second is the steadier: it ignores time spent descheduled.
struct Rate {
  double wall = 0;
  double cpu = 0;
};

Rate TimedRun(worker::CpuBackend& backend, Workload& w, int batch,
              bool sgd_update, double seconds) {
  int64_t steps = 0;
  const Clock::time_point start = Clock::now();
  const double cpu_start = CpuSeconds();
  double elapsed = 0;
  do {
    for (int i = 0; i < 10; ++i, ++steps) {
      (void)backend.LossAndGradient(w.params.data(), w.x.data(),
                                    w.labels.data(), batch, w.grad.data());
      if (!sgd_update) continue;
      for (size_t p = 0; p < w.params.size(); ++p) {
        w.params[p] -= 1e-6f * w.grad[p];
      }
    }
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  const double examples = static_cast<double>(steps) * batch;
  return {examples / elapsed, examples / (CpuSeconds() - cpu_start)};
}

// Medians over trials, each field on its own.
Rate Median(std::vector<Rate> rates) {
  Rate median;
  for (double Rate::*field : {&Rate::wall, &Rate::cpu}) {
    std::sort(rates.begin(), rates.end(), [&](const Rate& a, const Rate& b) {
      return a.*field < b.*field;
    });
    median.*field = rates[rates.size() / 2].*field;
  }
  return median;
}

int Run() {
  ModelSection section;
  section.layers = ParseInts(absl::GetFlag(FLAGS_layers));
  section.type =
      section.layers.size() == 2 ? ModelType::kSoftmax : ModelType::kMlp;
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(section);
  if (!spec.ok()) {
    absl::FPrintF(stderr, "bad --layers: %s\n", spec.status().ToString());
    return 2;
  }
  openblas_set_num_threads(absl::GetFlag(FLAGS_blas_threads));
  absl::PrintF("model %s (%d params), %d OpenBLAS thread(s), core %s\n",
               absl::GetFlag(FLAGS_layers), spec->num_params(),
               absl::GetFlag(FLAGS_blas_threads), openblas_get_corename());
  absl::PrintF("%6s %10s %12s %14s %16s %9s\n", "batch", "grad ex/s",
               "grad ex/cpu-s", "grad+sgd ex/s", "grad+sgd ex/cpu-s",
               "ms/step");
  for (int batch : ParseInts(absl::GetFlag(FLAGS_batches))) {
    worker::CpuBackend backend(*spec, batch);
    Workload w = MakeWorkload(*spec, batch);
    TimedRun(backend, w, batch, true, 0.2);  // warm caches and BLAS buffers
    std::vector<Rate> grad_only, with_sgd;
    for (int t = 0; t < absl::GetFlag(FLAGS_trials); ++t) {
      const double seconds = absl::GetFlag(FLAGS_seconds);
      grad_only.push_back(TimedRun(backend, w, batch, false, seconds));
      with_sgd.push_back(TimedRun(backend, w, batch, true, seconds));
    }
    const Rate g = Median(grad_only), s = Median(with_sgd);
    absl::PrintF("%6d %10.0f %12.0f %14.0f %16.0f %9.3f\n", batch, g.wall,
                 g.cpu, s.wall, s.cpu, 1e3 * batch / g.wall);
  }
  absl::PrintF(
      "target: >= 41000 ex/s at batch 128 on one thread "
      "(PyTorch 1.13, PERF_NOTES.md)\n");
  return 0;
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  return downpour::bench::ParseFlagsAndRun(argc, argv, downpour::bench::Run);
}

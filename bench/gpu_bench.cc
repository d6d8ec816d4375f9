// gpu_bench: one worker's CUDA backend, where a usable GPU exists.
//
//   bazel run -c opt //bench:gpu_bench
//   bazel run -c opt //bench:gpu_bench -- --batches=128,512 --gpu=1
//
// Sections (docs/GPU.md explains every column):
//   worker  DownpourLoop examples/s on the CUDA backend with communication off
//           (no_communication) and on (GrpcPsClient against one in-process ps
//           shard over 127.0.0.1, bench/local_cluster.h), and their ratio;
//           the CPU backend's rate without communication for reference.
//   sgemm   the SGEMM rate the backend achieves for the MLP's shapes against
//           cuBLAS's own rate for the same SGEMMs called directly: the GEMM
//           FLOPs of one step divided by the time of (a) those SGEMMs alone,
//           (b) DeviceMlp's forward + backward (SGEMMs and kernels, no host
//           transfers), (c) CudaBackend::LossAndGradient host to host, with
//           the parameters cached and re-uploaded every step; ratios to (a).
// Without a usable GPU it prints "gpu_bench: no usable GPU: <reason>" and
// exits 0. Figures are medians of --reps samples, interleaved.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/local_cluster.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/logging.h"
#include "common/model_spec.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/cuda/cuda_support.h"
#include "worker/cuda/sgemm_timer.h"
#include "worker/dataset.h"
#include "worker/downpour.h"
#include "worker/grpc_ps_client.h"

ABSL_FLAG(int, gpu, 0, "which GPU");
ABSL_FLAG(std::string, batches, "64,256", "batch sizes to measure");
ABSL_FLAG(std::string, sections, "worker,sgemm", "worker, sgemm");
ABSL_FLAG(int, worker_steps, 500, "training steps per worker sample");
ABSL_FLAG(int, reps, 3, "samples per figure (median)");
ABSL_FLAG(int, sgemm_steps, 200, "steps per sgemm sample");

namespace downpour::bench {
namespace {

using Clock = std::chrono::steady_clock;

void Check(const absl::Status& status, const std::string& what) {
  CheckOrExit(status, "gpu_bench", what);
}

bool SectionOn(const std::string& name) {
  return bench::SectionOn(absl::GetFlag(FLAGS_sections), name);
}

std::unique_ptr<worker::ComputeBackend> Gpu(const ModelSpec& spec, int batch) {
  absl::StatusOr<std::unique_ptr<worker::ComputeBackend>> backend =
      worker::MakeCudaBackend(spec, batch, absl::GetFlag(FLAGS_gpu));
  Check(backend.status(), "CUDA backend");
  return *std::move(backend);
}

// examples/s of one DownpourLoop run.
double TrainOnce(const ModelSpec& spec, worker::ComputeBackend* backend,
                 worker::PsClient* client, const worker::Dataset& train,
                 int batch, bool no_communication) {
  worker::Dataset no_test;  // no evaluation
  no_test.dim = kMnistDim;
  no_test.classes = kMnistClasses;
  worker::DownpourLoop::Options options;
  options.training.batch_size = batch;
  options.training.steps = absl::GetFlag(FLAGS_worker_steps);
  options.training.eval_every_steps = 0;
  options.no_communication = no_communication;
  worker::DownpourLoop loop(spec, backend, client, &train, &no_test, options);
  Check(loop.Run(), "worker");
  return loop.stats().examples_per_sec;
}

void RunWorker(const std::vector<int>& batches) {
  Config config;  // the MNIST MLP 784-256-128-10, SGD, n_fetch = n_push = 1
  config.cluster.ps = {"127.0.0.1:0"};
  config.rpc.connect_timeout_s = 10;
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      LocalCluster::Start(config);
  Check(cluster.status(), "start cluster");
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  Check(spec.status(), "model");
  Counters counters;
  worker::GrpcPsClient ps(*spec, (*cluster)->coordinator_client(), config.rpc,
                          0, &counters);
  Check(ps.Connect(), "connect");
  const worker::Dataset train =
      worker::MakeSynthetic(8192, kMnistDim, kMnistClasses, /*seed=*/7);
  absl::PrintF(
      "\n== worker: DownpourLoop examples/s, MLP 784-256-128-10, %d steps per "
      "sample, medians of %d; ps: 1 in-process shard over 127.0.0.1 ==\n",
      absl::GetFlag(FLAGS_worker_steps), absl::GetFlag(FLAGS_reps));
  absl::PrintF("%6s %14s %14s %10s %14s %10s\n", "batch", "cuda no-comm",
               "cuda with ps", "with/no", "cpu no-comm", "cuda/cpu");
  for (int batch : batches) {
    std::unique_ptr<worker::ComputeBackend> gpu = Gpu(*spec, batch);
    worker::CpuBackend cpu(*spec, batch);
    TrainOnce(*spec, gpu.get(), &ps, train, batch, true);  // warm up
    std::vector<double> alone, with_ps, on_cpu;
    for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
      alone.push_back(TrainOnce(*spec, gpu.get(), &ps, train, batch, true));
      with_ps.push_back(TrainOnce(*spec, gpu.get(), &ps, train, batch, false));
      on_cpu.push_back(TrainOnce(*spec, &cpu, &ps, train, batch, true));
    }
    const double a = Median(alone), w = Median(with_ps), c = Median(on_cpu);
    absl::PrintF("%6d %14.0f %14.0f %10.2f %14.0f %10.2f\n", batch, a, w, w / a,
                 c, a / c);
    std::fflush(stdout);  // rows show as they come, also into a file
  }
  absl::PrintF(
      "with/no: target >= 0.95 (PERF_NOTES.md); cpu: 1 OpenBLAS thread.\n");
}

// Seconds per LossAndGradient call, parameters cached or re-uploaded.
double BackendSeconds(const ModelSpec& spec, worker::ComputeBackend* backend,
                      int batch, bool reupload) {
  const int steps = absl::GetFlag(FLAGS_sgemm_steps);
  std::vector<float> params = spec.InitAll(1), grad(spec.num_params());
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch) * spec.layers().front());
  for (float& v : x) v = pixel(gen);
  std::vector<float> labels(batch);  // class indices, as floats
  for (float& y : labels) {
    y = static_cast<float>(gen() % spec.layers().back());
  }
  auto step = [&] {
    Check(backend
              ->LossAndGradient(params.data(), x.data(), labels.data(), batch,
                                grad.data())
              .status(),
          "LossAndGradient");
  };
  backend->ParamsChanged();
  step();  // warm-up; uploads the parameters
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < steps; ++i) {
    if (reupload) backend->ParamsChanged();
    step();
  }
  return std::chrono::duration<double>(Clock::now() - start).count() / steps;
}

void RunSgemm(const std::vector<int>& batches) {
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(ModelSection());
  Check(spec.status(), "model");
  absl::PrintF(
      "\n== sgemm: GEMM GFLOP/s of one training step, MLP 784-256-128-10, "
      "%d steps per sample, medians of %d ==\n",
      absl::GetFlag(FLAGS_sgemm_steps), absl::GetFlag(FLAGS_reps));
  absl::PrintF("%6s %10s %12s %12s %12s %10s %10s %10s\n", "batch", "cuBLAS",
               "device step", "backend", "backend+up", "dev/cuBLAS",
               "be/cuBLAS", "be+up/cuB");
  for (int batch : batches) {
    std::unique_ptr<worker::ComputeBackend> gpu = Gpu(*spec, batch);
    std::vector<double> direct, device, cached, upload;
    double flops = 0;
    for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
      absl::StatusOr<worker::SgemmTiming> t =
          worker::TimeMlpSgemm(*spec, batch, absl::GetFlag(FLAGS_gpu),
                               absl::GetFlag(FLAGS_sgemm_steps));
      Check(t.status(), "sgemm timing");
      flops = t->flops_per_step;
      direct.push_back(flops / t->direct_seconds);
      device.push_back(flops / t->device_step_seconds);
      cached.push_back(flops / BackendSeconds(*spec, gpu.get(), batch, false));
      upload.push_back(flops / BackendSeconds(*spec, gpu.get(), batch, true));
    }
    const double d = Median(direct), s = Median(device), c = Median(cached),
                 u = Median(upload);
    absl::PrintF("%6d %10.1f %12.1f %12.1f %12.1f %10.2f %10.2f %10.2f\n",
                 batch, d / 1e9, s / 1e9, c / 1e9, u / 1e9, s / d, c / d,
                 u / d);
    std::fflush(stdout);
  }
  absl::PrintF(
      "cuBLAS: the step's SGEMMs alone; device step: + kernels; backend: "
      "LossAndGradient host to host, params cached; backend+up: params "
      "uploaded every step.\n");
}

int Run() {
  openblas_set_num_threads(1);
  Check(InitLogging("", "warn"), "logging");
  absl::StatusOr<std::string> gpu =
      worker::ProbeCudaDevice(absl::GetFlag(FLAGS_gpu));
  if (!gpu.ok()) {
    absl::PrintF("gpu_bench: no usable GPU: %s\n", gpu.status().message());
    return 0;
  }
  absl::PrintF("gpu_bench: %s\n", *gpu);
  const std::vector<int> batches = ParseInts(absl::GetFlag(FLAGS_batches));
  const Clock::time_point start = Clock::now();
  if (SectionOn("worker")) RunWorker(batches);
  if (SectionOn("sgemm")) RunSgemm(batches);
  PrintTotal(start);
  return 0;
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  return downpour::bench::ParseFlagsAndRun(argc, argv, downpour::bench::Run);
}

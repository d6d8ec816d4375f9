// The MLP's SGEMMs timed with CUDA events: cuBLAS alone vs DeviceMlp.
#include "worker/cuda/sgemm_timer.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_resources.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/cuda_support.h"
#include "worker/cuda/device_mlp.h"
#include "worker/cuda/row_major_gemm.h"

namespace downpour::worker {
namespace {

using gpu::CudaStatus;

struct GemmShape {
  bool trans_a, trans_b;
  int m, n, k;
};

// The SGEMMs of one step of `rows` examples, as DeviceMlp issues them.
std::vector<GemmShape> StepGemms(const std::vector<int>& layers, int rows) {
  std::vector<GemmShape> gemms;
  const int num_layers = static_cast<int>(layers.size()) - 1;
  for (int l = 0; l < num_layers; ++l) {
    gemms.push_back({false, false, rows, layers[l + 1], layers[l]});
  }
  for (int l = num_layers - 1; l >= 0; --l) {
    gemms.push_back({true, false, layers[l], layers[l + 1], rows});  // dW
    if (l > 0) gemms.push_back({false, true, rows, layers[l], layers[l + 1]});
  }
  return gemms;
}

// Seconds per call of fn over `iterations` calls on `stream`, after one
// warm-up call.
absl::StatusOr<double> Time(cudaStream_t stream, int iterations,
                            const std::function<absl::Status()>& fn) {
  ASSIGN_OR_RETURN(gpu::Event start, gpu::CreateEvent(/*timing=*/true));
  ASSIGN_OR_RETURN(gpu::Event stop, gpu::CreateEvent(/*timing=*/true));
  RETURN_IF_ERROR(fn());
  RETURN_IF_ERROR(
      CudaStatus(cudaEventRecord(start.get(), stream), "cudaEventRecord"));
  for (int i = 0; i < iterations; ++i) RETURN_IF_ERROR(fn());
  RETURN_IF_ERROR(
      CudaStatus(cudaEventRecord(stop.get(), stream), "cudaEventRecord"));
  RETURN_IF_ERROR(
      CudaStatus(cudaEventSynchronize(stop.get()), "cudaEventSynchronize"));
  float ms = 0;
  RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&ms, start.get(), stop.get()),
                             "cudaEventElapsedTime"));
  return ms * 1e-3 / iterations;
}

// Zeroed device floats (values do not change SGEMM speed).
absl::StatusOr<gpu::DeviceArray<float>> Zeros(size_t n, const char* what) {
  ASSIGN_OR_RETURN(auto array, gpu::DeviceArray<float>::Allocate(n, what));
  RETURN_IF_ERROR(
      CudaStatus(cudaMemset(array.data(), 0, n * sizeof(float)), "cudaMemset"));
  return array;
}

}  // namespace

absl::StatusOr<SgemmTiming> TimeMlpSgemm(const ModelSpec& spec, int batch,
                                         int gpu, int iterations) {
  RETURN_IF_ERROR(ProbeCudaDevice(gpu).status());
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(gpu), "cudaSetDevice"));
  ASSIGN_OR_RETURN(gpu::Stream stream, gpu::CreateStream());
  ASSIGN_OR_RETURN(gpu::CublasHandle cublas, gpu::CreateCublas(stream.get()));
  const std::vector<GemmShape> gemms = StepGemms(spec.layers(), batch);
  SgemmTiming timing;
  size_t max_a = 0, max_b = 0, max_c = 0;
  for (const GemmShape& g : gemms) {
    timing.flops_per_step += 2.0 * g.m * g.n * g.k;
    max_a = std::max<size_t>(max_a, static_cast<size_t>(g.m) * g.k);
    max_b = std::max<size_t>(max_b, static_cast<size_t>(g.k) * g.n);
    max_c = std::max<size_t>(max_c, static_cast<size_t>(g.m) * g.n);
  }
  ASSIGN_OR_RETURN(auto a, Zeros(max_a, "a"));
  ASSIGN_OR_RETURN(auto b, Zeros(max_b, "b"));
  ASSIGN_OR_RETURN(auto c, Zeros(max_c, "c"));
  ASSIGN_OR_RETURN(
      timing.direct_seconds, Time(stream.get(), iterations, [&] {
        const float one = 1.0f, zero = 0.0f;
        for (const GemmShape& s : gemms) {
          const gpu::ColumnMajorGemm g =
              gpu::ToColumnMajor(s.trans_a, s.trans_b, s.m, s.n, s.k, a.data(),
                                 b.data(), c.data());
          RETURN_IF_ERROR(gpu::CublasStatus(
              cublasSgemm(cublas.get(),
                          g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                          g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n,
                          g.k, &one, g.first, g.ld_first, g.second, g.ld_second,
                          &zero, g.c, g.ldc),
              "cublasSgemm (direct)"));
        }
        return absl::OkStatus();
      }));

  ASSIGN_OR_RETURN(auto mlp, gpu::DeviceMlp::Create(spec, batch, stream.get()));
  const size_t n = spec.num_params();
  ASSIGN_OR_RETURN(auto params, Zeros(n, "parameters"));
  ASSIGN_OR_RETURN(auto grad, Zeros(n, "gradient"));
  ASSIGN_OR_RETURN(auto x,
                   Zeros(static_cast<size_t>(batch) * spec.layers()[0], "x"));
  ASSIGN_OR_RETURN(auto loss, Zeros(batch, "losses"));
  ASSIGN_OR_RETURN(auto labels, Zeros(batch, "targets"));  // every class 0
  ASSIGN_OR_RETURN(
      timing.device_step_seconds, Time(stream.get(), iterations, [&] {
        RETURN_IF_ERROR(mlp->Forward(params.data(), x.data(), batch));
        return mlp->Backward(params.data(), x.data(), labels.data(), batch,
                             loss.data(), grad.data());
      }));
  return timing;
}

}  // namespace downpour::worker

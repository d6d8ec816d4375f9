"""Bazel macros for the CUDA backend: nvcc-compiled objects, and targets that
exist only when @local_cuda found the toolkit (CUDA_AVAILABLE, decided when the
repository rule runs: DOWNPOUR_NO_CUDA=1 or a missing toolkit turn it off)."""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "NVCC")

# Machine code for sm_80 (A100) and sm_90 (H100, H200), plus compute_90 PTX
# that the driver JIT-compiles for newer GPUs.
NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-Xcompiler",
    "-fPIC",
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
    "-I.",
]

def cuda_cc_library(**kwargs):
    """A cc_library that exists only when the CUDA toolkit does."""
    if CUDA_AVAILABLE:
        native.cc_library(**kwargs)

def nvcc_library(name, src, hdrs, private_hdrs = [], deps = [], **kwargs):
    """Compiles `src` (.cu) with nvcc into a cc_library `name` whose headers are
    `hdrs`; `private_hdrs` are other headers `src` includes. Only when the CUDA
    toolkit exists."""
    if not CUDA_AVAILABLE:
        return
    obj = name + ".nvcc.o"
    native.genrule(
        name = name + "_nvcc",
        srcs = [src] + hdrs + private_hdrs,
        outs = [obj],
        cmd = "%s %s -c $(location %s) -o $@" % (NVCC, " ".join(NVCC_FLAGS), src),
        message = "nvcc (sm_80, sm_90) " + src,
    )
    native.cc_library(
        name = name,
        srcs = [obj],
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda"],
        **kwargs
    )

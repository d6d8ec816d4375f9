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

def cuda_cc_test(**kwargs):
    """A cc_test that exists only when the CUDA toolkit does."""
    if CUDA_AVAILABLE:
        native.cc_test(**kwargs)

def nvcc_library(name, src, src_hdrs = [], deps = [], **kwargs):
    """Compiles `src` (.cu, including `src_hdrs`) with nvcc into a cc_library
    `name` that links cuBLAS and the CUDA runtime; `deps` should provide the
    headers that declare what `src` defines. Only when the toolkit exists."""
    if not CUDA_AVAILABLE:
        return
    obj = name + ".nvcc.o"
    native.genrule(
        name = name + "_nvcc",
        srcs = [src] + src_hdrs,
        outs = [obj],
        cmd = "%s %s -c $(location %s) -o $@" % (NVCC, " ".join(NVCC_FLAGS), src),
        message = "nvcc (sm_80, sm_90) " + src,
    )
    native.cc_library(
        name = name,
        srcs = [obj],
        deps = deps + ["@local_cuda//:cuda"],
        # Its users declare only the header library (so that tests can link an
        # emulation instead), so the link order need not put this after them.
        alwayslink = True,
        **kwargs
    )

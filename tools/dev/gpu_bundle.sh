#!/bin/bash
# Packs the binaries the GPU checks need, with the Debian libraries they link,
# into .gpu/b.tar.xz, for a GPU machine that has the CUDA runtime and cuBLAS
# (/usr/local/cuda/lib64) but not Debian's gRPC, protobuf, Abseil or OpenBLAS.
# Run from the repository root; then run tools/dev/gpu_check.sh there (docs/GPU.md).
set -euo pipefail
targets=(//coordinator:coordinator //server:ps_server //worker:ps_worker
         //deploy:launcher //tools:psctl //bench:gpu_bench
         //worker:backend_factory_test //worker/cuda:cuda_backend_test)
bazel build "${targets[@]}"
stage=$(mktemp -d)/b
mkdir -p "$stage/lib"
for t in "${targets[@]}"; do
  pkg=${t#//}; pkg=${pkg%%:*}; name=${t##*:}
  mkdir -p "$stage/$pkg"
  cp -L "bazel-bin/$pkg/$name" "$stage/$pkg/$name"
  # Every shared library it loads except glibc's and the CUDA toolkit's,
  # which the GPU machine provides.
  ldd "bazel-bin/$pkg/$name" | awk '$3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -Ln "$lib" "$stage/lib/" 2>/dev/null || true; done
done
mkdir -p .gpu
tar cJf .gpu/b.tar.xz -C "$(dirname "$stage")" b
rm -rf "$(dirname "$stage")"
ls -la .gpu/b.tar.xz

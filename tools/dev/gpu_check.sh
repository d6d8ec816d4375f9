#!/bin/bash
# The GPU checks of docs/GPU.md, run on a machine with an NVIDIA GPU from the
# repository root, after tools/dev/gpu_bundle.sh made .gpu/b.tar.xz elsewhere.
# Needs data/mnist (deploy/fetch_data.sh). Writes its results under $OUT
# (default ./gpu_out): env.txt, tests.txt, gpu_bench.txt, cluster.txt, summaries.
exec 2>&1
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
{
date -u; head -3 /etc/os-release; nvidia-smi; ldd --version | head -1; nproc
CL=$(dirname "$(ls /usr/local/cuda/lib64/libcublas.so.13 2>/dev/null || find / -name libcublas.so.13 -not -path '/proc/*' 2>/dev/null | head -1)")
echo "cublas dir: $CL"
} > "$OUT/env.txt" 2>&1
CL=$(sed -n 's/^cublas dir: //p' "$OUT/env.txt")
B=/tmp/gpu_bundle/b
mkdir -p /tmp/gpu_bundle && tar xJf .gpu/b.tar.xz -C /tmp/gpu_bundle
export LD_LIBRARY_PATH=$B/lib:$CL
for f in $B/*/* ; do [ -f "$f" ] && ldd "$f" | grep "not found" | sed "s|^|$f: |"; done >> "$OUT/env.txt"
{
echo "== backend_factory_test"; timeout 120 $B/worker/backend_factory_test; echo "rc=$?"
echo "== cuda_backend_test"; timeout 180 $B/worker/cuda/cuda_backend_test; echo "rc=$?"
} > "$OUT/tests.txt" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |rc=" "$OUT/tests.txt"
timeout ${SGEMM_S:-120} $B/bench/gpu_bench --sections=sgemm --batches=64,256,1024 > "$OUT/gpu_bench.txt" 2>&1
echo "sgemm rc=$?" | tee -a "$OUT/gpu_bench.txt"
timeout ${WORKER_S:-150} $B/bench/gpu_bench --sections=worker --batches=64,256 --worker_steps=400 >> "$OUT/gpu_bench.txt" 2>&1
echo "worker rc=$?" | tee -a "$OUT/gpu_bench.txt"
cat "$OUT/gpu_bench.txt"
for dev in cuda cpu; do
  echo "== cluster $dev" >> "$OUT/cluster.txt"
  s=$SECONDS
  timeout 150 $B/deploy/launcher --bin_dir $B --run_dir /tmp/run_$dev --set compute.device=$dev >> "$OUT/cluster.txt" 2>&1
  echo "rc=$? wall=$((SECONDS-s)) s" >> "$OUT/cluster.txt"
  cp /tmp/run_$dev/summary.json "$OUT/summary_$dev.json"
  grep -h "computing on\|training .* steps" /tmp/run_$dev/logs/worker*.log | head -4 >> "$OUT/cluster.txt"
done
tail -40 "$OUT/cluster.txt"

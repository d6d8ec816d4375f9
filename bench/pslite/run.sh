#!/usr/bin/env bash
# ps-lite (an established ZeroMQ parameter server) on bench/sparse's key
# stream, beside bench/sparse's rpc section in the same round:
#
#   bench/pslite/run.sh PSLITE_GIT_DIR [SERVERS...]     # default: 1 2 4
#
# PSLITE_GIT_DIR: a snapshot of github.com/dmlc/ps-lite (git clone it). Builds
# ps-lite against Debian's libzmq3-dev and protobuf (installed when missing)
# and bench/pslite/sparse_kv_bench.cc, runs a scheduler, N servers and one
# worker on 127.0.0.1 for each N, then bench/sparse --sections=rpc with the
# same shard counts. Env KEYS, ZIPF, BATCH, BATCHES, REPS as bench/sparse's
# flags (defaults 1e7, 1.1, 1024, 200, 3).
set -euo pipefail
src=${1:?ps-lite git dir}; shift
if [[ $# -gt 0 ]]; then servers=("$@"); else servers=(1 2 4); fi
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
out=${PSLITE_OUT:-/tmp/downpour-pslite}
mkdir -p "$out"
dpkg -s libzmq3-dev >/dev/null 2>&1 || apt-get install -y -qq libzmq3-dev >/dev/null
[ -d "$out/src" ] || git clone -q "$src" "$out/src"
(cd "$out/src" && { [ -f build/libps.a ] || make -j2 DEPS_PATH=/usr >/dev/null 2>&1 || make DEPS_PATH=/usr; })
g++ -O2 -std=c++14 -I"$out/src/include" "$here/sparse_kv_bench.cc" \
  "$out/src/build/libps.a" -lzmq -lprotobuf-lite -lpthread -o "$out/sparse_kv_bench"
for n in "${servers[@]}"; do
  port=$((20000 + RANDOM % 20000))
  export DMLC_NUM_SERVER=$n DMLC_NUM_WORKER=1 DMLC_PS_ROOT_URI=127.0.0.1 \
    DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1
  DMLC_ROLE=scheduler "$out/sparse_kv_bench" >/dev/null 2>&1 &
  for ((i = 0; i < n; ++i)); do DMLC_ROLE=server "$out/sparse_kv_bench" >/dev/null 2>&1 & done
  DMLC_ROLE=worker timeout 600 "$out/sparse_kv_bench" 2>/dev/null
  wait
done
bin="$repo/bazel-bin/bench/sparse"
[ -x "$bin" ] || (cd "$repo" && bazel build -c opt //bench:sparse >/dev/null)
IFS=,
for opt in sgd ftrl; do
  "$bin" --sections=rpc --optimizer=$opt --shards="${servers[*]}" 2>/dev/null | grep -v '^20'
done

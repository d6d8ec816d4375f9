#!/usr/bin/env bash
# ps-lite (an established ZeroMQ parameter server) on bench/sparse's key
# stream, beside bench/sparse's rpc section in the same round:
#
#   bench/pslite/run.sh PSLITE_GIT_DIR [SERVERS...]     # default: 1 2 4
#
# PSLITE_GIT_DIR: a snapshot of github.com/dmlc/ps-lite (git clone it). Builds
# ps-lite against Debian's libzmq3-dev and protobuf (installed when missing)
# and bench/pslite/sparse_kv_bench.cc. Then, for each row width in DIMS and
# each server count N, one after the other: a scheduler, N servers and one
# worker on 127.0.0.1 (ps-lite's key-value path), then bench/sparse
# --sections=rpc with N shards and that width, for each optimizer in
# OPTIMIZERS; one line each, side by side, with Downpour / ps-lite ratios.
# Env DIMS (default "1 16"), OPTIMIZERS (default "sgd ftrl"; ps-lite's
# servers apply sgd), KEYS, ZIPF, BATCH, BATCHES, REPS as bench/sparse's
# flags (defaults 1e7, 1.1, 1024, 200, 3).
set -euo pipefail
src=${1:?ps-lite git dir}; shift
if [[ $# -gt 0 ]]; then servers=("$@"); else servers=(1 2 4); fi
read -r -a dims <<<"${DIMS:-1 16}"
read -r -a optimizers <<<"${OPTIMIZERS:-sgd ftrl}"
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
out=${PSLITE_OUT:-/tmp/downpour-pslite}
mkdir -p "$out"
dpkg -s libzmq3-dev >/dev/null 2>&1 || apt-get install -y -qq libzmq3-dev >/dev/null
[ -d "$out/src" ] || git clone -q "$src" "$out/src"
(cd "$out/src" && { [ -f build/libps.a ] || make -j2 DEPS_PATH=/usr >/dev/null 2>&1 || make DEPS_PATH=/usr; })
g++ -O2 -std=c++14 -I"$out/src/include" "$here/sparse_kv_bench.cc" \
  "$out/src/build/libps.a" -lzmq -lprotobuf-lite -lpthread -o "$out/sparse_kv_bench"
bin="$repo/bazel-bin/bench/sparse"
[ -x "$bin" ] || (cd "$repo" && bazel build -c opt //bench:sparse >/dev/null)

# ps-lite's pull and push keys/s/server for DIM=$1 with $2 servers.
pslite() {
  local port=$((20000 + RANDOM % 20000)) line
  export DIM=$1 DMLC_NUM_SERVER=$2 DMLC_NUM_WORKER=1 \
    DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1
  DMLC_ROLE=scheduler "$out/sparse_kv_bench" >/dev/null 2>&1 &
  for ((i = 0; i < $2; ++i)); do
    DMLC_ROLE=server "$out/sparse_kv_bench" >/dev/null 2>&1 &
  done
  line=$(DMLC_ROLE=worker timeout 600 "$out/sparse_kv_bench" 2>/dev/null)
  wait
  unset DIM DMLC_NUM_SERVER DMLC_NUM_WORKER DMLC_PS_ROOT_URI \
    DMLC_PS_ROOT_PORT DMLC_NODE_HOST
  sed -E 's/.*pull ([0-9]+) keys.*push ([0-9]+) keys.*/\1 \2/' <<<"$line"
}

# bench/sparse's pull and push keys/s/shard for dim $1, $2 shards, optimizer $3.
downpour() {
  "$bin" --sections=rpc --dims="$1" --shards="$2" --optimizer="$3" \
    --keys="${KEYS:-10000000}" --zipf="${ZIPF:-1.1}" --batch="${BATCH:-1024}" \
    --batches="${BATCHES:-200}" --reps="${REPS:-3}" 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/ && NF >= 4 { print $3, $4 }'
}

printf '%4s %6s %6s %14s %14s %14s %14s %7s %7s\n' dim shards opt \
  "pslite pull/s" "pslite push/s" "downpour pull" "downpour push" \
  "pull x" "push x"
for dim in "${dims[@]}"; do
  for n in "${servers[@]}"; do
    read -r ps_pull ps_push < <(pslite "$dim" "$n")
    for opt in "${optimizers[@]}"; do
      read -r dp_pull dp_push < <(downpour "$dim" "$n" "$opt")
      awk -v d="$dim" -v n="$n" -v o="$opt" -v a="$ps_pull" -v b="$ps_push" \
        -v c="$dp_pull" -v e="$dp_push" 'BEGIN {
          printf "%4d %6d %6s %14.0f %14.0f %14.0f %14.0f %7.2f %7.2f\n",
            d, n, o, a, b, c, e, c / a, e / b }'
    done
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

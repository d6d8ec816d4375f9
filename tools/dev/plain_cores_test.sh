#!/usr/bin/env bash
# The test of tools/dev/plain_cores.bzl: fails when a core library has a path
# to gRPC. Arguments: the genquery outputs listing the offending cores and one
# dependency path from a core to @system_libs//:grpc (both empty when clean).
set -euo pipefail

offenders="$1"
path="$2"
if [[ ! -s "$offenders" && ! -s "$path" ]]; then
  echo "plain cores: none reaches @system_libs//:grpc"
  exit 0
fi
echo "FAIL: core libraries that link gRPC (directly or through their deps):"
sed 's/^/  /' "$offenders"
echo "One dependency path, core first:"
echo "  $(paste -sd' ' "$path" | sed 's/ / -> /g')"
echo "Cores are plain C++ (STYLE.md \"Layout\", docs/ARCHITECTURE.md): keep the"
echo "gRPC code in the service adapter (e.g. server/pull_reply.cc builds the pull"
echo "reply's bytes over Shard::VisitBlocks), or, if the library is no core, take"
echo "it off the plain_cores_test list in its BUILD file."
exit 1

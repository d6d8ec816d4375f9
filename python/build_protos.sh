#!/usr/bin/env bash
# Generates the Python message modules of proto/*.proto with Debian's protoc
# (protobuf-compiler; no grpc_tools): python/downpour/_proto/*_pb2.py, or the
# folder given as $1. The gRPC stubs are hand-written (downpour/_rpc.py), so
# only --python_out is needed. Safe to run again.
#   python/build_protos.sh [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
out="${1:-$here/downpour/_proto}"
if ! command -v protoc >/dev/null 2>&1; then
  echo "build_protos: protoc not found: apt-get install protobuf-compiler" >&2
  exit 1
fi
mkdir -p "$out"
# Imported as downpour._proto.X_pb2: generated from the repository root (the
# .proto files import each other as "proto/X.proto"), so protoc writes them to
# $out/proto/ with "from proto import X_pb2"; moved up and made relative.
rm -rf "$out/proto"
(cd "$root" && protoc -I. --python_out="$out" proto/*.proto)
for f in "$out"/proto/*_pb2.py; do
  sed 's/^from proto import \([a-z_]*_pb2\)/from . import \1/' "$f" >"$out/$(basename "$f")"
done
rm -rf "$out/proto"
touch "$out/__init__.py"
echo "build_protos: $(ls "$out"/*_pb2.py | wc -l) modules in $out"

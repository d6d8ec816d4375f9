#!/usr/bin/env bash
# Builds the libFuzzer targets of tools/fuzz with clang, outside Bazel (Bazel
# 4.2.3 here has no clang toolchain; tools/dev/thread_safety_test.sh does the
# same for -Wthread-safety). Each target is compiled with
# -fsanitize=fuzzer,address,undefined together with the project sources it
# needs: the closure of its #include "..." lines, where a header foo.h brings
# the srcs of the cc_library that exports it (else foo.cc beside it), and
# proto/x.pb.h brings the generated
# proto/x.pb.cc. Objects are kept in OUT/obj and rebuilt only when a source or
# header they read changed, so repeated local runs link in seconds.
#
# Usage: tools/fuzz/build.sh [--root DIR] [--gen DIR] [--out DIR] [--jobs N]
#                            [target...]          (default: every *_fuzzer.cc)
#   --root: the sources (default: the workspace holding this script)
#   --gen:  holds proto/*.pb.{h,cc} (default: runfiles, else ROOT/bazel-bin;
#           `bazel build //proto:all` makes them)
#   --out:  where objects and binaries go (default: ROOT/.fuzz-build)
# Exit 0 with the binaries in OUT/<target>; 1 on a compile error or without
# clang; 3 when clang's fuzzer runtime (Debian: libclang-rt-14-dev) is missing.
# Env: CLANGXX (default clang++), FUZZ_CFLAGS (added to clang's flags).
set -euo pipefail

self="$(readlink -f "${BASH_SOURCE[0]}")"
root="$(cd "$(dirname "$self")/../.." && pwd)"
gen=""
out=""
jobs="$(nproc 2>/dev/null || echo 2)"
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --root) root="$2"; shift 2 ;;
    --root=*) root="${1#*=}"; shift ;;
    --gen) gen="$2"; shift 2 ;;
    --gen=*) gen="${1#*=}"; shift ;;
    --out) out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    --jobs=*) jobs="${1#*=}"; shift ;;
    -*) echo "fuzz build: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ -z "$gen" ]]; then
  if [[ -n "${TEST_SRCDIR:-}" ]]; then
    gen="$TEST_SRCDIR/${TEST_WORKSPACE:-downpour}"
  else
    gen="$root/bazel-bin"
  fi
fi
[[ -n "$out" ]] || out="$root/.fuzz-build"
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$root"/tools/fuzz/*_fuzzer.cc; do targets+=("$(basename "$f" .cc)"); done
fi

clangxx="${CLANGXX:-clang++}"
if ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "fuzz build: $clangxx not found: install clang (deploy/install_deps.sh does)" >&2
  exit 1
fi
runtime="$("$clangxx" -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)"
if [[ ! -f "$runtime" ]]; then
  # Older layouts name it by the resource dir.
  runtime="$("$clangxx" -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a"
fi
if [[ ! -f "$runtime" ]]; then
  echo "fuzz build: clang's libFuzzer runtime (libclang_rt.fuzzer-x86_64.a) is missing: apt-get install libclang-rt-14-dev" >&2
  exit 3
fi
if [[ ! -f "$gen/proto/ps.pb.cc" ]]; then
  echo "fuzz build: no generated proto/*.pb.cc under $gen (run: bazel build //proto:all)" >&2
  exit 1
fi

sanitize=(-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=all)
cflags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -I"$root" -I"$gen"
        $(pkg-config --cflags spdlog grpc++ protobuf yaml-cpp zlib)
        -w "${sanitize[@]}" -fsanitize=fuzzer-no-link ${FUZZ_CFLAGS:-})
libs=($(pkg-config --libs grpc++ protobuf yaml-cpp spdlog absl_synchronization \
          absl_time absl_status absl_statusor absl_str_format absl_strings \
          absl_hash absl_random_random absl_flat_hash_map absl_flat_hash_set openblas \
          zlib prometheus-cpp-core libcrypto) -lgrpc++_reflection)  # rpc/server_util.cc: server reflection; common/push_key.cc: SHA-256
mkdir -p "$out/obj"

# Resolves a quoted include to a file; prints nothing for system headers.
resolve() {
  if [[ -f "$root/$1" ]]; then echo "$root/$1"
  elif [[ -f "$gen/$1" ]]; then echo "$gen/$1"; fi
}
# The .cc files that go with header `h`: the srcs of the cc_library in h's
# BUILD whose hdrs name it (a class split over foo.cc and foo_moves.cc), else
# foo.cc beside it.
library_sources() {
  local h="$1" dir base build
  dir="$(dirname "$h")"; base="$(basename "$h")"; build="$dir/BUILD"
  if [[ -f "$build" ]]; then
    local found
    found="$(awk -v hdr="\"$base\"" '
      /^cc_library\(/ { block = ""; inlib = 1 }
      inlib { block = block "\n" $0 }
      inlib && /^\)/ {
        inlib = 0
        if (index(block, "hdrs") && index(block, hdr)) {
          n = split(block, lines, "\n")
          for (i = 1; i <= n; i++)
            for (rest = lines[i]; match(rest, /"[^"]*\.cc"/); rest = substr(rest, RSTART + RLENGTH))
              print substr(rest, RSTART + 1, RLENGTH - 2)
        }
      }' "$build")"
    if [[ -n "$found" ]]; then
      sed "s|^|$dir/|" <<<"$found"
      return
    fi
  fi
  echo "${h%.h}.cc"
}
# The sources a target needs: the include closure described above.
sources_of() {
  local -A seen=()
  local queue=("$1") srcs=("$1") f inc path cc
  seen["$1"]=1
  while [[ ${#queue[@]} -gt 0 ]]; do
    f="${queue[0]}"; queue=("${queue[@]:1}")
    while IFS= read -r inc; do
      path="$(resolve "$inc")"
      [[ -n "$path" && -z "${seen[$path]:-}" ]] || continue
      seen["$path"]=1
      queue+=("$path")
      [[ "$path" == *.h ]] || continue
      while IFS= read -r cc; do
        [[ -n "$cc" && -f "$cc" && -z "${seen[$cc]:-}" ]] || continue
        seen["$cc"]=1; queue+=("$cc"); srcs+=("$cc")
      done < <(library_sources "$path")
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
  done
  printf '%s\n' "${srcs[@]}"
}
# The object for `src`, rebuilt when it or a header it read (clang's .d) is newer.
object_of() {
  local src="$1" name
  name="$(echo "${src#"$root"/}" | sed "s|^${gen#"$root"/}/||; s|^$gen/||; s|/|_|g")"
  echo "$out/obj/${name%.cc}.o"
}
compile() {
  local src="$1" obj
  obj="$(object_of "$src")"
  if [[ -f "$obj" && -f "$obj.d" ]]; then
    local stale=0 dep
    for dep in $(sed 's/\\$//; s/^[^:]*://' "$obj.d"); do
      [[ "$dep" -nt "$obj" ]] && { stale=1; break; }
    done
    [[ $stale -eq 0 ]] && return 0
  fi
  "$clangxx" "${cflags[@]}" -MMD -MF "$obj.d" -c "$src" -o "$obj.tmp" &&
    mv "$obj.tmp" "$obj"
}
export -f compile object_of
export root gen out clangxx
export cflags_str="${cflags[*]}"

status=0
for t in "${targets[@]}"; do
  main="$root/tools/fuzz/$t.cc"
  if [[ ! -f "$main" ]]; then echo "fuzz build: no $main" >&2; exit 2; fi
  mapfile -t srcs < <(sources_of "$main")
  echo "fuzz build: $t from ${#srcs[@]} sources"
  # Bash arrays do not cross xargs: each worker rebuilds cflags from the string.
  printf '%s\0' "${srcs[@]}" | xargs -0 -P "$jobs" -n 1 bash -c \
    'cflags=($cflags_str); compile "$1"' _ || { status=1; continue; }
  objs=()
  for s in "${srcs[@]}"; do objs+=("$(object_of "$s")"); done
  "$clangxx" "${sanitize[@]}" -fsanitize=fuzzer "${objs[@]}" "${libs[@]}" \
    -o "$out/$t" || status=1
done
exit $status

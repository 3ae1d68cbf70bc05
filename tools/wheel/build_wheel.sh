#!/bin/bash
# Builds the hvd wheel (python/pyproject.toml) with the Bazel-built
# libhvd.so and the bindings' C module (hvd._speedups) inside, offline:
# pip's own build with Debian's setuptools and wheel, no index, no build
# isolation.
#
#   tools/wheel/build_wheel.sh OUT_DIR [LIBHVD_SO [SPEEDUPS_SO]]
#     LIBHVD_SO: default bazel-bin/core/libhvd.so; SPEEDUPS_SO: default
#     bazel-bin/python/_speedups.abi3.so (build both first: bazel build
#     //core:libhvd.so //python:_speedups.abi3.so). Prints the wheel's path.
set -euo pipefail

die() { echo "build_wheel.sh: $*" >&2; exit 2; }
[[ $# -ge 1 && $# -le 3 ]] ||
  die "usage: build_wheel.sh OUT_DIR [LIBHVD_SO [SPEEDUPS_SO]]"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$1
lib=${2:-$repo/bazel-bin/core/libhvd.so}
speedups=${3:-$repo/bazel-bin/python/_speedups.abi3.so}
[[ -f $lib ]] || die "$lib not found: bazel build //core:libhvd.so"
[[ -f $speedups ]] ||
  die "$speedups not found: bazel build //python:_speedups.abi3.so"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$repo/python/pyproject.toml" "$repo/python/setup.py" "$stage/"
cp -r "$repo/python/hvd" "$repo/python/horovod" "$stage/"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
install -m 0755 "$lib" "$stage/hvd/libhvd.so"
install -m 0755 "$speedups" "$stage/hvd/_speedups.abi3.so"

mkdir -p "$out"
log=$stage/pip.log
if ! /usr/bin/python3 -m pip wheel --no-deps --no-build-isolation --no-index \
    --disable-pip-version-check -w "$out" "$stage" >"$log" 2>&1; then
  cat "$log" >&2
  die "pip wheel failed (above)"
fi
ls -t "$out"/hvd-*.whl | head -1

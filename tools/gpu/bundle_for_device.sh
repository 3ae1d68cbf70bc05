#!/bin/bash
# Builds the GPU tests, libhvd.so, hvdrun and the GPU benchmark here, and
# gathers them with the shared libraries they load (from Debian and from
# Bazel's own solib tree) into a git-ignored folder that the device tool can
# carry to a GPU machine, which has no Bazel (at most 64 MiB: the script
# fails above 60). There, tools/gpu/run_on_device.sh runs everything
# (docs/gpu.md). Binaries keep their package's folder in the bundle
# (core/gpu/, tools/bench/), except hvdrun and hvd-agent, which go to bin/.
#
#   tools/gpu/bundle_for_device.sh [DIR]       (default: .device/gpu)
#
# Left out on purpose: glibc (the machine's own is used; the script prints the
# newest GLIBC_ version the bundle needs), the CUDA driver (libcuda), and
# libnccl (over 200 MB here: the machine's PyTorch has its own, under
# nvidia/nccl/lib). libcudart comes along (small). Debian's libstdc++ and
# libgcc_s go to lib-cxx/, apart: they need glibc 2.36, so put lib-cxx/ on
# LD_LIBRARY_PATH only where the machine's own libstdc++ is too old
# (GLIBCXX_3.4.30, GCC 12) and its glibc new enough.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${1:-.device/gpu}
BINARIES=(core/gpu/cuda_platform_test core/gpu/nccl_ops_test
          core/gpu/gpu_job_test core/gpu/gpu_driver
          tools/bench/gpu_overhead_bench launcher/hvdrun agent/hvd-agent)
targets=()
for b in "${BINARIES[@]}"; do targets+=("//${b%/*}:${b##*/}"); done
bazel build "${targets[@]}" //core:libhvd.so //python:_speedups.abi3.so

rm -rf "$OUT"
mkdir -p "$OUT/lib" "$OUT/lib-cxx" "$OUT/core/gpu" "$OUT/tools/bench" \
  "$OUT/tools/gpu" "$OUT/python" "$OUT/bin"
for b in "${BINARIES[@]}"; do
  # gpu_job_test starts core/gpu/gpu_driver relative to its directory.
  case "$b" in
    core/gpu/* | tools/bench/*) cp -L "bazel-bin/$b" "$OUT/$b" ;;
    *) cp -L "bazel-bin/$b" "$OUT/bin/" ;;
  esac
done
cp -L bazel-bin/core/libhvd.so "$OUT/lib/"
cp -rL python/hvd python/horovod "$OUT/python/"
# The bindings' C module (stable ABI: any Python 3.11 or later), where they
# look first: beside hvd/_fastpath.py.
cp -L bazel-bin/python/_speedups.abi3.so "$OUT/python/hvd/"
cp tools/gpu/torch_gpu_check.py "$OUT/tools/gpu/"
find "$OUT/python" -name __pycache__ -prune -exec rm -rf {} +

# Everything the binaries and libhvd.so load, except glibc, the driver and
# NCCL; Bazel links the tests against its own shared libraries too (in
# bazel-bin/_solib_k8, found through the binaries' RUNPATH, which means
# nothing on the other machine).
solib="$ROOT/bazel-bin/_solib_k8:"
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libcuda\.so|libnccl\.so)'
for f in "$OUT"/core/gpu/* "$OUT"/tools/bench/* "$OUT"/bin/* "$OUT"/lib/libhvd.so; do
  [[ -x "$f" && ! "$f" == *.py ]] || [[ "$f" == *.so ]] || continue
  LD_LIBRARY_PATH="${solib}/usr/local/cuda/lib64" ldd "$f" | awk '$3 ~ /^\// {print $1, $3}' |
  while read -r name path; do
    dir=lib
    [[ "$name" =~ ^(libstdc\+\+|libgcc_s) ]] && dir=lib-cxx
    if [[ ! "$name" =~ $skip && ! -e "$OUT/$dir/$name" ]]; then
      cp -L "$path" "$OUT/$dir/$name"
    fi
  done
done

newest() {
  objdump -T "$@" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1
}
main=$(newest "$OUT"/lib/* "$OUT"/bin/* "$OUT"/core/gpu/* "$OUT"/tools/bench/*)
cxx=$(newest "$OUT"/lib-cxx/*)
cxxabi=$(objdump -T "$OUT"/lib/* "$OUT"/bin/* "$OUT"/core/gpu/* "$OUT"/tools/bench/* 2>/dev/null |
         grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)
mib=$(du -sm "$OUT" | cut -f1)
echo "bundle: $OUT (${mib} MiB); needs glibc >= ${main#GLIBC_}" \
     "and a libstdc++ with $cxxabi (lib-cxx/ has one; it needs glibc >= ${cxx#GLIBC_})"
if ((mib > 60)); then
  echo "bundle_for_device.sh: ${mib} MiB is too much for the device tool (64 MiB in all)" >&2
  exit 1
fi

#!/bin/bash
# The GPU measurements, on a machine with a GPU (docs/gpu.md, "Measuring"):
#   1. hvd's NCCL path against ncclAllReduce called directly, same float32 sum
#      allreduce, 1 KiB, 1 MiB and 256 MiB (one process, one GPU);
#   2. the staged path's throughput, 2 and 4 processes sharing GPU 0.
# It cannot run without a GPU. Figures go to docs/performance.md (GPU).
# tools/gpu/run_on_device.sh runs this as its "bench" step.
#
#   tools/bench/gpu_overhead.sh [BUNDLE]
#
# BUNDLE: a folder made by tools/gpu/bundle_for_device.sh (default
# .device/gpu), which is what a GPU machine without Bazel gets; where Bazel
# exists, `bazel build //tools/bench:gpu_overhead_bench //launcher:hvdrun
# //agent:hvd-agent` and BUNDLE=bazel-bin work too.
#
# Environment: PYTHON (default python3: finds PyTorch's NCCL),
# BENCH_TIMEOUT_S (default 180: each of the three runs is killed after it).
# Exit status: 0 when all three runs finished, else 1 (the others still run).
set -uo pipefail
B=$(cd "${1:-.device/gpu}" && pwd) || exit 1
PYTHON=${PYTHON:-python3}
limit=${BENCH_TIMEOUT_S:-180}
bench="$B/tools/bench/gpu_overhead_bench"
if [[ -d "$B/bin" ]]; then
  hvdrun="$B/bin/hvdrun"
else
  hvdrun="$B/launcher/hvdrun"
  export HVD_AGENT_PATH="$B/agent/hvd-agent"
fi
# NCCL: $NCCL_DIR when the caller found it (run_on_device.sh does), else
# PyTorch's on the GPU machine (nvidia.nccl is a namespace package:
# __path__, not __file__), else the toolkit's.
nccl=${NCCL_DIR:-$("$PYTHON" -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null || echo /usr/local/cuda/lib64)}
if [[ -d "$B/lib" ]]; then
  export LD_LIBRARY_PATH="$B/lib:$nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  export LD_LIBRARY_PATH="$nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
failed=0
run() {
  timeout -k 10 "$limit" "$@"
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    failed=1
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
      echo "!! timed out after ${limit}s: $*"
    else
      echo "!! exit $rc: $*"
    fi
  fi
}
echo "== hvd NCCL path vs direct NCCL (1 process)"
run "$bench" --mode=nccl
for np in 2 4; do
  echo "== staged path, $np processes on one GPU"
  run "$hvdrun" -np "$np" "$bench" --mode=staged
done
exit $failed

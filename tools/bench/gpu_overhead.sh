#!/bin/bash
# The GPU measurements, on a machine with a GPU (docs/gpu.md, "Measuring"):
#   1. hvd's NCCL path against ncclAllReduce called directly, same float32 sum
#      allreduce, 1 KiB, 1 MiB and 256 MiB (one process, one GPU);
#   2. ResNet-50's 161 gradients submitted and waited for through the C ABI,
#      against one flat tensor (--mode=resnet);
#   3. the same calls through hvd.torch on CUDA tensors, beside one kernel
#      plus torch.cuda.synchronize(), and ResNet-50's 161 gradients against
#      one flat tensor (torch_gpu_overhead.py);
#   4. the staged path's throughput, 2 and 4 processes sharing GPU 0.
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
# BENCH_TIMEOUT_S (default 180: each of the five runs is killed after it).
# Exit status: 0 when all five runs finished, else 1 (the others still run).
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
here=$(cd "$(dirname "$0")" && pwd)
echo "== ResNet-50's 161 gradients through the C ABI (1 process)"
run "$bench" --mode=resnet --shapes="$here/resnet50_shapes.txt"
echo "== the same through hvd.torch (1 process)"
pydir="$B/python"; [[ -d "$pydir" ]] || pydir="$here/../../python"
libhvd="$B/lib/libhvd.so"; [[ -e "$libhvd" ]] || libhvd="$B/core/libhvd.so"
# PyTorch's own CUDA runtime first (TORCH_CUDART, found by
# run_on_device.sh), so that torch and libhvd.so share one.
LD_LIBRARY_PATH="${TORCH_CUDART:+$TORCH_CUDART:}$LD_LIBRARY_PATH" \
  PYTHONPATH="$pydir${PYTHONPATH:+:$PYTHONPATH}" HVD_LIBRARY="$libhvd" \
  run "$PYTHON" "$here/torch_gpu_overhead.py"
for np in 2 4; do
  echo "== staged path, $np processes on one GPU"
  run "$hvdrun" -np "$np" "$bench" --mode=staged
done
exit $failed

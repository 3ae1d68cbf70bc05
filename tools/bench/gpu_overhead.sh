#!/bin/bash
# The GPU measurements of issue 6, section 3, on a machine with a GPU:
#   1. hvd's NCCL path against ncclAllReduce called directly, same float32 sum
#      allreduce, 1 KiB, 1 MiB and 256 MiB (one process, one GPU);
#   2. the staged path's throughput, 2 and 4 processes sharing GPU 0.
# It cannot run without a GPU. Figures go to docs/performance.md (GPU).
#
#   tools/bench/gpu_overhead.sh [BUNDLE]
#
# BUNDLE: a folder made by core/gpu/bundle_for_device.sh (default
# .device/gpu), which is what a GPU machine without Bazel gets; where Bazel
# exists, `bazel build //core/gpu:gpu_overhead_bench //launcher:hvdrun
# //agent:hvd-agent` and BUNDLE=bazel-bin work too.
set -euo pipefail
B=$(cd "${1:-.device/gpu}" && pwd)
if [[ -x "$B/core/gpu/gpu_overhead_bench" && -d "$B/bin" ]]; then
  bench="$B/core/gpu/gpu_overhead_bench"; hvdrun="$B/bin/hvdrun"
else
  bench="$B/core/gpu/gpu_overhead_bench"; hvdrun="$B/launcher/hvdrun"
  export HVD_AGENT_PATH="$B/agent/hvd-agent"
fi
# NCCL: PyTorch's on the GPU machine, else the toolkit's.
nccl=$(python3 -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null || echo /usr/local/cuda/lib64)
export LD_LIBRARY_PATH="$B/lib:$nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
echo "== hvd NCCL path vs direct NCCL (1 process)"
"$bench" --mode=nccl
for np in 2 4; do
  echo "== staged path, $np processes on one GPU"
  "$hvdrun" -np "$np" "$bench" --mode=staged
done

#!/bin/bash
# Everything the GPU machine has to run for the GPU backend (docs/gpu.md), in
# one command: the GPU tests from the bundle, the PyTorch check at 1, 2 and 4
# processes, and the overhead benchmark. Run from the repository root with the
# bundle made by tools/gpu/bundle_for_device.sh carried at .device/gpu:
#
#   bash tools/gpu/run_on_device.sh [STEP|GROUP ...]       (default: all)
#
# Steps, in order:
#   env             nvidia-smi -L, versions, libraries the bundle resolves
#   cuda_platform   core/gpu/cuda_platform_test (kernels, streams, events)
#   nccl_ops        core/gpu/nccl_ops_test (every op through real NCCL, size 1)
#   gpu_job         core/gpu/gpu_job_test (C ABI processes: 1 NCCL; 2 and 4
#                   sharing GPU 0 on the staged path; a peer that dies)
#   torch1          torch_gpu_check.py as a job of size 1 (NCCL path)
#   torch2, torch4  the same under the bundled hvdrun -np 2 / -np 4 (staged
#                   path: the processes share GPU 0); every collective and
#                   three hvd.DistributedOptimizer training steps on CUDA
#   elastic         tools/gpu/elastic_gpu_check.sh: elastic training on
#                   CUDA tensors, a worker of two killed, then a host added
#   bench           tools/bench/gpu_overhead.sh (hvd NCCL vs direct NCCL at
#                   1 KiB, 1 MiB, 256 MiB; ResNet-50's gradients; the same
#                   through hvd.torch; staged throughput at 2 and 4)
# Groups: tests (env cuda_platform nccl_ops gpu_job), torch (torch1 torch2
# torch4 elastic), all.
#
# Each step runs under `timeout` (its own limit, cut to what is left of
# RUN_BUDGET_S, default 540 s, so that the whole run ends inside the device
# tool's 10 minutes and still writes its summary; a step that no longer fits
# is reported SKIPPED). Writes to $OUT (the device tool's output folder;
# default a new /tmp/hvd-device.* folder): summary.txt (one line per step,
# written as each finishes), env.txt, gpu_overhead.txt (the benchmark
# table), logs.tar.gz (logs/<step>.log and gtest/<step>.xml, packed at the
# end: the device tool brings back at most 8 files). Prints the summary last, after the
# tail of the log of each step that did not pass.
#
# Verdicts: PASS; SKIPPED (gtest skipped GPU tests for want of a GPU, torch
# has no CUDA, no GPU for the benchmark, out of time); FAIL; TIMEOUT. The env
# step FAILs where no GPU is visible. Exit status 0 when no step failed or
# timed out.
#
# Environment: BUNDLE (default .device/gpu), PYTHON (default python3: the one
# with torch and nvidia.nccl), RUN_BUDGET_S, OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
B=$(cd "${BUNDLE:-.device/gpu}" 2>/dev/null && pwd) || B=""
PYTHON=${PYTHON:-python3}
BUDGET=${RUN_BUDGET_S:-540}
OUT=${OUT:-$(mktemp -d /tmp/hvd-device.XXXXXX)}
mkdir -p "$OUT/logs" "$OUT/gtest"
OUT=$(cd "$OUT" && pwd)  # steps run in other folders
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
START=$SECONDS
FAILED=0
NOT_PASSED=()

# ---- which steps ----
ALL=(env cuda_platform nccl_ops gpu_job torch1 torch2 torch4 elastic bench)
steps=()
[[ $# -eq 0 ]] && set -- all
for a in "$@"; do
  case "$a" in
    all) steps+=("${ALL[@]}") ;;
    tests) steps+=(env cuda_platform nccl_ops gpu_job) ;;
    torch) steps+=(torch1 torch2 torch4 elastic) ;;
    env | cuda_platform | nccl_ops | gpu_job | torch1 | torch2 | torch4 | \
      elastic | bench)
      steps+=("$a") ;;
    *) echo "unknown step '$a' (steps: ${ALL[*]}; groups: tests torch all)" >&2
       exit 2 ;;
  esac
done

# A copy that lost its mode bits (the bundle travels as files) still runs.
if [[ -n "$B" ]]; then
  for f in "$B"/core/gpu/* "$B"/tools/bench/* "$B"/bin/*; do
    [[ "$f" == *.py || -x "$f" ]] || chmod u+x "$f" 2>/dev/null
  done
fi

# ---- libraries: the bundle's, NCCL from PyTorch's install ----
py_path() {  # a package folder of nvidia.X (namespace packages: __path__)
  timeout 60 "$PYTHON" -c "import importlib, sys; m = importlib.import_module(sys.argv[1]); print(list(m.__path__)[0])" "$1" 2>/dev/null
}
NCCL_DIR=""
if d=$(py_path nvidia.nccl) && [[ -e "$d/lib/libnccl.so.2" ]]; then
  NCCL_DIR="$d/lib"
elif [[ -e /usr/local/cuda/lib64/libnccl.so.2 ]]; then
  NCCL_DIR=/usr/local/cuda/lib64
fi
# PyTorch's own CUDA runtime goes first for the Python steps, so that torch
# and libhvd.so share the libcudart torch was built with.
TORCH_CUDART=""
for pkg in nvidia.cu13 nvidia.cuda_runtime; do
  if d=$(py_path "$pkg") && [[ -e "$d/lib/libcudart.so.13" ]]; then
    TORCH_CUDART="$d/lib"
    break
  fi
done
LIBS="${B:+$B/lib}${NCCL_DIR:+:$NCCL_DIR}"
# Debian's libstdc++ (lib-cxx/) only where the machine's own is too old.
if [[ -n "$B" ]] &&
   ! LD_LIBRARY_PATH="$LIBS" "$B/core/gpu/cuda_platform_test" --gtest_list_tests >/dev/null 2>&1 &&
   LD_LIBRARY_PATH="$LIBS:$B/lib-cxx" "$B/core/gpu/cuda_platform_test" --gtest_list_tests >/dev/null 2>&1; then
  LIBS="$LIBS:$B/lib-cxx"
fi
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PY_LIBS="${TORCH_CUDART:+$TORCH_CUDART:}$LD_LIBRARY_PATH"
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export PYTHONDONTWRITEBYTECODE=1

HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  HAVE_GPU=1
fi

# ---- running a step ----
record() {  # step verdict detail seconds
  local line
  line=$(printf '%-14s %-8s %5ss  %s' "$1" "$2" "$4" "$3")
  echo "$line" >>"$SUMMARY"
  echo "$line"
  case "$2" in
    FAIL | TIMEOUT) FAILED=1; NOT_PASSED+=("$1") ;;
  esac
}

left() { echo $((BUDGET - (SECONDS - START))); }

# run_step NAME LIMIT_S DIR COMMAND...: runs COMMAND in DIR under timeout,
# output to logs/NAME.log; sets RC and TOOK. RC 200: no time left.
run_step() {
  local name=$1 limit=$2 dir=$3
  shift 3
  local remaining
  remaining=$(left)
  if ((remaining - 5 < 15)); then
    RC=200 TOOK=0
    return
  fi
  ((limit > remaining - 5)) && limit=$((remaining - 5))
  local t0=$SECONDS
  (cd "$dir" && timeout -k 10 "$limit" "$@") >"$OUT/logs/$name.log" 2>&1
  RC=$?
  TOOK=$((SECONDS - t0))
  LIMIT=$limit
}

timed_out() { [[ $RC -eq 124 || $RC -eq 137 ]]; }

need_bundle() {  # step: FAIL it when the bundle is missing
  if [[ -z "$B" || ! -x "$B/core/gpu/cuda_platform_test" ]]; then
    record "$1" FAIL "no bundle at ${BUNDLE:-.device/gpu} (tools/gpu/bundle_for_device.sh)" 0
    return 1
  fi
}

gtest_step() {  # name binary limit
  local name=$1 binary=$2 limit=$3
  need_bundle "$name" || return
  run_step "$name" "$limit" "$B" "./core/gpu/$binary" \
    "--gtest_output=xml:$OUT/gtest/$name.xml"
  local log="$OUT/logs/$name.log"
  if [[ $RC -eq 200 ]]; then record "$name" SKIPPED "out of time (RUN_BUDGET_S=$BUDGET)" 0; return; fi
  if timed_out; then record "$name" TIMEOUT "killed after ${LIMIT}s" "$TOOK"; return; fi
  local passed skipped failed no_gpu
  passed=$(grep -o '^\[  PASSED  \] [0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  skipped=$(grep -o '^\[  SKIPPED \] [0-9]* test' "$log" | grep -o '[0-9]\+' | tail -1)
  failed=$(grep -c '^\[  FAILED  \] .*\.' "$log")
  # Tests skip either for want of a GPU (then the step did not test the GPU:
  # SKIPPED) or because one exists (the no-GPU checks: fine on the GPU).
  no_gpu=$(grep -c '^no usable CUDA device\|^no CUDA device' "$log")
  if [[ $RC -eq 0 ]]; then
    if ((no_gpu > 0)); then
      record "$name" SKIPPED "${passed:-0} passed, $no_gpu GPU test(s) skipped: $(grep -m1 '^no usable CUDA device\|^no CUDA device' "$log" | cut -c1-150)" "$TOOK"
    elif [[ -n "$skipped" ]]; then
      record "$name" PASS "${passed:-0} passed, $skipped skipped (they check the no-GPU case)" "$TOOK"
    else
      record "$name" PASS "${passed:-0} passed" "$TOOK"
    fi
  else
    record "$name" FAIL "exit $RC; $failed failed: $(grep '^\[  FAILED  \] .*\.' "$log" | head -3 | sed 's/^\[  FAILED  \] //' | tr '\n' ' ')" "$TOOK"
  fi
}

torch_step() {  # name np expected-path limit
  local name=$1 np=$2 path=$3 limit=$4
  need_bundle "$name" || return
  local check="$B/tools/gpu/torch_gpu_check.py"
  local -a cmd=("$PYTHON" "$check")
  ((np > 1)) && cmd=("$B/bin/hvdrun" -np "$np" "$PYTHON" "$check")
  LD_LIBRARY_PATH="$PY_LIBS" PYTHONPATH="$B/python${PYTHONPATH:+:$PYTHONPATH}" \
    HVD_LIBRARY="$B/lib/libhvd.so" HVD_LOG_LEVEL=info \
    run_step "$name" "$limit" "$ROOT" "${cmd[@]}"
  local log="$OUT/logs/$name.log"
  if [[ $RC -eq 200 ]]; then record "$name" SKIPPED "out of time (RUN_BUDGET_S=$BUDGET)" 0; return; fi
  if timed_out; then record "$name" TIMEOUT "killed after ${LIMIT}s" "$TOOK"; return; fi
  local passes
  passes=$(grep -c 'rank [0-9]*: PASS' "$log")
  if [[ $RC -eq 0 ]] && grep -q 'SKIPPED:' "$log"; then
    record "$name" SKIPPED "$(grep -m1 -o 'SKIPPED:.*' "$log")" "$TOOK"
  elif [[ $RC -eq 0 && $passes -eq $np ]]; then
    if grep -q "GPU data path $path on GPU" "$log"; then
      record "$name" PASS "$np rank(s) PASS on the $path path" "$TOOK"
    else
      record "$name" FAIL "$np rank(s) PASS but no 'GPU data path $path' in the log" "$TOOK"
    fi
  else
    record "$name" FAIL "exit $RC, $passes of $np rank(s) PASS: $(grep -m2 'FAIL\|Error\|error' "$log" | tr '\n' ' ' | cut -c1-300)" "$TOOK"
  fi
}

env_step() {
  local t0=$SECONDS env="$OUT/env.txt"
  {
    echo "== nvidia-smi -L"
    nvidia-smi -L 2>&1 || true
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv 2>&1 || true
    echo "== glibc: $(ldd --version 2>&1 | head -1)"
    echo "== $PYTHON: $(timeout 60 "$PYTHON" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")' 2>&1 | tail -1)"
    echo "== NCCL dir: ${NCCL_DIR:-NOT FOUND}"
    echo "== PyTorch's CUDA runtime dir (Python steps): ${TORCH_CUDART:-none found}"
    echo "== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    if [[ -n "$B" ]]; then
      echo "== bundle $B: $(du -sh "$B" | cut -f1)"
      for f in "$B"/core/gpu/cuda_platform_test "$B"/lib/libhvd.so "$B"/bin/hvdrun; do
        echo "-- ldd $f"
        ldd "$f" 2>&1 | grep -E '=> not found|nccl|cudart|stdc\+\+' || true
      done
    fi
  } >"$env" 2>&1
  cp "$env" "$OUT/logs/env.log"
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  if [[ -z "$B" ]]; then
    record env FAIL "no bundle at ${BUNDLE:-.device/gpu}" $((SECONDS - t0))
  elif grep -q '=> not found' "$env"; then
    record env FAIL "unresolved libraries: $(grep '=> not found' "$env" | awk '{print $1}' | sort -u | head -5 | tr '\n' ' ')" $((SECONDS - t0))
  elif ! command -v nvidia-smi >/dev/null 2>&1; then
    record env FAIL "no GPU here (no nvidia-smi on PATH)" $((SECONDS - t0))
  elif [[ $HAVE_GPU -eq 0 ]]; then
    record env FAIL "no GPU: nvidia-smi -L says '$(nvidia-smi -L 2>&1 | head -1 | cut -c1-120)'" $((SECONDS - t0))
  else
    record env PASS "$gpus GPU(s): $(nvidia-smi -L | head -1 | cut -c1-80); NCCL ${NCCL_DIR:+from $NCCL_DIR}" $((SECONDS - t0))
  fi
}

elastic_step() {
  need_bundle elastic || return
  if [[ $HAVE_GPU -eq 0 ]]; then
    record elastic SKIPPED "no GPU (the check trains on CUDA tensors)" 0
    return
  fi
  LD_LIBRARY_PATH="$PY_LIBS" PYTHONPATH="$B/python${PYTHONPATH:+:$PYTHONPATH}" \
    HVD_LIBRARY="$B/lib/libhvd.so" \
    run_step elastic 200 "$ROOT" bash tools/gpu/elastic_gpu_check.sh \
    "$B/bin/hvdrun" "$PYTHON"
  local log="$OUT/logs/elastic.log"
  if [[ $RC -eq 200 ]]; then record elastic SKIPPED "out of time (RUN_BUDGET_S=$BUDGET)" 0; return; fi
  if timed_out; then record elastic TIMEOUT "killed after ${LIMIT}s" "$TOOK"; return; fi
  if [[ $RC -eq 0 ]]; then
    record elastic PASS "a worker killed, a host added: $(grep -c ': PASS' "$log") of 2 cases" "$TOOK"
  else
    record elastic FAIL "exit $RC: $(grep -m2 'FAIL\|Error' "$log" | tr '\n' ' ' | cut -c1-300)" "$TOOK"
  fi
}

bench_step() {
  need_bundle bench || return
  if [[ $HAVE_GPU -eq 0 ]]; then
    record bench SKIPPED "no GPU (gpu_overhead_bench needs one)" 0
    return
  fi
  # The script's three runs have their own limits; the step's bounds all.
  BENCH_TIMEOUT_S=170 PYTHON="$PYTHON" NCCL_DIR="$NCCL_DIR" TORCH_CUDART="$TORCH_CUDART" \
    run_step bench 540 "$ROOT" bash tools/bench/gpu_overhead.sh "$B"
  cp "$OUT/logs/bench.log" "$OUT/gpu_overhead.txt" 2>/dev/null
  if [[ $RC -eq 200 ]]; then record bench SKIPPED "out of time (RUN_BUDGET_S=$BUDGET)" 0; return; fi
  if timed_out; then record bench TIMEOUT "killed after ${LIMIT}s (partial table in gpu_overhead.txt)" "$TOOK"; return; fi
  if [[ $RC -eq 0 ]]; then
    record bench PASS "table in gpu_overhead.txt" "$TOOK"
  else
    record bench FAIL "exit $RC: $(grep -m2 '!!\|failed\|error' "$OUT/logs/bench.log" | tr '\n' ' ' | cut -c1-300)" "$TOOK"
  fi
}

echo "hvd GPU run: bundle ${B:-MISSING}, output $OUT, budget ${BUDGET}s, steps: ${steps[*]}"
for s in "${steps[@]}"; do
  case "$s" in
    env) env_step ;;
    cuda_platform) gtest_step cuda_platform cuda_platform_test 90 ;;
    nccl_ops) gtest_step nccl_ops nccl_ops_test 180 ;;
    gpu_job) gtest_step gpu_job gpu_job_test 300 ;;
    torch1) torch_step torch1 1 nccl 150 ;;
    torch2) torch_step torch2 2 staged 180 ;;
    torch4) torch_step torch4 4 staged 210 ;;
    elastic) elastic_step ;;
    bench) bench_step ;;
  esac
done

for s in "${NOT_PASSED[@]}"; do
  echo
  echo "---- tail of logs/$s.log"
  tail -n 25 "$OUT/logs/$s.log" 2>/dev/null | cut -c1-400
done
if [[ -s "$OUT/gpu_overhead.txt" && " ${NOT_PASSED[*]} " != *" bench "* ]]; then
  echo
  echo "---- gpu_overhead.txt"
  grep -v '^\[hvd\|NCCL INFO' "$OUT/gpu_overhead.txt" | tail -n 30 | cut -c1-200
fi
# The device tool brings back at most 8 files from $OUT: logs and gtest XML
# travel as one archive.
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs gtest && rm -rf "$OUT/logs" "$OUT/gtest"
echo
echo "==== summary ($((SECONDS - START))s; files in $OUT: $(cd "$OUT" && echo *))"
cat "$SUMMARY"
exit $FAILED

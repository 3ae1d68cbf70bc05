#!/bin/bash
# Elastic training on CUDA tensors on one GPU machine, which has no SSH
# hosts: hvdrun takes "localhost" and "127.0.0.2" for two hosts, both
# started locally, one worker each, sharing the GPU (the staged path).
# python/tests/elastic_train_script.py trains with ELASTIC_DEVICE=cuda:
#   kill  both hosts from the start; the second host's worker SIGKILLs itself
#         before step 6: the survivor goes on alone (NCCL at one rank);
#   add   the job starts on localhost alone; the discovery script lists
#         127.0.0.2 too once 5 steps are logged: a second worker joins.
# Each case checks the final state of every worker: the last step reached,
# every step trained once (no committed step lost or done twice), the sizes.
#
#   tools/gpu/elastic_gpu_check.sh HVDRUN [PYTHON]
#
# ELASTIC_DEVICE=cpu runs the same on CPU tensors (where no GPU is).
#
# Exit 0 when both cases hold. tools/gpu/run_on_device.sh runs it as its
# "elastic" step with the bundle's hvdrun.
set -uo pipefail
HVDRUN=${1:?usage: elastic_gpu_check.sh HVDRUN [PYTHON]}
PYTHON=${2:-python3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SCRIPT="$ROOT/python/tests/elastic_train_script.py"
WORK=$(mktemp -d /tmp/hvd-elastic-gpu.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
STEPS=40
export ELASTIC_STEPS=$STEPS ELASTIC_SLEEP=0.1 ELASTIC_DEVICE=${ELASTIC_DEVICE-cuda}
pass_env=(-x ELASTIC_LOG -x ELASTIC_STEPS -x ELASTIC_SLEEP -x ELASTIC_FAIL
          -x ELASTIC_DEVICE -x PYTHONPATH -x HVD_LIBRARY -x LD_LIBRARY_PATH)

# check CASE WORKERS: every worker's final line says the last step, with
# every step trained once, in a job of WORKERS. Prints hvdrun's lines of
# the case, and on failure the end of the whole output.
check() {
  grep '^hvdrun' "$WORK/$1.out"
  if ! "$PYTHON" - "$WORK/$1.log" "$2" "$STEPS" <<'EOF'
import json, sys
log, workers, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    finals = [json.loads(l) for l in open(log + ".final")]
    sizes = [json.loads(l)["size"] for l in open(log)]
except OSError as e:
    print("%s: FAIL: %s" % (log.rsplit("/", 1)[-1], e))
    sys.exit(1)
ok = len(finals) == workers and all(
    f["step"] == steps and f["done"] == steps and f["size"] == workers
    for f in finals)
print("%s: %s; sizes by step %s; final %s" % (
    log.rsplit("/", 1)[-1], "PASS" if ok else "FAIL", sizes, finals))
sys.exit(0 if ok else 1)
EOF
  then
    echo "-- the end of the $1 case's output:"
    tail -n 40 "$WORK/$1.out"
    return 1
  fi
}

failed=0
echo "== kill: a worker of two SIGKILLed, the survivor goes on"
export ELASTIC_LOG="$WORK/kill.log" ELASTIC_FAIL="w1:6:kill"
timeout -k 5 120 "$HVDRUN" -H localhost:1,127.0.0.2:1 --min-np 1 -np 2 \
  "${pass_env[@]}" "$PYTHON" "$SCRIPT" >"$WORK/kill.out" 2>&1
check kill 1 || failed=1

echo "== add: a host appears in discovery, its worker joins"
cat >"$WORK/discover.sh" <<EOF
#!/bin/sh
echo localhost:1
[ "\$(wc -l < "$WORK/add.log" 2>/dev/null || echo 0)" -ge 5 ] && echo 127.0.0.2:1
exit 0
EOF
chmod +x "$WORK/discover.sh"
export ELASTIC_LOG="$WORK/add.log" ELASTIC_FAIL=""
timeout -k 5 120 "$HVDRUN" --host-discovery-script "$WORK/discover.sh" \
  --min-np 1 --max-np 2 -np 1 "${pass_env[@]}" "$PYTHON" "$SCRIPT" \
  >"$WORK/add.out" 2>&1
check add 2 || failed=1
exit $failed

#!/bin/bash
# A cached step agreed by one exchange among the ranks against the gather
# through rank 0: a 4 KiB allreduce called and waited for in a loop
# (hvd_bench, C ABI), alternating HVD_CACHED_EXCHANGE=0 and =1 in each
# round, for each process count. Prints every run's median per call and,
# per count, the median over rounds of each setting and their ratio.
# Run from the source tree after
#   bazel build -c opt //core:libhvd.so //launcher:hvdrun //agent:hvd-agent \
#       //tools/bench:hvd_bench
#   tools/bench/cached_exchange.sh [--rounds 4] [--np "2 4 8"] [--iters 20000]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=4
NPS="2 4 8"
ITERS=20000
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --np) NPS="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    *) echo "cached_exchange.sh: unknown flag $1 (--rounds, --np, --iters)" >&2
       exit 2 ;;
  esac
done
HVDRUN=bazel-bin/launcher/hvdrun
BENCH=bazel-bin/tools/bench/hvd_bench
export HVD_AGENT_PATH="$PWD/bazel-bin/agent/hvd-agent"
for f in "$HVDRUN" "$HVD_AGENT_PATH" "$BENCH"; do
  [[ -x "$f" ]] || { echo "missing $f: build it first (see the top of $0)" >&2
                     exit 1; }
done
# One run: rank 0's median microseconds per call.
run() {  # run NP EXCHANGE
  HVD_CACHED_EXCHANGE="$2" "$HVDRUN" -np "$1" -x HVD_CACHED_EXCHANGE \
      "$BENCH" --ops allreduce -b 4K -e 4K -n "$ITERS" \
      -w $((ITERS / 20)) -c 0 2>&1 |
    awk '/^\[0\]<stdout>: +allreduce/ {print $5}'
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for np in $NPS; do
  off=() on=()
  for ((r = 0; r < ROUNDS; r++)); do
    a=$(run "$np" 0); b=$(run "$np" 1)
    [[ -n "$a" && -n "$b" ]] || { echo "np $np: a run failed" >&2; exit 1; }
    off+=("$a"); on+=("$b")
    echo "np $np round $r: gather ${a} us, exchange ${b} us"
  done
  m0=$(printf '%s\n' "${off[@]}" | median)
  m1=$(printf '%s\n' "${on[@]}" | median)
  echo "np $np: gather ${m0} us, exchange ${m1} us, ratio" \
       "$(awk -v a="$m1" -v b="$m0" 'BEGIN {printf "%.2f", a / b}')" \
       "(load $(cut -d' ' -f1-3 /proc/loadavg))"
done

#!/bin/bash
# Large allreduces with their last step received past the caches
# (HVD_STREAMING_STORE_BYTES, default 16 MiB) against without (=0), 2
# processes, alternating in each round: busbw at 16, 32 and 64 MiB in place
# (hvd_bench, C ABI), ResNet-50's gradients and their flat tensor
# (fusion_bench), and the one-core memcpy rate of the same round
# (memcpy_rate). Prints every round and the medians over rounds.
# Run from the source tree after
#   bazel build -c opt //core:libhvd.so //launcher:hvdrun //agent:hvd-agent \
#       //tools/bench:hvd_bench //tools/bench:fusion_bench \
#       //tools/bench:memcpy_rate
#   tools/bench/streaming_stores.sh [--rounds 5]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=5
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    *) echo "streaming_stores.sh: unknown flag $1 (--rounds)" >&2; exit 2 ;;
  esac
done
HVDRUN=bazel-bin/launcher/hvdrun
BIN=bazel-bin/tools/bench
export HVD_AGENT_PATH="$PWD/bazel-bin/agent/hvd-agent"
for f in "$HVDRUN" "$HVD_AGENT_PATH" "$BIN/hvd_bench" "$BIN/fusion_bench" \
    "$BIN/memcpy_rate"; do
  [[ -x "$f" ]] || { echo "missing $f: build it first (see the top of $0)" >&2
                     exit 1; }
done
# One run with HVD_STREAMING_STORE_BYTES=$1: "busbw16 busbw32 busbw64
# step_ms flat_ms" (GB/s, GB/s, GB/s, ms, ms).
run() {
  local bw step
  bw=$(HVD_STREAMING_STORE_BYTES="$1" "$HVDRUN" -np 2 \
      -x HVD_STREAMING_STORE_BYTES "$BIN/hvd_bench" --ops allreduce \
      -b 16M -e 64M -n 20 -c 0 2>&1 |
    awk '/^\[0\]<stdout>: +allreduce/ {printf "%s ", $8}')
  step=$(HVD_STREAMING_STORE_BYTES="$1" "$HVDRUN" -np 2 \
      -x HVD_STREAMING_STORE_BYTES "$BIN/fusion_bench" --steps 15 2>&1 |
    awk '/^\[0\]<stdout>:(step|flat) / {printf "%s ", $3}')
  echo "$bw$step"
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
: > /tmp/streaming_stores.$$
for ((r = 0; r < ROUNDS; r++)); do
  off=$(run 0); on=$(run $((16 << 20)))
  mem=$("$BIN/memcpy_rate" | awk '{print $4}')
  [[ $(wc -w <<< "$off $on") == 10 ]] || {
    echo "round $r: a run failed ($off / $on)" >&2; exit 1; }
  echo "round $r: off $off| on $on| memcpy $mem GB/s"
  echo "$off $on $mem" >> /tmp/streaming_stores.$$
done
names=(busbw16M busbw32M busbw64M resnet_step_ms resnet_flat_ms)
printf '%-16s %8s %8s %7s\n' figure off on on/off
for i in 0 1 2 3 4; do
  a=$(awk -v c=$((i + 1)) '{print $c}' /tmp/streaming_stores.$$ | median)
  b=$(awk -v c=$((i + 6)) '{print $c}' /tmp/streaming_stores.$$ | median)
  printf '%-16s %8s %8s %7s\n' "${names[$i]}" "$a" "$b" \
      "$(awk -v a="$b" -v b="$a" 'BEGIN {printf "%.3f", a / b}')"
done
mem=$(awk '{print $11}' /tmp/streaming_stores.$$ | median)
for c in 3 8; do
  awk -v c=$c -v m="$mem" '{print $c}' /tmp/streaming_stores.$$ | median |
    awk -v m="$mem" -v c=$c '{printf "64 MiB busbw / memcpy (%s): %.3f\n",
        c == 3 ? "off" : "on", $1 / m}'
done
awk '{print $4 / $5, $9 / $10}' /tmp/streaming_stores.$$ |
  awk '{print $1 > "/dev/stderr"; print $2}' 2>/tmp/streaming_stores.off.$$ |
  median | awk '{printf "resnet step/flat on: %.3f\n", $1}'
median < /tmp/streaming_stores.off.$$ |
  awk '{printf "resnet step/flat off: %.3f\n", $1}'
echo "memcpy ${mem} GB/s (median); load $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f /tmp/streaming_stores.$$ /tmp/streaming_stores.off.$$

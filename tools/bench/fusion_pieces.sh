#!/bin/bash
# What a fused step's layout costs, apart from the number of tensors: the
# fusion benchmark (fusion_bench, C ABI, 2 processes) over four layouts of
# ResNet-50's 25,557,032 float32 elements, each against its flat tensor:
#   two       2 equal tensors (the floor: one piece boundary)
#   even53    53 equal tensors: 52 boundaries inside the ring's messages
#   tiny161   161 tensors: 2 halves and 159 of 64 elements (the fusion
#             buffer takes those): ResNet's submission count, 3 pieces
#   resnet    ResNet-50's own 161 shapes (52 reduced where they are)
# each with its gradients laid out in parameter order (the step, which
# submits them in backward order, walks them from the top down) and in
# backward order (it walks them upward, as its flat reference does):
# fusion_bench --layout. Large tensors are reduced where they are, as
# pieces of one collective, and no message crosses a piece; so `even53`
# against `two` is the cost of the boundaries and of the walk's order, and
# `tiny161` against `two` that of the submissions.
# Runs alternate in each round; prints each run's step/flat median of
# pairs, and per layout the median over rounds.
# Run from the source tree after
#   bazel build -c opt //core:libhvd.so //launcher:hvdrun //agent:hvd-agent \
#       //tools/bench:fusion_bench
#   tools/bench/fusion_pieces.sh [--rounds 4] [--steps 20]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=4
STEPS=20
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    *) echo "fusion_pieces.sh: unknown flag $1 (--rounds, --steps)" >&2
       exit 2 ;;
  esac
done
HVDRUN=bazel-bin/launcher/hvdrun
BENCH=bazel-bin/tools/bench/fusion_bench
export HVD_AGENT_PATH="$PWD/bazel-bin/agent/hvd-agent"
for f in "$HVDRUN" "$HVD_AGENT_PATH" "$BENCH"; do
  [[ -x "$f" ]] || { echo "missing $f: build it first (see the top of $0)" >&2
                     exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
total=25557032
{ echo $((total / 2)); echo $((total - total / 2)); } > "$dir/two"
{ for _ in $(seq 52); do echo $((total / 53)); done
  echo $((total - 52 * (total / 53))); } > "$dir/even53"
half=$(((total - 159 * 64) / 2))
{ echo "$half"; echo $((total - 159 * 64 - half))
  for _ in $(seq 159); do echo 64; done; } > "$dir/tiny161"
cp tools/bench/resnet50_shapes.txt "$dir/resnet"
LAYOUTS="two even53 tiny161 resnet"
ORDERS="parameter backward"
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for ((r = 0; r < ROUNDS; r++)); do
  for layout in $LAYOUTS; do
    for order in $ORDERS; do
      pairs=$("$HVDRUN" -np 2 "$BENCH" --shapes "$dir/$layout" \
                  --layout "$order" --steps "$STEPS" 2>&1 |
              awk '/^\[0\].*pairs step\/flat median/ {print $NF}')
      [[ -n "$pairs" ]] || { echo "$layout $order: the run failed" >&2
                             exit 1; }
      echo "$pairs" >> "$dir/$layout.$order.pairs"
      echo "round $r $layout in $order order: step/flat $pairs"
    done
  done
done
for layout in $LAYOUTS; do
  for order in $ORDERS; do
    echo "$layout in $order order: median step/flat" \
         "$(median < "$dir/$layout.$order.pairs") over $ROUNDS rounds"
  done
done
echo "(load $(cut -d' ' -f1-3 /proc/loadavg))"

#!/bin/bash
# What hvd's Python bindings add to a collective, against the C ABI, in the
# same run: 2 processes on this host, ROUNDS rounds, each running the C ABI
# anchors (hvd_bench at 4 KiB and 64 MiB, fusion_bench on ResNet-50's
# gradients) and python_overhead.py (ctypes floor, hvd.numpy, hvd.torch in
# place and out of place, ResNet-50 gradients vs flat through hvd.torch).
# Prints per figure the median over rounds of each run's median, and the
# ratios. Run from the source tree after
#   bazel build //core:libhvd.so //launcher:hvdrun //agent:hvd-agent \
#       //tools/bench:hvd_bench //tools/bench:fusion_bench
#   tools/bench/python_overhead.sh [--rounds 3] [--out DIR] [--before PYDIR]
# --before PYDIR: also run python_overhead.py, in every round, with the
# bindings (hvd package) found in PYDIR on this library, as "before".
# --summarize-only: print the table of an earlier --out DIR, run nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3
BEFORE=
SUMMARIZE_ONLY=0
OUT=
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --out) OUT="$2"; mkdir -p "$OUT"; shift 2 ;;
    --before) BEFORE="$(cd "$2" && pwd)"; shift 2 ;;
    --summarize-only) SUMMARIZE_ONLY=1; shift ;;
    *) echo "python_overhead.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
if [[ -z $OUT ]]; then
  if ((SUMMARIZE_ONLY)); then
    echo "python_overhead.sh: --summarize-only needs --out DIR (an earlier" \
         "run's logs)" >&2
    exit 2
  fi
  # The run's logs, kept: the last line names the directory.
  OUT=$(mktemp -d /tmp/python_overhead.XXXXXX)
fi
PY="${HVD_PYTHON:-/usr/bin/python3}"
HVDRUN=bazel-bin/launcher/hvdrun
export HVD_AGENT_PATH="$PWD/bazel-bin/agent/hvd-agent"
export HVD_LIBRARY="$PWD/bazel-bin/core/libhvd.so"
NOW_PATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH="$NOW_PATH"
for f in "$HVDRUN" "$HVD_AGENT_PATH" bazel-bin/core/libhvd.so \
    bazel-bin/tools/bench/hvd_bench bazel-bin/tools/bench/fusion_bench; do
  [[ -x "$f" || -f "$f" ]] || { echo "missing $f: build it first" >&2; exit 1; }
done
run() {  # run NAME CMD...: rank 0's lines of stdout into OUT/NAME.txt
  local name="$1"; shift
  "$HVDRUN" -np 2 "$@" > "$OUT/$name.log" 2>&1 \
    || { echo "$name failed, see $OUT/$name.log" >&2; exit 1; }
  sed -n 's/^\[0\]<stdout>://p' "$OUT/$name.log" > "$OUT/$name.txt"
}
for ((r = 0; r < ROUNDS && !SUMMARIZE_ONLY; r++)); do
  echo "round $r ($(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/machine.txt"
  run "c_small-$r" bazel-bin/tools/bench/hvd_bench --ops allreduce -b 4K -e 4K \
      -n 2000 -w 200 -c 0
  run "py-$r" "$PY" tools/bench/python_overhead.py
  if [[ -n "$BEFORE" ]]; then
    PYTHONPATH="$BEFORE" run "before-$r" "$PY" tools/bench/python_overhead.py
  fi
  run "c_big-$r" bazel-bin/tools/bench/hvd_bench --ops allreduce -b 64M -e 64M \
      -n 15 -w 3 -c 0
  run "c_fusion-$r" bazel-bin/tools/bench/fusion_bench --steps 20
done
"$PY" - "$OUT" "$ROUNDS" <<'PYEOF'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {}  # figure -> [median per round, us]
def add(name, us):
    runs.setdefault(name, []).append(us)
for r in range(rounds):
    for kind, label in (("c_small", "4K"), ("c_big", "64M")):
        for line in open("%s/%s-%d.txt" % (out, kind, r)):
            f = line.split()
            if f and f[0] == "allreduce":
                add("C_ABI_" + label, float(f[3]))
    for line in open("%s/c_fusion-%d.txt" % (out, r)):
        m = re.match(r"(step|flat)\s+median ([\d.]+) ms", line)
        if m:
            add("C_ABI_resnet_" + m.group(1), float(m.group(2)) * 1e3)
        m = re.match(r"pairs step/flat median ([\d.]+)", line)
        if m:
            add("C_ABI_resnet_pairs", float(m.group(1)))
    for line in open("%s/py-%d.txt" % (out, r)):
        name, med, _ = line.split()
        add(name, float(med))
    try:
        for line in open("%s/before-%d.txt" % (out, r)):
            name, med, _ = line.split()
            add("before:" + name, float(med))
    except FileNotFoundError:
        pass
med = {k: statistics.median(v) for k, v in runs.items()}
def fmt(us):
    return "%10.1f us" % us if us < 1e4 else "%10.2f ms" % (us / 1e3)
print("\n== per call, medians over %d rounds (2 processes, float32) ==" % rounds)
print("%-22s %13s %13s  %s" % ("", "4 KiB", "64 MiB", "ratios to C ABI (4K, 64M)"))
names = ["C_ABI", "ctypes", "ctypes_oop", "numpy", "torch_inplace",
         "torch_outofplace"]
names += [n + "_py" for n in names[3:6]] + ["before:" + n for n in names[3:6]]
for name in names:
    a, b = med.get(name + "_4K"), med.get(name + "_64M")
    if a is None:
        continue
    print("%-22s %s %s  %5.2fx %5.2fx" % (
        name, fmt(a), fmt(b), a / med["C_ABI_4K"], b / med["C_ABI_64M"]))
def floor_ratio(prefix, name, label):
    """Median over rounds of name / the ctypes floor of the same process
    (they alternate call by call, so load hits both alike)."""
    a = runs.get(prefix + name + "_" + label)
    b = runs.get(prefix + "ctypes_" + label)
    if not a or not b:
        return None
    return statistics.median(x / y for x, y in zip(a, b))
print("\nratios to the ctypes floor of the same process, median over rounds "
      "of per-round ratios:")
for prefix in ("", "before:"):
    for name in names[3:9]:  # the bindings, with and without the C module
        r4, r64 = (floor_ratio(prefix, name, l) for l in ("4K", "64M"))
        if r4 is not None:
            print("  %-22s 4K %5.2fx   64M %5.2fx" % (prefix + name, r4, r64))
print("%-22s %13s %13s  %5.2fx (64 MiB)" % (
    "torch out/in place", "", "",
    med["torch_outofplace_64M"] / med["torch_inplace_64M"]))
print("%-22s %13s %13s  %5.2fx (64 MiB)" % (
    "ctypes out/in place", "", "",
    med["ctypes_oop_64M"] / med["ctypes_64M"]))
if "before:torch_inplace_64M" in med:
    print("%-22s %13s %13s  %5.2fx (64 MiB)" % (
        "before: torch out/in", "", "",
        med["before:torch_outofplace_64M"] / med["before:torch_inplace_64M"]))
print("\n== ResNet-50's 161 gradients vs one flat tensor ==")
# (prefix, step, label, its step-by-step pairs or None)
for who, step, label, pairs in (
        ("C_ABI_resnet", "_step", "C ABI (fusion_bench)", "_pairs"),
        ("resnet", "_step", "hvd.torch", "_pairs"),
        ("resnet", "_step_py", "hvd.torch, C module off", None),
        ("resnet", "_optimizer", "DistributedOptimizer", "_optimizer_pairs"),
        ("before:resnet", "_step", "before: hvd.torch", "_pairs"),
        ("before:resnet", "_optimizer", "before: DistributedOpt.",
         "_optimizer_pairs")):
    if who + step not in med:
        continue
    s, f = med[who + step], med[who + "_flat"]
    print("%-22s step %s  flat %s  ratio %.3f  (per round: %s)" % (
        label, fmt(s), fmt(f), s / f, " ".join(
            "%.3f" % (a / b) for a, b in zip(runs[who + step],
                                              runs[who + "_flat"]))))
    pairs = who + pairs if pairs else None
    if pairs in runs:
        print("%-22s each step over the flat call after it: median %.3f "
              "(per round: %s)" % ("", med[pairs], " ".join(
                  "%.3f" % x for x in runs[pairs])))
print("\nraw per-round medians (us; the pairs' ratios as they are):")
for k in sorted(runs):
    form = "%.3f" if k.endswith("_pairs") else "%.1f"
    print("  %-22s %s" % (k, " ".join(form % x for x in runs[k])))
PYEOF
echo "logs: $OUT"

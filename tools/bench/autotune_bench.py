#!/usr/bin/python3
"""What hvdrun --autotune recovers: ResNet-50's gradient allreduces
(fusion_bench, through the C ABI, 2 ranks on this host) under static
settings, and under the autotuner started from deliberately wrong values
and from the defaults, in the same run.

Every round runs each setting once, in turn, so that drift of a shared
machine falls on all of them. A run's figure is fusion_bench's median step
(the 161 gradients, submitted as backpropagation does) over its timed
steps. An autotuned run first trains --tune-steps untimed steps, enough for
the tuner to finish (warmup 3 + 20 samples of 10 steps, and a partial step
at each change: under 260), then times --steps steps at the frozen values.

  /usr/bin/python3 tools/bench/autotune_bench.py [--rounds 5] [--steps 60]
      [--tune-steps 280] [--no-build]

Prints each run, then per setting the median over rounds and its ratio to
the best static setting's median; for an autotuned run, the values it
froze (from its --autotune-log-file).
"""

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile

from compare import REPO, built  # tools/bench, beside this

TARGETS = ["//launcher:hvdrun", "//agent:hvd-agent",
           "//tools/bench:fusion_bench"]
STEP_RE = re.compile(r"^\[0\]<stdout>:step  median ([0-9.]+) ms", re.M)

MIB = 1 << 20
# The wrong start: a small fusion buffer, a slow cycle and chunks too large
# to pipeline between two ranks.
WRONG = {"HVD_FUSION_THRESHOLD": str(MIB), "HVD_CYCLE_TIME": "20",
         "HVD_CHUNK_BYTES": str(16 * MIB)}
STATIC = [
    ("default", {}),
    ("wrong: fusion 1 MiB, cycle 20 ms, chunk 16 MiB", WRONG),
    ("chunk 256 KiB", {"HVD_CHUNK_BYTES": str(256 << 10)}),
    ("chunk 4 MiB", {"HVD_CHUNK_BYTES": str(4 * MIB)}),
    ("fusion 8 MiB", {"HVD_FUSION_THRESHOLD": str(8 * MIB)}),
    ("no fusion", {"HVD_FUSION_THRESHOLD": "0"}),
]
TUNED = [
    ("autotune from wrong", dict(WRONG, HVD_AUTOTUNE_HOLD_SET="0")),
    ("autotune from default", {}),
]


def run(binaries, env, steps, warmup, log_file=None):
    hvdrun, agent, bench = binaries
    cmd = [hvdrun, "--agent-path", agent, "-np", "2", "-H", "localhost:2"]
    if log_file:
        cmd += ["--autotune", "--autotune-log-file", log_file]
    cmd += [bench, "--shapes", os.path.join(REPO, "tools/bench/resnet50_shapes.txt"),
            "--steps", str(steps), "--warmup", str(warmup)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, **env))
    m = STEP_RE.search(r.stdout)
    if r.returncode != 0 or not m:
        sys.exit("run failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                              r.stdout, r.stderr))
    return float(m.group(1))


def frozen_values(log_file):
    with open(log_file) as f:
        rows = list(csv.DictReader(f))
    if not rows or rows[-1]["phase"] != "final":
        return "(not frozen: raise --tune-steps)"
    last = rows[-1]
    return ("fusion %.1f MiB, cycle %.2f ms, small %d KiB, chunk %d KiB "
            "after %s samples" % (
                int(last["fusion_threshold_bytes"]) / MIB,
                int(last["cycle_time_us"]) / 1000,
                int(last["small_message_bytes"]) >> 10,
                int(last["chunk_bytes"]) >> 10, last["sample"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--tune-steps", type=int, default=280)
    p.add_argument("--no-build", action="store_true")
    a = p.parse_args()
    binaries = built(TARGETS, build=not a.no_build)
    figures = {name: [] for name, _ in STATIC + TUNED}
    chosen = {}
    tmp = tempfile.mkdtemp(prefix="hvd-autotune-")
    print("%-5s %-48s %10s" % ("round", "setting", "step ms"))
    for i in range(a.rounds):
        for name, env in STATIC + TUNED:
            tuned = (name, env) in TUNED
            log_file = os.path.join(tmp, "%d-%s.csv" % (i, name.split()[-1]))
            ms = run(binaries, env, a.steps, a.tune_steps if tuned else 3,
                     log_file if tuned else None)
            figures[name].append(ms)
            if tuned:
                chosen.setdefault(name, []).append(frozen_values(log_file))
            print("%-5d %-48s %10.2f" % (i, name, ms))
            sys.stdout.flush()
    best = min(statistics.median(figures[n]) for n, _ in STATIC)
    print("\n%-48s %10s %8s" % ("setting (median over rounds)", "step ms",
                               "/ best"))
    for name, _ in STATIC + TUNED:
        m = statistics.median(figures[name])
        print("%-48s %10.2f %8.3f" % (name, m, m / best))
    for name, values in chosen.items():
        for i, v in enumerate(values):
            print("%s, round %d: %s" % (name, i, v))


if __name__ == "__main__":
    main()

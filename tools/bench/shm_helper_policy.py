"""What the shared-memory helper's scheduling class costs or saves, 2+
processes under hvdrun, in one run:

    hvdrun -np 2 /usr/bin/python3 tools/bench/shm_helper_policy.py \
        [--blocks N] [--block-steps N] [--json PATH]

Each rank's helper thread ("hvd-shm-helper") stands by under SCHED_BATCH,
so a peer's nudge never preempts the rank's own thread. This alternates
blocks of steps with the helpers of every rank put back under SCHED_OTHER
("preempting", as before) and under SCHED_BATCH ("standby", as now), by
thread name from outside the library, the ranks switching at the same step
(each step is a collective). In each step: a 64 MiB float32 allreduce in
place through the C ABI (the ctypes floor: async, wait, release) and
through hvd.torch, and ResNet-50's 161 gradients as DistributedOptimizer
submits them against one flat tensor of their size (Average). The first
step of each block is not counted. Rank 0 prints per figure the median
under each policy and the ratio standby / preempting (below 1: faster).
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

import hvd.torch as ht

import shapes_file  # beside this script
from python_overhead import (_Ctypes, _emulated_optimizer_step,
                             _gradients)

HELPER = "hvd-shm-helper"


def set_helper_policy(policy):
    """Puts every thread of this process named HELPER under `policy`;
    how many there were."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                if f.read().strip() != HELPER:
                    continue
        except OSError:  # the thread ended meanwhile
            continue
        try:
            os.sched_setscheduler(int(tid), policy, os.sched_param(0))
        except ProcessLookupError:
            continue
        except PermissionError as e:
            sys.exit("cannot change the scheduling class of %s (%s)" %
                     (HELPER, e))
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--block-steps", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ht.init()
    big = np.zeros((64 << 20) // 4, dtype=np.float32)
    c_abi = _Ctypes(big, name=b"big_c")
    big_t = torch.zeros((64 << 20) // 4)
    grads, flat = _gradients(shapes_file.read(shapes_file.RESNET50), True)
    figures = {
        "64M_c_abi": c_abi,
        "64M_torch": lambda: ht.allreduce_(big_t, op=ht.Sum, name="big_t"),
        "resnet_step": _emulated_optimizer_step(grads),
        "resnet_flat": lambda: ht.allreduce_(flat, op=ht.Average,
                                             name="flat"),
    }
    policies = {"preempting": os.SCHED_OTHER, "standby": os.SCHED_BATCH}
    times = {p: {f: [] for f in figures} for p in policies}
    pairs = {p: [] for p in policies}
    for block in range(2 * args.blocks):
        policy = list(policies)[block % 2]
        if set_helper_policy(policies[policy]) == 0:
            sys.exit("no thread named %s: is the shared-memory transport "
                     "in use (ranks on one host, HVD_SHM not 0)?" % HELPER)
        for step in range(args.block_steps):
            took = {}
            for name, fn in figures.items():
                t0 = time.perf_counter()
                fn()
                took[name] = time.perf_counter() - t0
            if step == 0:
                continue
            for name, dt in took.items():
                times[policy][name].append(dt)
            pairs[policy].append(took["resnet_step"] / took["resnet_flat"])
    set_helper_policy(os.SCHED_BATCH)
    results = {}
    for name in figures:
        pre = statistics.median(times["preempting"][name]) * 1e3
        now = statistics.median(times["standby"][name]) * 1e3
        results[name] = {"preempting_ms": pre, "standby_ms": now,
                         "ratio": now / pre}
    results["resnet_pairs"] = {
        "preempting": statistics.median(pairs["preempting"]),
        "standby": statistics.median(pairs["standby"])}
    if ht.rank() == 0:
        print("%-12s %14s %14s %8s" % ("figure", "preempting ms",
                                      "standby ms", "ratio"))
        for name in figures:
            r = results[name]
            print("%-12s %14.2f %14.2f %8.3f" % (
                name, r["preempting_ms"], r["standby_ms"], r["ratio"]))
        p = results["resnet_pairs"]
        print("ResNet-50 step / flat, median of pairs: preempting %.3f, "
              "standby %.3f" % (p["preempting"], p["standby"]))
        sys.stdout.flush()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    ht.shutdown()


if __name__ == "__main__":
    main()

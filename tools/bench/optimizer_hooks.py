"""Where DistributedOptimizer's time per gradient goes, on ResNet-50's 161
gradients, with warm caches and with caches emptied before each step (a
100 MB copy, as the step's own allreduce empties them on 2 processes):

    hvdrun -np 1 /usr/bin/python3 tools/bench/optimizer_hooks.py [--steps N]

Prints, per gradient (medians over steps, rank 0):
  hooks        the 161 hooks backward would run, in its order
  synchronize  the optimizer's synchronize() after them
  C calls      _fastpath.submit_kept + synchronize per gradient alone (the
               C module reading the tensor, the core's submission, its
               cycle and the wait), without the optimizer's Python
  p.grad       reading p.grad, .requires_grad and .is_sparse
In a job of one the step moves no data, so what is timed is the work per
gradient; on 2 processes synchronize() includes the allreduce itself.
"""

import argparse
import statistics
import time

import torch

import hvd.torch as ht
from hvd import _fastpath

import shapes_file  # beside this script
from python_overhead import _distributed_optimizer, _gradients


def _timed(fn, steps, flush):
    """Median seconds of fn() over `steps` calls, each after flush()."""
    times = []
    for _ in range(steps):
        flush()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    ht.init()
    grads, _ = _gradients(shapes_file.read(), shared=False)
    opt, hooks = _distributed_optimizer(grads)
    backward = grads[::-1]
    kept = [_fastpath.in_place_options("c%d" % i, ht.Average, 1.0, 1.0,
                                       ht.global_process_set)
            for i in range(len(grads))]
    copy_from, copy_to = torch.ones(26_000_000), torch.empty(26_000_000)
    cold = {"warm": lambda: None, "cold": lambda: copy_to.copy_(copy_from)}

    def run_hooks():
        for hook in hooks:
            hook()

    def c_calls():
        handles = [_fastpath.submit_kept(g, k)
                   for g, k in zip(backward, kept)]
        for handle in handles:
            ht.synchronize(handle)

    params = [p for group in opt.param_groups for p in group["params"]]

    def read_grads():
        for p in params:
            g = p.grad
            g.requires_grad
            g.is_sparse

    n = len(grads)
    for caches, flush in cold.items():
        split = []
        for _ in range(args.steps):
            flush()
            t0 = time.perf_counter()
            run_hooks()
            t1 = time.perf_counter()
            opt.synchronize()
            split.append((t1 - t0, time.perf_counter() - t1))
        rows = {
            "hooks": statistics.median(s[0] for s in split),
            "synchronize": statistics.median(s[1] for s in split),
            "C calls": _timed(c_calls, args.steps, flush),
            "p.grad": _timed(read_grads, args.steps, flush),
        }
        if ht.rank() == 0:
            print("%s caches (%d processes, %d gradients): %s" % (
                caches, ht.size(), n,
                ", ".join("%s %.2f us" % (name, t / n * 1e6)
                          for name, t in rows.items())))
    ht.shutdown()


if __name__ == "__main__":
    main()

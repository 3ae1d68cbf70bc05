"""Per-call cost of hvd's Python bindings, 2+ processes under hvdrun.

    hvdrun -np 2 /usr/bin/python3 tools/bench/python_overhead.py [--iters N]
        [--big-iters N] [--steps N] [--json PATH]

Measures, in one process, what the Python layer adds to an allreduce:
  ctypes     hvd_allreduce_async + hvd_wait + hvd_release through ctypes on a
             DLTensor built once (the floor of any ctypes binding), in place
  ctypes_oop the same out of place, into an output allocated once (warm)
  numpy      hvd.numpy.allreduce (out of place, the numpy API's only form)
  torch_     hvd.torch.allreduce_ (in place)
  torch      hvd.torch.allreduce (out of place, autograd Function included)
  ..._py     the same three with the optional C module (hvd._speedups) off
at 4 KiB and 64 MiB (float32, Sum), the modes alternating call by call; and
ResNet-50's 161 gradients submitted as DistributedOptimizer does
(allreduce_async_ per gradient, reverse order, then synchronize each), and
through hvd.torch.DistributedOptimizer itself (resnet_optimizer: the hooks
backward would run, in its order, then synchronize()), against one flat
tensor of the same size, alternating step by step (Average), the gradients
views of the flat tensor's memory unless --memory separate.
Rank 0 prints one line per figure: `name median_us min_us` (and --json);
`resnet_pairs` is the median and minimum of each step's time over the flat
call's after it.
The C ABI anchors (hvd_bench, fusion_bench) run beside it in
python_overhead.sh, which prints the table with the ratios.
"""

import argparse
import ctypes
import json
import math
import statistics
import sys
import time

import numpy as np
import torch

import hvd.numpy as hnp
import hvd.torch as ht
from hvd import _lib

import shapes_file  # beside this script

try:
    from hvd import _fastpath
except ImportError:  # bindings from before the C module (--before)
    _fastpath = None


class _Ctypes:
    """The minimal ctypes call sequence over an allreduce (into `out` if
    given, else in place)."""

    def __init__(self, array, out=None, name=b"ctypes"):
        lib = _lib.lib()
        self._arrays = (array, out)
        self._shape = (ctypes.c_int64 * 1)(array.size)
        self._t = self._tensor(array)
        self._ptr = ctypes.addressof(self._t)
        self._out_t = None if out is None else self._tensor(out)
        self._out = None if out is None else ctypes.addressof(self._out_t)
        self._opts = _lib.default_options()
        # Named, as the other modes and hvd_bench are: a generated name is
        # new on every call and misses the core's response cache.
        self._name = name
        self._opts.name = name
        self._opts_ref = ctypes.byref(self._opts)
        self._async = lib.hvd_allreduce_async
        self._wait = lib.hvd_wait
        self._release = lib.hvd_release

    def _tensor(self, array):
        t = _lib.DLTensor()
        t.data = array.ctypes.data
        t.device = _lib.DLDevice(_lib.DL_CPU, 0)
        t.ndim = 1
        t.dtype = _lib.DLDataType(2, 32, 1)
        t.shape = self._shape
        return t

    def __call__(self):
        h = self._async(self._ptr, self._out, self._opts_ref)
        if self._wait(h, -1.0) != 0:
            raise RuntimeError("ctypes allreduce failed")
        self._release(h)


def _gradients(shapes, shared):
    """One tensor of ones per shape, and a flat tensor of their total size.
    shared: the gradients are views of one allocation, each starting 64-byte
    aligned as torch's allocator places them, and the flat tensor is its
    first elements, so the step and its reference move the same pages (on a
    VM two allocations of the same size can differ in speed by several
    percent). Otherwise each has an allocation of its own, as a model's
    gradients do."""
    counts = [math.prod(s) for s in shapes]
    total = sum(counts)
    if not shared:
        return [torch.ones(s) for s in shapes], torch.ones(total)
    padded = [(c + 15) // 16 * 16 for c in counts]  # at least `total`
    memory = torch.ones(sum(padded))
    grads, at = [], 0
    for shape, count, room in zip(shapes, counts, padded):
        grads.append(memory[at:at + count].view(shape))
        at += room
    return grads, memory[:total]


def _emulated_optimizer_step(grads):
    """One step's allreduces as DistributedOptimizer submits them:
    allreduce_async_ per gradient, last layer first, then synchronize each
    (Average)."""
    names = ["grad.%d" % i for i in range(len(grads))]
    order = list(range(len(grads)))[::-1]

    def step():
        handles = [ht.allreduce_async_(grads[i], name=names[i],
                                       op=ht.Average) for i in order]
        for h in handles:
            ht.synchronize(h)
    return step


def _distributed_optimizer(grads):
    """An hvd.torch.DistributedOptimizer over parameters whose gradients
    are `grads`, and the hooks backward would run once each gradient is
    accumulated, in backward's order (last layer first)."""
    params = [torch.nn.Parameter(torch.empty_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g
    opt = ht.DistributedOptimizer(
        torch.optim.SGD(params, lr=0.0),
        named_parameters=[("p%d" % i, p) for i, p in enumerate(params)])
    return opt, [opt._make_hook(p) for p in params][::-1]


def _optimizer_hooks_step(grads):
    """One step through hvd.torch.DistributedOptimizer
    (_distributed_optimizer): its hooks, then synchronize(), which waits
    for every reduction, as step() does before its update."""
    opt, hooks = _distributed_optimizer(grads)

    def step():
        for hook in hooks:
            hook()
        opt.synchronize()
    return step


def _alternate(fns, iters, warmup):
    """Runs each of fns in turn iters times; per-name lists of seconds.
    Names ending in _py run with the C module off (the pure-Python path),
    switched outside the timed call."""
    times = {name: [] for name in fns}
    for i in range(warmup + iters):
        for name, fn in fns.items():
            if _fastpath is not None:
                _fastpath.set_enabled(not name.endswith("_py"))
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            if i >= warmup:
                times[name].append(dt)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--big-iters", type=int, default=15)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--shapes", default=shapes_file.RESNET50)
    ap.add_argument("--only", default="small,big,resnet")
    ap.add_argument("--memory", choices=("shared", "separate"),
                    default="shared")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    hnp.init()
    rank = hnp.rank()
    results = {}
    parts = args.only.split(",")

    for label, nbytes, iters, warmup in (
            ("4K", 4096, args.iters, 200),
            ("64M", 64 << 20, args.big_iters, 3)):
        if label == "4K" and "small" not in parts:
            continue
        if label == "64M" and "big" not in parts:
            continue
        n = nbytes // 4
        a_c = np.zeros(n, dtype=np.float32)
        a_c_out = np.zeros(n, dtype=np.float32)
        a_np = np.zeros(n, dtype=np.float32)
        t_in = torch.zeros(n)
        t_out = torch.zeros(n)
        keep = []

        def torch_out():
            # Dropped on the next call, as a training loop drops results.
            keep[:] = [ht.allreduce(t_out, op=ht.Sum, name="t_out")]

        def numpy_out():
            keep[:] = [hnp.allreduce(a_np, op=hnp.Sum, name="np")]
        fns = {
            "ctypes": _Ctypes(a_c),
            "ctypes_oop": _Ctypes(a_c, a_c_out, b"ctypes_oop"),
            "numpy": numpy_out,
            "torch_inplace": lambda: ht.allreduce_(t_in, op=ht.Sum,
                                                   name="t_in"),
            "torch_outofplace": torch_out,
        }
        if _fastpath is not None and _fastpath.available():
            for name in ("numpy", "torch_inplace", "torch_outofplace"):
                fns[name + "_py"] = fns[name]
        times = _alternate(fns, iters, warmup)
        for name, ts in times.items():
            results["%s_%s" % (name, label)] = (
                statistics.median(ts) * 1e6, min(ts) * 1e6)

    if "resnet" in parts:
        grads, flat = _gradients(shapes_file.read(args.shapes),
                                 args.memory == "shared")
        step = _emulated_optimizer_step(grads)

        def flat_call():
            ht.synchronize(ht.allreduce_async_(flat, name="flat",
                                               op=ht.Average))
        fns = {"resnet_step": step, "resnet_flat": flat_call,
               "resnet_optimizer": _optimizer_hooks_step(grads)}
        if _fastpath is not None and _fastpath.available():
            fns["resnet_step_py"] = step
        times = _alternate(fns, args.steps, 3)
        for name, ts in times.items():
            results[name] = (statistics.median(ts) * 1e6, min(ts) * 1e6)
        # Each step beside the flat call after it: a drift of the machine's
        # pace within the run moves both.
        for name, label in (("resnet_step", "resnet_pairs"),
                            ("resnet_optimizer", "resnet_optimizer_pairs")):
            pairs = [s / f for s, f in zip(times[name],
                                           times["resnet_flat"])]
            results[label] = (statistics.median(pairs), min(pairs))

    if rank == 0:
        for name, (med, mn) in results.items():
            digits = 4 if name.endswith("_pairs") else 1
            print("%s %.*f %.*f" % (name, digits, med, digits, mn))
        sys.stdout.flush()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    hnp.shutdown()


if __name__ == "__main__":
    main()

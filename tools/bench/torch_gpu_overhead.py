"""What a PyTorch user pays per call on CUDA tensors through hvd.torch, in a
job of size 1 (the NCCL path), beside the floor of any GPU op waited for
from Python: one kernel on the tensor and torch.cuda.synchronize().

    python3 tools/bench/torch_gpu_overhead.py [--rounds N]

Prints a table of medians in microseconds: float32 allreduce in place and
out of place at 1 KiB, 1 MiB and 256 MiB; then ResNet-50's 161 gradient
shapes (resnet50_shapes.txt) allreduced as hvd.DistributedOptimizer does
(one allreduce_async_ each, then synchronize) against one flat tensor of
the same 25.6 M floats. tools/bench/gpu_overhead.sh runs it after the C ABI
figures (gpu_overhead_bench), so both paths are in one table.
"""

import argparse
import statistics
import sys
import time

import torch

if not torch.cuda.is_available():
    print("SKIPPED: torch %s has no usable CUDA device" % torch.__version__)
    sys.exit(0)

import hvd.torch as hvd  # noqa: E402
import shapes_file  # noqa: E402  (beside this script)


def median_us(fn, runs, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    hvd.init()
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    dev = torch.device("cuda", torch.cuda.current_device())
    print("hvd.torch on %s, size %d, torch %s" %
          (torch.cuda.get_device_name(dev), hvd.size(), torch.__version__))
    print("%-9s %16s %16s %18s" % ("size", "kernel+sync (us)",
                                   "allreduce_ (us)", "allreduce (us)"))
    for label, count in (("1 KiB", 256), ("1 MiB", 1 << 18),
                         ("256 MiB", 1 << 26)):
        x = torch.ones(count, device=dev)
        runs = args.rounds if count < (1 << 26) else max(args.rounds // 10, 5)

        def floor():
            x.mul_(1.0)
            torch.cuda.synchronize()

        in_place = median_us(lambda: hvd.allreduce_(x, name="x"), runs)
        out = median_us(lambda: hvd.allreduce(x, name="x"), runs)
        print("%-9s %16.1f %16.1f %18.1f" %
              (label, median_us(floor, runs), in_place, out))

    grads = [torch.ones(s, device=dev) for s in shapes_file.read()]
    flat = torch.ones(sum(g.numel() for g in grads), device=dev)

    submit, wait = [], []

    def step():
        start = time.perf_counter()
        handles = [hvd.allreduce_async_(g, name="g%d" % i)
                   for i, g in enumerate(grads)]
        submitted = time.perf_counter()
        for h in handles:
            hvd.synchronize(h)
        submit.append((submitted - start) * 1e6)
        wait.append((time.perf_counter() - submitted) * 1e6)

    runs = max(args.rounds // 4, 5)
    many = median_us(step, runs)
    one = median_us(lambda: hvd.allreduce_(flat, name="flat"), runs)
    print("ResNet-50 gradients: %d tensors %.1f us (submit %.1f, wait %.1f), "
          "one flat tensor %.1f us (%.2fx)" %
          (len(grads), many, statistics.median(submit),
           statistics.median(wait), one, many / one))
    hvd.shutdown()


if __name__ == "__main__":
    main()

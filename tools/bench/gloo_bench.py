#!/usr/bin/python3
"""The torch.distributed (gloo) anchor of tools/bench/compare.py.

The same sweep as hvd_bench (sizes, iterations, per-call timing, median on
rank 0, nccl-tests bus factors), float32 sum, one process per rank started
with env:// initialisation:

  RANK=r WORLD_SIZE=n MASTER_ADDR=127.0.0.1 MASTER_PORT=p \\
      /usr/bin/python3 gloo_bench.py -b 8 -e 256M -n 50 -w 5 \\
      --ops allreduce,allgather,broadcast,alltoall,reducescatter --csv F

compare.py starts the ranks itself (torchrun works too: -r 1 -t 2 --log_dir
DIR on Python 3.11). Ops gloo does not implement (reduce_scatter in torch
1.13) are reported as unsupported and skipped. Each call is synchronous
(dist.all_reduce(...) returns when the result is there), timed alone.
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

from bench_sizes import parse_size, sweep_sizes


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-b", default="8")
    p.add_argument("-e", default="256M")
    p.add_argument("-f", type=float, default=2)
    p.add_argument("-n", type=int, default=50)
    p.add_argument("-w", type=int, default=5)
    p.add_argument("--ops", default="allreduce")
    p.add_argument("--budget", default="2G")
    p.add_argument("--csv")
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    csv = open(a.csv, "w") if (a.csv and rank == 0) else None
    if csv:
        csv.write("system,op,bytes,count,dtype,redop,ranks,iters,median_us,"
                  "min_us,algbw_gbs,busbw_gbs,wrong\n")
    budget = parse_size(a.budget)
    for op in a.ops.split(","):
        for size in sweep_sizes(a.b, a.e, a.f):
            whole = op in ("allreduce", "broadcast")
            count = size // 4 if whole else size // 4 // n
            if count == 0:
                continue
            moved = count * 4 * (1 if whole else n)
            x = torch.full((count if whole or op == "allgather" else count * n,),
                           float(rank + 1), dtype=torch.float32)
            if op == "allreduce":
                call = lambda: dist.all_reduce(x)
            elif op == "broadcast":
                call = lambda: dist.broadcast(x, 0)
            elif op == "allgather":
                outs = [torch.empty(count) for _ in range(n)]
                call = lambda: dist.all_gather(outs, x)
            elif op == "alltoall":
                out = torch.empty(count * n)
                call = lambda: dist.all_to_all_single(out, x)
            elif op == "reducescatter":
                out = torch.empty(count)
                ins = list(x.chunk(n))
                call = lambda: dist.reduce_scatter(out, ins)
            else:
                sys.exit("gloo_bench: unknown op " + op)
            try:
                call()
            except (RuntimeError, NotImplementedError) as e:
                if rank == 0:
                    print("  %-13s unsupported by gloo here: %s"
                          % (op, str(e).splitlines()[0]), flush=True)
                break
            iters = max(3, min(a.n, budget // moved))
            bus = (2.0 * (n - 1) / n if op == "allreduce"
                   else 1.0 if op == "broadcast" else (n - 1) / n)
            dist.barrier()
            for _ in range(a.w):
                call()
            times = []
            for _ in range(iters):
                t0 = time.perf_counter()
                call()
                times.append((time.perf_counter() - t0) * 1e6)
            med = median(times)
            algbw = moved / med / 1e3
            if rank == 0:
                print("  %-13s %12d %12d %11.1f %11.1f %10.3f %10.3f"
                      % (op, moved, count, med, min(times), algbw, algbw * bus),
                      flush=True)
                if csv:
                    csv.write("gloo,%s,%d,%d,float32,sum,%d,%d,%.2f,%.2f,%.4f,"
                              "%.4f,0\n" % (op, moved, count, n, iters, med,
                                            min(times), algbw, algbw * bus))
                    csv.flush()
    if csv:
        csv.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

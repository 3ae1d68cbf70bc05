"""Soak: a mix of collectives on every rank for a long time, watching each
process' resources.

Every round runs allreduce, allgather, broadcast, alltoall and reducescatter
at each size from 4 B to 64 MiB (per rank), checks their results, and adds a
process set, runs an allreduce on it and removes it again. Every --interval
seconds all ranks sample their resident memory, open files, threads and
mapped shared-memory segments at the same round boundary. After --warmup
seconds each must stay flat: resident memory (and the bytes malloc has
handed out) within --max-rss-growth (or 1 MiB, whichever is more) of the
first sample after warm-up, the counts never above it. Rank 0 prints every
sample and the verdict; the exit code is 1 when a result was wrong or a
resource grew. Also reported, to say where memory went: Python's count of
allocated objects (py_blocks), resident memory that is private (anon_mib)
and shared (shmem_mib: the segments), and what malloc holds freed
(free_mib).

    hvdrun -np 4 python3 tools/soak/soak.py --seconds 1800 --interval 60
"""

import argparse
import ctypes
import gc
import os
import sys
import time

import numpy as np

import hvd.numpy as hvd

M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
SIZES = [4, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]  # bytes/rank
# Growth below this is never a verdict. Over its first minutes this mix
# raises malloc's bytes in use by about 0.3 MiB, which then stay (a
# 30-minute run: 7.2 MiB at 2 minutes, 7.5 MiB from 6 minutes to the end):
# 4% of the few MiB malloc holds once large outputs come from hvd's own
# mappings. Bounded state filling up (the response cache keeps 1024
# entries; an unnamed op gets a new name each call) would look like this.
MIN_SLACK_MIB = 1.0
COLUMNS = ("seconds", "rss_mib", "fds", "threads", "shm_segments",
           "heap_mib", "py_blocks", "anon_mib", "shmem_mib", "free_mib")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--interval", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=None,
                        help="seconds before the baseline sample "
                        "(default: two intervals)")
    parser.add_argument("--max-rss-growth", type=float, default=0.01)
    parser.add_argument("--malloc-info", metavar="DIR",
                        help="write glibc's malloc_info (every arena's "
                        "sizes and free lists) to DIR/rank<R>-<seconds>.xml "
                        "at each sample: which arena grows")
    parser.add_argument("--trim", action="store_true",
                        help="malloc_trim(0) before each sample: measure "
                        "without the freed memory malloc keeps")
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = 2 * args.interval
    if args.seconds <= args.warmup + args.interval:
        parser.error("--seconds must leave at least one interval after "
                     "--warmup")
    return args


def check(what, got, want):
    """`got` must equal `want` elementwise (`want` may be a scalar)."""
    if got.size == 0 or not np.all(got == want):
        raise SystemExit("soak: rank %d: %s gave a wrong result (first "
                         "elements %s, expected %s)"
                         % (hvd.rank(), what, got.ravel()[:4],
                            np.asarray(want).ravel()[:4]))


def collectives(count, root):
    """One of each collective on `count` float32 elements per rank."""
    rank, size = hvd.rank(), hvd.size()
    total = size * (size + 1) / 2
    mine = np.full(count, rank + 1, np.float32)
    check("allreduce", hvd.allreduce(mine, op=hvd.Sum), total)
    block = max(count // size, 1)
    gathered = hvd.allgather(np.full(block, rank, np.float32))
    check("allgather", gathered, np.repeat(np.arange(size), block))
    check("broadcast", hvd.broadcast(mine, root), root + 1)
    rows = block * size
    received = hvd.alltoall(np.full(rows, rank, np.float32))
    check("alltoall", received, np.repeat(np.arange(size), block))
    scattered = hvd.reducescatter(np.full(rows, rank + 1, np.float32),
                                  op=hvd.Sum)
    check("reducescatter", scattered, total)


def process_set_round(round_number):
    """Adds a set of the first k ranks (k from 1 to size - 1 by turns),
    reduces over it, removes it."""
    members = list(range(1 + round_number % max(hvd.size() - 1, 1)))
    subset = hvd.add_process_set(members)
    if hvd.rank() in members:
        got = hvd.allreduce(np.ones(1024, np.float32), op=hvd.Sum,
                            process_set=subset)
        check("allreduce on process set %s" % members, got, len(members))
    hvd.remove_process_set(subset)


def dump_malloc_info(directory, seconds):
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    path = os.path.join(directory, "rank%d-%05d.xml" % (hvd.rank(), seconds))
    f = libc.fopen(path.encode(), b"w")
    if f:
        libc.malloc_info(0, f)
        libc.fclose(f)


def sample(start, trim, malloc_info=None):
    gc.collect()
    if trim:
        ctypes.CDLL(None).malloc_trim(0)
    if malloc_info:
        dump_malloc_info(malloc_info, time.monotonic() - start)
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    with open("/proc/self/maps") as f:
        shm = {line.split(None, 5)[-1].strip() for line in f
               if "/dev/shm/" in line}
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = _Mallinfo2
    heap = mallinfo2()
    with open("/proc/self/status") as f:
        kib = {k: int(v.split()[0]) for k, v in
               (line.split(":", 1) for line in f) if k in ("RssAnon",
                                                         "RssShmem")}
    return [time.monotonic() - start, rss / 2**20,
            len(os.listdir("/proc/self/fd")),
            len(os.listdir("/proc/self/task")), len(shm),
            (heap.uordblks + heap.hblkhd) / 2**20, sys.getallocatedblocks(),
            kib["RssAnon"] / 1024, kib["RssShmem"] / 1024,
            heap.fordblks / 2**20]


def run(args):
    """The rounds; returns this rank's samples, an array (n, COLUMNS)."""
    start = time.monotonic()
    next_sample, samples, round_number = start, [], 0
    while True:
        for size in SIZES:
            collectives(max(size // 4, 1), round_number % hvd.size())
        process_set_round(round_number)
        round_number += 1
        # Rank 0's clock decides for all, so every rank samples and stops at
        # the same round.
        now = time.monotonic()
        flags = hvd.broadcast(np.array([now >= next_sample,
                                        now - start >= args.seconds],
                                       np.int32), 0)
        if flags[0]:
            samples.append(sample(start, args.trim, args.malloc_info))
            next_sample += args.interval
            if hvd.rank() == 0:
                print("soak: round %d, rank 0: %s" % (round_number, ", ".join(
                    "%s %.1f" % c for c in zip(COLUMNS, samples[-1]))),
                    flush=True)
        if flags[1]:
            return np.array(samples, np.float64)


def verdict(samples, args):
    """Lines naming what grew after warm-up, per rank ([] if flat)."""
    problems = []
    for rank, rows in enumerate(samples):
        after = rows[rows[:, 0] >= args.warmup]
        if len(after) < 2:
            problems.append("rank %d: fewer than two samples after warm-up"
                            % rank)
            continue
        base, peak = after[0], after[1:].max(axis=0)
        for column, what in ((1, "resident memory"), (5, "malloc's heap")):
            allowed = max(base[column] * args.max_rss_growth, MIN_SLACK_MIB)
            if peak[column] > base[column] + allowed:
                problems.append("rank %d: %s grew %.2f%% (%.1f -> %.1f MiB)" % (
                    rank, what, 100 * (peak[column] / base[column] - 1),
                    base[column], peak[column]))
        for column in (2, 3, 4):
            if peak[column] > base[column]:
                problems.append("rank %d: %s grew from %d to %d" % (
                    rank, COLUMNS[column], base[column], peak[column]))
    return problems


def report(samples, args):
    print("soak: %d ranks, %.0f s, samples every %.0f s, baseline after "
          "%.0f s" % (hvd.size(), args.seconds, args.interval, args.warmup))
    print("rank " + " ".join("%12s" % c for c in COLUMNS))
    for rank, rows in enumerate(samples):
        for row in rows:
            print("%4d " % rank + " ".join("%12.1f" % v for v in row))
    problems = verdict(samples, args)
    for line in problems:
        print("soak: FAILED: " + line)
    if not problems:
        print("soak: flat after warm-up on every rank (resident memory and "
              "heap within %.1f%% or %.0f MiB; files, threads, shm segments "
              "no higher)" % (100 * args.max_rss_growth, MIN_SLACK_MIB))
    return not problems


def fix_malloc_threshold():
    """glibc raises its mmap threshold each time it frees a large block (up
    to 32 MiB); later 16 MiB arrays then come from the heap, and the heap
    keeps pages it cannot trim: growth that levels off and says nothing
    about hvd. A fixed threshold keeps every block from 1 MiB up in mmap."""
    ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 1 << 20)


def main():
    args = parse_args()
    fix_malloc_threshold()
    hvd.init()
    mine = run(args)
    everyone = hvd.allgather(mine.reshape(1, -1)).reshape(
        hvd.size(), len(mine), len(COLUMNS))
    ok = report(everyone, args) if hvd.rank() == 0 else True
    ok = bool(hvd.broadcast(np.array([ok], np.int32), 0)[0])
    hvd.shutdown()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""The training script of tools/bench/elastic_recovery.py: resnet18
(torchvision, 10 classes) trained data-parallel on random 3x64x64 batches of
8 under hvd's elastic mode, one CPU thread per worker, the step counter
committed every step.

Every worker appends JSON lines to $BENCH_LOG (one short write each, so
lines of several workers do not interleave):
  {"event": "start", "worker", "pid", "proc_start", "t0", "imported",
   "torchvision", "initialized", "built"}
      once, at startup: proc_start is the process's start time from
      /proc (10 ms resolution), t0 time.time() before any import, imported
      after `import torch` and `import hvd.torch`, torchvision after
      `import torchvision`, initialized after the first hvd.init(), built
      once the model and optimizer are made.
  {"event": "enter", "worker", "rank", "size", "step", "t"}
      each time hvd.elastic.run calls the training function: after the
      (re-)init and the sync of a new round.
  {"event": "step", "worker", "rank", "size", "step", "t", "step_s"}
      after each step's commit returned: t is time.time(), step_s how long
      the step took (forward, backward, allreduce, optimizer, commit).

The job ends (every worker returns from training and exits 0) at the step
written in the file $BENCH_STOP, which the benchmark writes a few steps
ahead of the current one: every rank reads it before each step and all stop
at that same step. $BENCH_MAX_STEPS is a safety limit.
"""

import time

T0 = time.time()

import json  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402

import hvd.torch as hvd  # noqa: E402

IMPORTED = time.time()

import torchvision  # noqa: E402

TORCHVISION = time.time()

LOG = os.environ["BENCH_LOG"]
STOP = os.environ["BENCH_STOP"]
MAX_STEPS = int(os.environ.get("BENCH_MAX_STEPS", "100000"))
ME = os.environ.get("HVD_ELASTIC_WORKER_ID", "")


def log(record):
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def proc_start_time():
    """The process's start, wall clock: its age from /proc (ticks since
    boot) taken off the current time."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rpartition(")")[2].split()[19])
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - \
        ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


def stop_step():
    try:
        with open(STOP) as f:
            return min(int(f.read()), MAX_STEPS)
    except (OSError, ValueError):
        return MAX_STEPS


torch.set_num_threads(1)
hvd.init()
INITIALIZED = time.time()

torch.manual_seed(0)
model = torchvision.models.resnet18(num_classes=10)
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.01),
    named_parameters=model.named_parameters())
images = torch.randn(8, 3, 64, 64)
labels = torch.randint(0, 10, (8,))
log({"event": "start", "worker": ME, "pid": os.getpid(),
     "proc_start": proc_start_time(), "t0": T0, "imported": IMPORTED,
     "torchvision": TORCHVISION, "initialized": INITIALIZED,
     "built": time.time()})


@hvd.elastic.run
def train(state):
    log({"event": "enter", "worker": ME, "rank": hvd.rank(),
         "size": hvd.size(), "step": state.step, "t": time.time()})
    while state.step < stop_step():
        start = time.time()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        optimizer.step()
        state.step += 1
        state.commit()
        now = time.time()
        log({"event": "step", "worker": ME, "rank": hvd.rank(),
             "size": hvd.size(), "step": state.step, "t": now,
             "step_s": now - start})


train(hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0))

"""A Horovod elastic training script, as users write it, for the elastic
multi-host tests (elastic_multihost_test.py): a model, an optimizer and a
step counter in a TorchState, committed every step.

Environment (set by the test):
  ELASTIC_LOG     a file rank 0 appends one JSON line to per step
  ELASTIC_STEPS   the step to train up to
  ELASTIC_SLEEP   seconds between steps
  ELASTIC_DEVICE  "cuda": the model and data on the GPU of hvd.local_rank()
                  (modulo the GPUs there); default the CPU
  ELASTIC_FAIL    failures, comma-separated, each "<worker>:<when>:<how>":
                  worker  a worker id (HVD_ELASTIC_WORKER_ID) or * for all
                  when    a step number (before that step is trained),
                          "rejoin" (at the first restore after a failure,
                          before the worker joins the next round) or
                          "reset" (at the first reset callback: the next
                          round has formed and connected, nothing synced)
                  how     "exception" (raise: the worker exits 1) or "kill"
                          (SIGKILL itself)
                  Each fails once (a marker file per worker and failure).
"""

import json
import os
import signal
import socket
import time

import torch

import horovod.torch as hvd

hvd.init()
LOG = os.environ["ELASTIC_LOG"]
STEPS = int(os.environ.get("ELASTIC_STEPS", "20"))
SLEEP = float(os.environ.get("ELASTIC_SLEEP", "0.2"))
FAIL = os.environ.get("ELASTIC_FAIL", "")
ME = os.environ.get("HVD_ELASTIC_WORKER_ID", "")

if os.environ.get("ELASTIC_DEVICE") == "cuda":
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    DEVICE = torch.device("cuda", torch.cuda.current_device())
else:
    DEVICE = torch.device("cpu")
torch.manual_seed(0)
model = torch.nn.Linear(4, 1).to(DEVICE)
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.01),
    named_parameters=model.named_parameters())


def maybe_fail(when):
    for spec in filter(None, FAIL.split(",")):
        worker, at, how = spec.split(":")
        marker = "%s.failed.%s.%s" % (LOG, ME, at)
        if worker not in (ME, "*") or at != str(when) or \
                os.path.exists(marker):
            continue
        open(marker, "w").close()
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("injected failure of worker %s at %s" % (ME, when))


@hvd.elastic.run
def train(state):
    while state.step < STEPS:
        maybe_fail(state.step + 1)
        x = torch.randn(8, 4, device=DEVICE)
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
        size = int(hvd.allreduce(torch.tensor([1.0], device=DEVICE),
                                 op=hvd.Sum).item())
        state.step += 1
        state.done += 1
        # Logged before the commit: a commit that saves and then raises (a
        # host update) must not leave its step out of the log; a step redone
        # after a reset shows as the same step twice.
        if hvd.rank() == 0:
            with open(LOG, "a") as f:
                f.write(json.dumps({"step": state.step, "done": state.done,
                                    "size": size, "hvd_size": hvd.size(),
                                    "host": socket.gethostname(),
                                    "worker": ME}) + "\n")
        state.commit()
        time.sleep(SLEEP)


class FailingState(hvd.elastic.TorchState):
    def restore(self):
        maybe_fail("rejoin")
        super().restore()


state = FailingState(model=model, optimizer=optimizer, step=0, done=0)
state.register_reset_callbacks([lambda: maybe_fail("reset")])
train(state)
with open(LOG + ".final", "a") as f:
    f.write(json.dumps({"worker": ME, "rank": hvd.rank(), "size": hvd.size(),
                        "step": state.step, "done": state.done}) + "\n")

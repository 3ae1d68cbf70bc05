"""The training command of pods_test.py's elastic job: Horovod's elastic
API as users write it (a TorchState committed every step), logging what it
sees for the test.

Environment (the chart's `env` values; hvdrun forwards them to the workers
it starts over ssh):
  K8S_ELASTIC_LOG    a file rank 0 appends a JSON line to per step: step,
                     size, host (the pod's host name); every rank appends
                     one line to K8S_ELASTIC_LOG.final when training ends
  K8S_ELASTIC_STOP   training ends at the first step after this file exists
                     (every rank learns it in an allreduce)
  K8S_ELASTIC_STEPS  steps to train at most (default 100)
  K8S_ELASTIC_SLEEP  seconds between steps (default 0.2)
"""

import json
import os
import socket
import time

import torch

import hvd.torch as hvd

hvd.init()
LOG = os.environ["K8S_ELASTIC_LOG"]
STEPS = int(os.environ.get("K8S_ELASTIC_STEPS", "100"))
SLEEP = float(os.environ.get("K8S_ELASTIC_SLEEP", "0.2"))
STOP = os.environ.get("K8S_ELASTIC_STOP", "")

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.01),
    named_parameters=model.named_parameters())


def append(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


@hvd.elastic.run
def train(state):
    while state.step < STEPS:
        optimizer.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        optimizer.step()
        size = int(hvd.allreduce(torch.tensor([1.0]), op=hvd.Sum).item())
        state.step += 1
        if hvd.rank() == 0:
            append(LOG, {"step": state.step, "size": size,
                         "host": socket.gethostname()})
        state.commit()
        seen = float(bool(STOP) and os.path.exists(STOP))
        if hvd.allreduce(torch.tensor([seen]), op=hvd.Sum).item() > 0:
            break
        time.sleep(SLEEP)


state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0)
train(state)
append(LOG + ".final", {"rank": hvd.rank(), "size": hvd.size(),
                        "step": state.step, "host": socket.gethostname()})

"""Step time of a torchvision model (resnet18 by default) on the CPU, or on
a GPU with --device cuda: hvd.DistributedOptimizer against
torch.nn.parallel.DistributedDataParallel (gloo on the CPU, NCCL on a GPU),
measured in the same job, by the same processes, in interleaved rounds (so
that load from elsewhere on the machine hits both alike).

    hvdrun -np 2 /usr/bin/python3 tools/bench/resnet_step.py
    (or tools/bench/resnet_step.sh, which builds and finds hvdrun)
    python3 tools/bench/resnet_step.py --device cuda --model resnet50
    (one GPU per rank: DDP's NCCL takes no shared GPU)

Each round runs --steps timed steps of one variant, then of the other; the
order alternates between rounds. A step is zero_grad + forward + backward +
optimizer step on a synthetic batch; it includes the gradient allreduce
(overlapped with backward in both variants) and, on a GPU, the wait for the
device at its end. Rank 0 prints the median step
time of each variant over all ranks' steps and their ratio, and with --json
writes them to a file.
"""

import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torchvision import models

try:
    import hvd.torch as hvd
except ImportError:  # running from a source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "python"))
    import hvd.torch as hvd


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch-size", type=int, default=16, help="per rank")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--warmup", type=int, default=2, help="steps per variant")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=4, help="per round, variant")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads per rank (0: cores / local ranks)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--json", metavar="PATH", help="write the results here")
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def init_torch_distributed(backend):
    """torch.distributed over `backend` with hvd's ranks; rank 0 picks the
    port."""
    address = None
    if hvd.rank() == 0:
        address = (socket.gethostbyname(socket.gethostname()), free_port())
    host, port = hvd.broadcast_object(address, root_rank=0,
                                      name="gloo_address")
    dist.init_process_group(
        backend, init_method="tcp://%s:%d" % (host, port),
        rank=hvd.rank(), world_size=hvd.size())


class Variant:
    """One way of training the model: a step function and its timings."""

    def __init__(self, name, model, optimizer, batch):
        self.name = name
        self.model = model
        self.optimizer = optimizer
        self.data, self.target = batch
        self.times = []

    def step(self):
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(self.data), self.target)
        loss.backward()
        self.optimizer.step()
        if self.data.is_cuda:
            torch.cuda.synchronize()

    def run(self, steps, record=True):
        for _ in range(steps):
            start = time.perf_counter()
            self.step()
            if record:
                self.times.append(time.perf_counter() - start)

    def checksum(self):
        with torch.no_grad():
            return float(sum(p.double().sum() for p in
                             self.model.parameters()))


def make_variants(args, device):
    torch.manual_seed(0)
    batch = (torch.randn(args.batch_size, 3, args.image_size,
                         args.image_size).to(device),
             torch.randint(0, 1000, (args.batch_size,)).to(device))

    torch.manual_seed(1)
    model_h = getattr(models, args.model)().to(device)
    opt_h = hvd.DistributedOptimizer(
        torch.optim.SGD(model_h.parameters(), lr=0.01, momentum=0.9),
        named_parameters=model_h.named_parameters())
    hvd.broadcast_parameters(model_h.state_dict(), root_rank=0)

    torch.manual_seed(1)
    ids = [device.index] if device.type == "cuda" else None
    model_d = torch.nn.parallel.DistributedDataParallel(
        getattr(models, args.model)().to(device), device_ids=ids)
    opt_d = torch.optim.SGD(model_d.parameters(), lr=0.01, momentum=0.9)
    backend = "nccl" if device.type == "cuda" else "gloo"
    return [Variant("hvd.DistributedOptimizer", model_h, opt_h, batch),
            Variant("torch DDP (%s)" % backend, model_d, opt_d, batch)]


def sync():
    hvd.barrier()
    dist.barrier()


def main():
    args = parse_args()
    hvd.init()
    threads = args.threads or max(1, (os.cpu_count() or 1) // hvd.local_size())
    torch.set_num_threads(threads)
    device = torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(hvd.local_rank())
        device = torch.device("cuda", hvd.local_rank())
    init_torch_distributed("nccl" if args.device == "cuda" else "gloo")
    variants = make_variants(args, device)
    rank0 = hvd.rank() == 0

    def log(s):
        if rank0:
            print(s, flush=True)

    log("%s on %s, batch %d of %dx%d per rank, %d ranks x %d torch "
        "thread(s); %d rounds x %d steps per variant"
        % (args.model, device.type, args.batch_size, args.image_size,
           args.image_size, hvd.size(), threads, args.rounds, args.steps))
    for v in variants:
        sync()
        v.run(args.warmup, record=False)
    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for v in order:
            sync()
            v.run(args.steps)
        log("round %d: %s" % (r + 1, "  ".join(
            "%s %.3fs" % (v.name, statistics.median(v.times[-args.steps:]))
            for v in variants)))

    results = {}
    for v in variants:
        everyone = hvd.allgather_object(v.times, name="times." + v.name)
        sums = hvd.allgather_object(v.checksum(), name="sum." + v.name)
        assert all(abs(s - sums[0]) <= 1e-6 * abs(sums[0]) for s in sums), \
            "%s: ranks hold different models: %s" % (v.name, sums)
        flat = [t for times in everyone for t in times]
        results[v.name] = {"median_s": statistics.median(flat),
                           "mean_s": statistics.mean(flat),
                           "min_s": min(flat), "steps": len(flat)}
    hvd_s = results[variants[0].name]["median_s"]
    ddp_s = results[variants[1].name]["median_s"]
    results["ratio_hvd_over_ddp"] = hvd_s / ddp_s
    for v in variants:
        res = results[v.name]
        log("%-26s median %.3f s/step  mean %.3f  min %.3f  (%d steps, all "
            "ranks)" % (v.name, res["median_s"], res["mean_s"], res["min_s"],
                        res["steps"]))
    log("ratio hvd / DDP (median step time): %.3f" % (hvd_s / ddp_s))
    if rank0 and args.json:
        results["config"] = vars(args)
        results["config"]["ranks"] = hvd.size()
        results["config"]["threads"] = threads
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()

"""Synthetic-data benchmark of an image model with hvd.DistributedOptimizer,
in the form of Horovod's pytorch_synthetic_benchmark.py: img/sec per rank and
in total. The data is random; only the speed of training is measured.

    hvdrun -np 2 /usr/bin/python3 examples/synthetic_benchmark.py --model resnet18
"""

import argparse
import os
import sys
import timeit

import numpy as np
import torch
import torch.nn.functional as F
from torchvision import models

try:
    import hvd.torch as hvd
except ImportError:  # running from a source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python"))
    import hvd.torch as hvd


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50",
                   help="a torchvision.models name (resnet18, resnet50, ...)")
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-warmup-batches", type=int, default=10)
    p.add_argument("--num-batches-per-iter", type=int, default=10)
    p.add_argument("--num-iters", type=int, default=10)
    p.add_argument("--fp16-allreduce", action="store_true",
                   help="compress gradients to float16 for the allreduce")
    p.add_argument("--use-adasum", action="store_true")
    p.add_argument("--no-cuda", action="store_true")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads per rank (0: cores / local ranks)")
    return p.parse_args()


def main():
    args = parse_args()
    hvd.init()
    cuda = not args.no_cuda and torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(hvd.local_rank())
    threads = args.threads or max(1, (os.cpu_count() or 1) // hvd.local_size())
    torch.set_num_threads(threads)

    model = getattr(models, args.model)()
    if cuda:
        model.cuda()
    lr_scaler = 1 if args.use_adasum else hvd.size()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * lr_scaler)
    compression = hvd.Compression.fp16 if args.fp16_allreduce \
        else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=compression,
        op=hvd.Adasum if args.use_adasum else hvd.Average)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.LongTensor(args.batch_size).random_() % 1000
    if cuda:
        data, target = data.cuda(), target.cuda()

    def benchmark_step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    device = "GPU" if cuda else "CPU"
    log("Model: %s" % args.model)
    log("Batch size: %d" % args.batch_size)
    log("Number of %ss: %d (%d torch threads each)" % (device, hvd.size(),
                                                       threads))
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)

    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per %s" % (x, img_sec, device))
        img_secs.append(img_sec)

    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log("Img/sec per %s: %.1f +-%.1f" % (device, img_sec_mean, img_sec_conf))
    log("Total img/sec on %d %s(s): %.1f +-%.1f" % (
        hvd.size(), device, hvd.size() * img_sec_mean,
        hvd.size() * img_sec_conf))


if __name__ == "__main__":
    main()

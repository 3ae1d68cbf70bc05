"""Classification on a generated dataset with hvd: three interleaved spirals
in the plane, an MLP with hvd.SyncBatchNorm, data split among the ranks by
torch's DistributedSampler. Prints training loss and validation accuracy per
epoch (averaged over the ranks) and the final accuracy.

    hvdrun -np 2 /usr/bin/python3 examples/classification.py
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
import torch.utils.data
import torch.utils.data.distributed

try:
    import hvd.torch as hvd
except ImportError:  # running from a source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python"))
    import hvd.torch as hvd


def spirals(n_per_class, classes=3, noise=0.08, seed=0):
    """`classes` spiral arms of n_per_class noisy points each."""
    g = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    for c in range(classes):
        t = torch.linspace(0.1, 1.0, n_per_class)
        angle = 2.0 * math.pi * t + 2 * math.pi * c / classes
        arm = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], 1)
        xs.append(arm + noise * t.unsqueeze(1) * torch.randn(
            n_per_class, 2, generator=g))
        ys.append(torch.full((n_per_class,), c, dtype=torch.long))
    return torch.cat(xs), torch.cat(ys)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.1,
                   help="per-rank learning rate (scaled by the size)")
    p.add_argument("--points", type=int, default=1500, help="per class")
    p.add_argument("--min-accuracy", type=float, default=None,
                   help="exit with code 1 below this final accuracy (tests)")
    return p.parse_args()


def main():
    args = parse_args()
    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(hvd.rank())

    x, y = spirals(args.points)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(1))
    split = int(0.8 * len(x))
    train = torch.utils.data.TensorDataset(x[perm[:split]], y[perm[:split]])
    val = torch.utils.data.TensorDataset(x[perm[split:]], y[perm[split:]])
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train, num_replicas=hvd.size(), rank=hvd.rank())
    val_sampler = torch.utils.data.distributed.DistributedSampler(
        val, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
    train_loader = torch.utils.data.DataLoader(
        train, batch_size=args.batch_size, sampler=train_sampler)
    val_loader = torch.utils.data.DataLoader(val, batch_size=256,
                                             sampler=val_sampler)

    model = torch.nn.Sequential(
        torch.nn.Linear(2, 64), hvd.SyncBatchNorm(64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), hvd.SyncBatchNorm(64), torch.nn.ReLU(),
        torch.nn.Linear(64, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters())
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer,
                                                           args.epochs)

    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        model.train()
        train_sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(target)
            count += len(target)
        scheduler.step()

        model.eval()
        correct, seen = 0, 0
        with torch.no_grad():
            for data, target in val_loader:
                correct += int((model(data).argmax(1) == target).sum())
                seen += len(target)
        sums = hvd.allreduce(torch.tensor([total, count, correct, seen],
                                          dtype=torch.float64),
                             op=hvd.Sum, name="metrics")
        train_loss = (sums[0] / sums[1]).item()
        accuracy = (sums[2] / sums[3]).item()
        if hvd.rank() == 0:
            print("epoch %2d/%d  train loss %.4f  val accuracy %.3f"
                  % (epoch, args.epochs, train_loss, accuracy), flush=True)
    if hvd.rank() == 0:
        print("final validation accuracy: %.3f" % accuracy)
    if args.min_accuracy is not None and accuracy < args.min_accuracy:
        sys.exit("accuracy %.3f below --min-accuracy %.3f"
                 % (accuracy, args.min_accuracy))


if __name__ == "__main__":
    main()

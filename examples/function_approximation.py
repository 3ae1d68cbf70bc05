"""Function approximation with hvd: fit y = sin(2*pi*x) + sin(4*pi*x) on
[-1, 1] with a deep, narrow MLP (16 layers x 32 units, tanh).

The points are split among the ranks: rank r owns the r-th contiguous slice
of [-1, 1] and trains only on it.

  --mode data-parallel (default): one model. hvd.DistributedOptimizer
      averages the ranks' gradients at every step, so the model learns the
      whole interval although no rank ever sees more than its slice.
  --mode ensemble: every rank trains its own model on its own slice; only the
      initial weights are shared (broadcast from rank 0). Each member's error
      is reported on the whole interval: each fits its slice and misses the
      rest, which is what data-parallel training fixes.

Prints the loss of every epoch and the final error on a 101-point grid;
--save-plot PATH writes a PNG of the fit (rank 0).

    hvdrun -np 2 /usr/bin/python3 examples/function_approximation.py
    hvdrun -np 2 /usr/bin/python3 examples/function_approximation.py --mode ensemble
    python3 examples/function_approximation.py          # one process
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

try:
    import hvd.torch as hvd
except ImportError:  # running from a source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python"))
    import hvd.torch as hvd


def target(x):
    return torch.sin(2 * math.pi * x) + torch.sin(4 * math.pi * x)


class MLP(torch.nn.Module):
    """depth Linear layers of `width` units with tanh in between."""

    def __init__(self, depth, width):
        super().__init__()
        sizes = [1] + [width] * (depth - 1) + [1]
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        # tanh's gain keeps the signal alive through 16 layers.
        for layer in self.layers[:-1]:
            torch.nn.init.xavier_normal_(layer.weight, gain=5.0 / 3.0)
            torch.nn.init.zeros_(layer.bias)

    def forward(self, x):
        h = 2.0 * x
        for layer in self.layers[:-1]:
            h = torch.tanh(layer(h))
        return self.layers[-1](h)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["data-parallel", "ensemble"],
                   default="data-parallel")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--points", type=int, default=2048,
                   help="training points on [-1, 1], split among the ranks")
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--depth", type=int, default=16)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-plot", metavar="PNG", default=None)
    p.add_argument("--max-rms", type=float, default=None,
                   help="exit with code 1 if the final rms error on the grid "
                        "exceeds this (data-parallel; for tests)")
    return p.parse_args()


def my_slice(points):
    """This rank's contiguous share of the training points."""
    x = torch.linspace(-1.0, 1.0, points).unsqueeze(1)
    per = points // hvd.size()
    x = x[hvd.rank() * per:(hvd.rank() + 1) * per]
    return x, target(x)


def grid_errors(model, grid):
    """(max, rms) error on `grid`, and rms error on this rank's slice."""
    with torch.no_grad():
        err = model(grid) - target(grid)
    lo = -1.0 + 2.0 * hvd.rank() / hvd.size()
    mine = (grid >= lo) & (grid <= lo + 2.0 / hvd.size())
    return (err.abs().max().item(), err.pow(2).mean().sqrt().item(),
            err[mine].pow(2).mean().sqrt().item())


def main():
    args = parse_args()
    hvd.init()
    torch.set_num_threads(1)  # one core per rank
    torch.manual_seed(args.seed + hvd.rank())  # rank 0's init wins below
    ensemble = args.mode == "ensemble"
    rank0 = hvd.rank() == 0

    x, y = my_slice(args.points)
    model = MLP(args.depth, args.width)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    if not ensemble:
        optimizer = hvd.DistributedOptimizer(
            optimizer, named_parameters=model.named_parameters())
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer,
                                                           args.epochs)
    if rank0:
        print("%s on %d rank(s): %d-layer MLP of width %d, %d points, "
              "batch %d per rank" % (args.mode, hvd.size(), args.depth,
                                     args.width, args.points,
                                     args.batch_size), flush=True)

    start = time.time()
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(x))
        total = 0.0
        for i in range(0, len(x), args.batch_size):
            idx = order[i:i + args.batch_size]
            optimizer.zero_grad()
            loss = F.mse_loss(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        scheduler.step()
        mean = torch.tensor([total / len(x)])
        if ensemble:
            losses = hvd.allgather(mean)
            line = "losses " + " ".join("%.5f" % v for v in losses.tolist())
        else:
            line = "loss %.5f" % hvd.allreduce(mean, name="epoch_loss").item()
        if rank0:
            print("epoch %3d/%d  %s  (%.1fs)" % (epoch, args.epochs, line,
                                                time.time() - start),
                  flush=True)

    grid = torch.linspace(-1.0, 1.0, 101).unsqueeze(1)
    max_err, rms, own_rms = grid_errors(model, grid)
    if ensemble:
        errors = hvd.allgather_object((max_err, rms, own_rms))
        with torch.no_grad():
            mean_pred = hvd.allreduce(model(grid), op=hvd.Average,
                                      name="ensemble_mean")
        ens_err = (mean_pred - target(grid)).abs()
        if rank0:
            print("final error on a 101-point grid over [-1, 1]:")
            for r, (m, s, own) in enumerate(errors):
                lo = -1.0 + 2.0 * r / hvd.size()
                print("  member %d (trained on [%.2f, %.2f]): max %.4f  "
                      "rms %.4f  (rms on its own slice %.4f)"
                      % (r, lo, lo + 2.0 / hvd.size(), m, s, own))
            print("  ensemble mean: max %.4f  rms %.4f"
                  % (ens_err.max().item(), ens_err.pow(2).mean().sqrt().item()))
    elif rank0:
        print("final error on a 101-point grid over [-1, 1]: max %.4f  "
              "rms %.4f" % (max_err, rms))
    failed = not ensemble and args.max_rms is not None and rms > args.max_rms

    if args.save_plot:
        with torch.no_grad():
            preds = hvd.allgather(model(grid).reshape(1, -1))
        if rank0:
            save_plot(args.save_plot, grid, preds, ensemble)
    hvd.shutdown()
    if failed:
        sys.exit("rms error %.4f above --max-rms %.4f" % (rms, args.max_rms))


def save_plot(path, grid, preds, ensemble):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(grid.squeeze(1), target(grid).squeeze(1), "k-", lw=2,
            label="sin(2πx) + sin(4πx)")
    if ensemble:
        for r, p in enumerate(preds):
            ax.plot(grid.squeeze(1), p, "--", label="member %d" % r)
    else:
        ax.plot(grid.squeeze(1), preds[0], "r--", label="data-parallel fit")
    ax.set_xlabel("x")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print("plot written to %s" % path)


if __name__ == "__main__":
    main()

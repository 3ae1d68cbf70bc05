"""Physics-informed neural network (PINN) with hvd: solve the Poisson problem
-u'' = f on [-1, 1], u(-1) = u(1) = 0, with a small tanh MLP u(x). No
solution values are given: the loss is the PDE residual u'' + f at
collocation points (u'' by autograd) plus the boundary values u(-1)^2 and
u(1)^2, weighted by --bc-weight.

  --mode data-parallel (default): one problem, f = 4 pi^2 sin(2 pi x)
      (exact u = sin(2 pi x)). The collocation points are split among the
      ranks: rank r owns the r-th contiguous slice and computes the residual
      only there. hvd.DistributedOptimizer averages the gradients and every
      rank adds the boundary term, so each step is the one-process step on
      all points: the error does not depend on the number of ranks.
  --mode ensemble: every rank solves its own problem with its own model,
      f = (k pi)^2 sin(k pi x), exact u = sin(k pi x), k = 1 on even ranks
      and 2 on odd ranks. No gradient averaging; only the initial weights
      are shared (broadcast from rank 0). The ranks' errors are gathered
      to rank 0 (hvd.allgather) and printed as a table.

Prints the loss every tenth of the run and the final relative L2 error
||u - u_exact|| / ||u_exact|| on a 1001-point grid; --save-plot PATH writes
a PNG of the solution against the exact one (rank 0; needs matplotlib).

    hvdrun -np 2 /usr/bin/python3 examples/pinn.py
    hvdrun -np 2 /usr/bin/python3 examples/pinn.py --mode ensemble
    python3 examples/pinn.py          # one process
"""

import argparse
import math
import os
import sys
import time

import torch

try:
    import hvd.torch as hvd
except ImportError:  # running from a source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python"))
    import hvd.torch as hvd


def forcing(x, k):
    return (k * math.pi) ** 2 * torch.sin(k * math.pi * x)


def exact(x, k):
    return torch.sin(k * math.pi * x)


def mlp(depth, width):
    """depth hidden layers of `width` tanh units, 1 input, 1 output."""
    sizes = [1] + [width] * depth
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["data-parallel", "ensemble"],
                   default="data-parallel")
    p.add_argument("--steps", type=int, default=1000,
                   help="Adam steps, each on all of the rank's points")
    p.add_argument("--points", type=int, default=96,
                   help="collocation points on [-1, 1]; split among the "
                        "ranks in data-parallel mode")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--depth", type=int, default=2, help="hidden layers")
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--bc-weight", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-plot", "--plot", metavar="PNG", default=None)
    p.add_argument("--max-error", type=float, default=None,
                   help="exit with code 1 if the final relative L2 error "
                        "(in ensemble mode: any rank's) exceeds this "
                        "(for tests)")
    return p.parse_args()


def collocation(points, ensemble):
    """The points this rank computes the residual at: all of them in
    ensemble mode, its contiguous slice in data-parallel mode."""
    x = torch.linspace(-1.0, 1.0, points)
    if not ensemble:
        x = torch.tensor_split(x, hvd.size())[hvd.rank()]
    return x.unsqueeze(1).requires_grad_(True)


def pinn_loss(model, x, f, bc_weight):
    """Mean squared residual of -u'' = f at x plus the boundary term."""
    u = model(x)
    du, = torch.autograd.grad(u.sum(), x, create_graph=True)
    d2u, = torch.autograd.grad(du.sum(), x, create_graph=True)
    boundary = model(torch.tensor([[-1.0], [1.0]]))
    return (d2u + f).pow(2).mean() + bc_weight * boundary.pow(2).mean()


def relative_error(model, grid, k):
    with torch.no_grad():
        u, u_exact = model(grid), exact(grid, k)
    return ((u - u_exact).norm() / u_exact.norm()).item()


def train(model, optimizer, x, f, args):
    """Adam with a cosine schedule; rank 0 prints the loss ten times."""
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer,
                                                           args.steps)
    ensemble = args.mode == "ensemble"
    start = time.time()
    for step in range(1, args.steps + 1):
        optimizer.zero_grad()
        loss = pinn_loss(model, x, f, args.bc_weight)
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % max(1, args.steps // 10) and step != args.steps:
            continue
        value = torch.tensor([loss.item()])
        if ensemble:
            losses = hvd.allgather(value)
            line = "losses " + " ".join("%.3e" % v for v in losses.tolist())
        else:
            line = "loss %.3e" % hvd.allreduce(value, name="loss").item()
        if hvd.rank() == 0:
            print("step %5d/%d  %s  (%.1fs)" % (step, args.steps, line,
                                                time.time() - start),
                  flush=True)


def describe(k):
    """f = (k pi)^2 sin(k pi x), written out."""
    return "π² sin(πx)" if k == 1 else "%dπ² sin(%dπx)" % (k * k, k)


def report(errors, ensemble):
    """Rank 0 prints the errors: errors[r] = (k, error) of rank r."""
    if not ensemble:
        print("relative L2 error on a 1001-point grid over [-1, 1]: %.3e"
              % errors[0][1])
        return
    print("relative L2 error on a 1001-point grid over [-1, 1], per rank:")
    print("  rank  f               error")
    for r, (k, err) in enumerate(errors):
        print("  %4d  %-14s  %.3e" % (r, describe(k), err))


def main():
    args = parse_args()
    hvd.init()
    torch.set_num_threads(1)  # one core per rank
    torch.manual_seed(args.seed + hvd.rank())  # rank 0's init wins below
    ensemble = args.mode == "ensemble"
    rank0 = hvd.rank() == 0
    k = 1 + hvd.rank() % 2 if ensemble else 2

    x = collocation(args.points, ensemble)
    f = forcing(x.detach(), k)
    model = mlp(args.depth, args.width)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    if not ensemble:
        optimizer = hvd.DistributedOptimizer(
            optimizer, named_parameters=model.named_parameters())
    if rank0:
        print("%s on %d rank(s): %d x %d tanh MLP, %d collocation points%s, "
              "%d Adam steps" % (args.mode, hvd.size(), args.depth,
                                 args.width, args.points,
                                 "" if ensemble else " split among the ranks",
                                 args.steps), flush=True)

    start = time.time()
    train(model, optimizer, x, f, args)
    grid = torch.linspace(-1.0, 1.0, 1001).unsqueeze(1)
    error = relative_error(model, grid, k)
    # One row (k, error) per rank, in rank order.
    rows = hvd.allgather(torch.tensor([[float(k), error]],
                                      dtype=torch.float64)).tolist()
    errors = [(int(kr), err) for kr, err in rows]
    if rank0:
        report(errors, ensemble)
        print("trained in %.1fs" % (time.time() - start))
    worst = max(err for _, err in errors)
    failed = args.max_error is not None and worst > args.max_error

    if args.save_plot:
        with torch.no_grad():
            preds = hvd.allgather(model(grid).reshape(1, -1))
        if rank0:
            save_plot(args.save_plot, grid, preds,
                      [kr for kr, _ in errors], ensemble)
        # A rank that exits (with code 1 on a failed check) ends the job:
        # not before rank 0 has written the plot.
        hvd.barrier()
    hvd.shutdown()
    if failed:
        sys.exit("relative L2 error %.3e above --max-error %.3e"
                 % (worst, args.max_error))


def save_plot(path, grid, preds, ks, ensemble):
    """PNG of the PINN solution(s) over the exact one(s); one clear line
    instead when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError as e:
        print("no plot written to %s: matplotlib cannot be imported (%s)"
              % (path, e))
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    x = grid.squeeze(1)
    for k in sorted(set(ks)):  # one colour per problem
        ax.plot(x, exact(x, k), "-", color="C%d" % k, lw=4, alpha=0.3,
                label="exact, f = %s" % describe(k))
    if ensemble:
        for r, (p, k) in enumerate(zip(preds, ks)):
            ax.plot(x, p, "--", color="C%d" % k, label="PINN of rank %d" % r)
    else:
        ax.plot(x, preds[0], "--", color="C%d" % ks[0],
                label="PINN, %d rank(s)" % len(preds))
    ax.set_xlabel("x")
    ax.set_ylabel("u")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print("plot written to %s" % path)


if __name__ == "__main__":
    main()

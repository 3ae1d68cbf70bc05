"""hvd.torch on CUDA tensors: every collective and a training step with
hvd.DistributedOptimizer, on the current CUDA stream and on a side stream,
then shutdown() and init() again three times.

    python3 tools/gpu/torch_gpu_check.py              # a job of size 1 (NCCL)
    hvdrun -np 4 python3 tools/gpu/torch_gpu_check.py # 4 ranks sharing GPU 0
                                                      # (the staged path)

Plain Python (no pytest: the GPU machine may lack it). Prints
"rank R: PASS" and exits 0 when every check held; prints "SKIPPED: <why>"
and exits 0 where torch has no CUDA (the CI machines). With
HVD_GPU_CHECK_ON_CPU=1 it runs on CPU tensors instead (all but the stream
check), which checks the script itself where no GPU exists.
"""

import os
import sys

import torch

ON_CPU = os.environ.get("HVD_GPU_CHECK_ON_CPU") == "1"
if not ON_CPU and not torch.cuda.is_available():
    print("SKIPPED: torch %s has no usable CUDA device "
          "(torch.cuda.is_available() is False)" % torch.__version__)
    sys.exit(0)

import hvd.torch as hvd  # noqa: E402
from hvd import _fastpath  # noqa: E402

hvd.init()
RANK, SIZE = hvd.rank(), hvd.size()
if ON_CPU:
    DEV = torch.device("cpu")
else:
    # Ranks beyond the device count share GPUs (every rank on GPU 0 when the
    # job runs on a machine with one).
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    DEV = torch.device("cuda", torch.cuda.current_device())
FAILURES = []


def check(name, got, want, tol=0.0):
    got = got.detach().cpu().double()
    want = torch.as_tensor(want).cpu().double()
    if got.shape != want.shape or not torch.allclose(got, want, atol=tol,
                                                     rtol=tol):
        FAILURES.append(name)
        print("rank %d: FAIL %s: got %s want %s" % (RANK, name, got, want))


def ranks_sum(fn):
    return sum(fn(r) for r in range(SIZE))


def collectives():
    for dtype in (torch.float32, torch.float16, torch.bfloat16,
                  torch.float64, torch.int32, torch.int64, torch.uint8):
        x = torch.full((17, 3), RANK + 1, dtype=dtype, device=DEV)
        check("allreduce sum %s" % dtype, hvd.allreduce(x, op=hvd.Sum),
              torch.full((17, 3), float(ranks_sum(lambda r: r + 1))))
        check("allreduce max %s" % dtype, hvd.allreduce(x, op=hvd.Max),
              torch.full((17, 3), float(SIZE)))
        if dtype.is_floating_point:
            tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
            check("allreduce average %s" % dtype, hvd.allreduce(x),
                  torch.full((17, 3), (SIZE + 1) / 2.0), tol)
            check("allreduce factors %s" % dtype,
                  hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5,
                                postscale_factor=4.0),
                  torch.full((17, 3), 2.0 * ranks_sum(lambda r: r + 1)), tol)
    ys = [torch.full((n,), float(RANK), device=DEV) for n in (1, 5, 1000)]
    for i, y in enumerate(hvd.grouped_allreduce(ys, op=hvd.Sum)):
        check("grouped %d" % i, y, torch.full((ys[i].numel(),),
                                              float(ranks_sum(lambda r: r))))
    inplace = torch.ones(4, device=DEV)
    hvd.allreduce_(inplace, op=hvd.Sum)
    check("allreduce_ in place", inplace, torch.full((4,), float(SIZE)))
    g = hvd.allgather(torch.full((RANK + 1, 2), float(RANK), device=DEV))
    check("allgather on the GPU", torch.tensor([g.is_cuda]), [not ON_CPU])
    check("allgather", g, torch.cat([torch.full((r + 1, 2), float(r))
                                     for r in range(SIZE)]))
    b = torch.full((3,), float(RANK), device=DEV)
    check("broadcast", hvd.broadcast(b, root_rank=SIZE - 1),
          torch.full((3,), float(SIZE - 1)))
    splits = [r + 1 for r in range(SIZE)]
    a = torch.full((sum(splits),), float(RANK), device=DEV)
    out, received = hvd.alltoall(a, splits=torch.tensor(splits))
    check("alltoall", out, torch.cat([torch.full((RANK + 1,), float(r))
                                      for r in range(SIZE)]))
    check("alltoall splits", received, torch.full((SIZE,), RANK + 1))
    rs = hvd.reducescatter(torch.ones(SIZE * 2, 3, device=DEV), op=hvd.Sum)
    check("reducescatter", rs, torch.full((2, 3), float(SIZE)))


def side_stream():
    """Work queued on a non-default stream just before the allreduce: hvd
    waits for that stream (hvd_options.stream), not for the device."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.zeros(1 << 20, device=DEV)
        torch.cuda._sleep(50_000_000)  # keeps the stream busy a while
        x.add_(RANK + 1)
        y = hvd.allreduce(x, op=hvd.Sum)
    s.synchronize()
    check("side stream", y[:4], torch.full((4,), float(ranks_sum(
        lambda r: r + 1))))


def training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 1)).to(DEV)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 1)).to(DEV)
    reference.load_state_dict(model.state_dict())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1),
        named_parameters=model.named_parameters())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4 * SIZE, 8, generator=g).to(DEV)
    y = torch.randn(4 * SIZE, 1, generator=g).to(DEV)
    mine = slice(4 * RANK, 4 * RANK + 4)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[mine]), y[mine]).backward()
        opt.step()
        # The same steps on the whole batch: averaging the ranks' gradients
        # of equal-sized slices is the gradient of the mean loss.
        ref_opt.zero_grad()
        losses = [torch.nn.functional.mse_loss(reference(x[4 * r:4 * r + 4]),
                                               y[4 * r:4 * r + 4])
                  for r in range(SIZE)]
        (sum(losses) / SIZE).backward()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        check("DistributedOptimizer " + name, p, q, 1e-4)


def init_again(times=3):
    """shutdown() then init(), as elastic training does after a lost peer:
    the GPU backend (communicators, streams, buffers) is built anew each
    time and every op still works."""
    for i in range(times):
        hvd.shutdown()
        hvd.init()
        check("size after init %d" % (i + 2), torch.tensor([hvd.size()]),
              [SIZE])
        x = torch.full((1000,), float(RANK + 1), device=DEV)
        check("allreduce after init %d" % (i + 2), hvd.allreduce(x, op=hvd.Sum),
              torch.full((1000,), float(ranks_sum(lambda r: r + 1))))
        g = hvd.allgather(torch.full((RANK + 1,), float(RANK), device=DEV))
        check("allgather after init %d" % (i + 2), g,
              torch.cat([torch.full((r + 1,), float(r)) for r in range(SIZE)]))


print("rank %d: hvd's C module %s" % (
    RANK, "takes allreduce calls" if _fastpath.available() else
    "not loaded: every call takes the Python path"))
collectives()
if not ON_CPU:
    side_stream()
training_step()
init_again()
hvd.shutdown()
if FAILURES:
    print("rank %d: %d FAILED" % (RANK, len(FAILURES)))
    sys.exit(1)
print("rank %d: PASS" % RANK)

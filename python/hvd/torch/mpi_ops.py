"""hvd.torch collectives: Horovod's names, arguments and autograd semantics.

Tensors cross to libhvd.so as DLPack (torch.utils.dlpack); bool tensors cross
as uint8 with the dtype named in the options (torch 1.13's DLPack has no bool).
Non-contiguous tensors are made contiguous first; in-place results are copied
back into them (hvd/torch/_adapter.py). Broadcast, join and barrier are here;
allreduce in _allreduce_ops.py and allgather, alltoall and reducescatter in
_reshaping_ops.py, all exported from here (Horovod's horovod.torch.mpi_ops).
"""

import torch

from hvd import _engine
from hvd.basics import (Adasum, Average, Max, Min, Product, Sum,  # noqa: F401
                        rank, resolve_op)
from hvd.process_sets import global_process_set
from hvd.torch._adapter import _adapter, poll, synchronize  # noqa: F401
from hvd.torch._allreduce_ops import (  # noqa: F401
    HvdAllreduce, HvdGroupedAllreduce, allreduce, allreduce_, allreduce_async,
    allreduce_async_, grouped_allreduce, grouped_allreduce_,
    grouped_allreduce_async, grouped_allreduce_async_)
from hvd.torch._reshaping_ops import (  # noqa: F401
    HvdAllgather, HvdAlltoall, HvdGroupedAllgather, HvdGroupedReducescatter,
    HvdReducescatter, allgather, allgather_async, alltoall, alltoall_async,
    grouped_allgather, grouped_allgather_async, grouped_reducescatter,
    grouped_reducescatter_async, reducescatter, reducescatter_async,
    sparse_allreduce_async)
from hvd.torch.compression import Compression  # noqa: F401


# -------------------------------------------------------------- broadcast --

def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    """Starts a broadcast of root_rank's `tensor` (not modified);
    synchronize() returns the received tensor. root_rank is a global rank."""
    return _engine.broadcast_async(_adapter, tensor, False, root_rank, name,
                                   process_set)


def broadcast_async_(tensor, root_rank, name=None,
                     process_set=global_process_set):
    """In-place broadcast_async: `tensor` receives root_rank's value."""
    return _engine.broadcast_async(_adapter, tensor, True, root_rank, name,
                                   process_set)


class HvdBroadcast(torch.autograd.Function):
    """Broadcast; the root's gradient is the average over ranks of the
    gradient, other ranks get zero (Horovod's definition)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name,
                                           process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = allreduce(grad_output, op=Average,
                            process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            reduced = reduced * 0
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's `tensor` on every rank. Differentiable."""
    return HvdBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast; returns `tensor`."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---------------------------------------------------------- join, barrier --

def join(device=-1):
    """This rank has no more data. Until every rank has joined, the core lets
    the other ranks' collectives go on, this rank taking part with zeros.
    Returns the rank that joined last. (`device` is accepted for Horovod
    compatibility.)"""
    return synchronize(_engine.join_async())


def barrier(process_set=global_process_set):
    """Returns once every rank of `process_set` has called barrier()."""
    synchronize(_engine.barrier_async(process_set))

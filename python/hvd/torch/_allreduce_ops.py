"""hvd.torch's allreduce and grouped allreduce, with
Horovod's names, arguments and autograd semantics. Part of
hvd.torch.mpi_ops, which exports them."""

import torch

from hvd import _engine, _fastpath
from hvd.basics import Average, Sum, resolve_op  # noqa: F401
from hvd.process_sets import global_process_set
from hvd.torch._adapter import _adapter, synchronize
from hvd.torch.compression import Compression, _apply_grouped


# -------------------------------------------------------------- allreduce --

def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts an allreduce of `tensor` (not modified); returns a handle for
    poll() / synchronize(), which returns the reduced tensor."""
    op = resolve_op(op, average)
    return _engine.allreduce_async(_adapter, tensor, False, name, op,
                                   prescale_factor, postscale_factor,
                                   process_set)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """In-place allreduce_async: `tensor` receives the result."""
    op = resolve_op(op, average)
    handle = _fastpath.submit_in_place(tensor, name, op, prescale_factor,
                                       postscale_factor, process_set)
    if handle is not NotImplemented:
        return handle
    return _allreduce_async_in_place(tensor, name, op, prescale_factor,
                                     postscale_factor, process_set)


def _allreduce_async_in_place(tensor, name, op, prescale, postscale,
                              process_set):
    return _engine.allreduce_async(_adapter, tensor, True, name, op, prescale,
                                   postscale, process_set)


class HvdAllreduce(torch.autograd.Function):
    """Allreduce; its gradient is the allreduce (same op) of the gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor,
                process_set):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(allreduce_async(
            tensor, None, name, op, prescale_factor, postscale_factor,
            process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=ctx.op,
                         prescale_factor=ctx.prescale_factor,
                         postscale_factor=ctx.postscale_factor,
                         process_set=ctx.process_set)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none,
              op=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """Reduces `tensor` over the ranks of `process_set` (default: all) and
    returns the result; `tensor` is not modified. Differentiable.

    Arguments:
        tensor: the tensor to reduce; same shape and type on every rank.
        average: deprecated, use op.
        name: names the operation (ranks match operations by name); a name
            is generated when None.
        compression: Compression.none or Compression.fp16.
        op: Average (default), Sum, Min, Max, Product. Adasum raises
            HvdNotSupportedError.
        prescale_factor, postscale_factor: multiply before / after reducing.
        process_set: a registered ProcessSet.
    """
    op = resolve_op(op, average)
    # Compression.none (most calls) has nothing to do or undo.
    plain = compression is Compression.none
    compressed, cctx = (tensor, None) if plain else compression.compress(
        tensor)
    if not isinstance(compressed, torch.Tensor) or (
            compressed.requires_grad and torch.is_grad_enabled()):
        reduced = HvdAllreduce.apply(compressed, name, op, prescale_factor,
                                     postscale_factor, process_set)
    else:
        # No graph to record: the Function's forward without autograd's
        # bookkeeping (a few microseconds a call).
        reduced = _fastpath.allreduce(compressed, None, name, op,
                                      prescale_factor, postscale_factor,
                                      process_set)
        if reduced is NotImplemented:
            reduced = synchronize(allreduce_async(
                compressed, None, name, op, prescale_factor,
                postscale_factor, process_set))
    return reduced if plain else compression.decompress(reduced, cctx)


def allreduce_(tensor, average=None, name=None, op=None,
               prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """In-place allreduce; returns `tensor`."""
    return _fastpath.allreduce_in_place(
        tensor, name, resolve_op(op, average), prescale_factor,
        postscale_factor, process_set, _allreduce_async_in_place)


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    """Allreduce of a list of tensors as one operation: one handle, whose
    synchronize() returns the list of results."""
    op = resolve_op(op, average)
    return _engine.grouped_allreduce_async(
        _adapter, tensors, False, name, op, prescale_factor,
        postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    """In-place grouped_allreduce_async."""
    op = resolve_op(op, average)
    return _engine.grouped_allreduce_async(
        _adapter, tensors, True, name, op, prescale_factor,
        postscale_factor, process_set)


class HvdGroupedAllreduce(torch.autograd.Function):

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor,
                process_set, *tensors):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allreduce_async(
            list(tensors), None, name, op, prescale_factor, postscale_factor,
            process_set)))

    @staticmethod
    def backward(ctx, *grads):
        reduced = grouped_allreduce(list(grads), op=ctx.op,
                                    prescale_factor=ctx.prescale_factor,
                                    postscale_factor=ctx.postscale_factor,
                                    process_set=ctx.process_set)
        return (None, None, None, None, None) + tuple(reduced)


def grouped_allreduce(tensors, average=None, name=None,
                      compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Allreduce of a list of tensors as one operation; returns a list.
    Differentiable."""
    op = resolve_op(op, average)
    return _apply_grouped(HvdGroupedAllreduce, compression, tensors, name, op,
                          prescale_factor, postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """In-place grouped allreduce; returns `tensors`."""
    return synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor,
        process_set))

"""hvd.torch's collectives whose output shape is not the input's:
allgather, alltoall and reducescatter (and their grouped forms, and the
sparse allreduce, made of allgathers), with
Horovod's names, arguments and autograd semantics. Part of hvd.torch.mpi_ops,
which exports them."""

import torch

from hvd import _engine
from hvd.basics import Average, Sum, rank, resolve_op  # noqa: F401
from hvd.process_sets import global_process_set
from hvd.torch._adapter import _adapter, synchronize
from hvd.torch._allreduce_ops import allreduce, grouped_allreduce
from hvd.torch.compression import Compression, _apply_grouped


# -------------------------------------------------------------- allgather --

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather: synchronize() returns the concatenation, along
    the first dimension, of every rank's tensor (first dimensions may
    differ)."""
    return _engine.allgather_async(_adapter, tensor, name, process_set)


def _first_dim(tensor):
    return tensor.shape[0] if tensor.dim() > 0 else 1


def _offset_of_rank(ctx_dim, process_set):
    """Offset and length of this rank's rows in an allgather result."""
    dims = allgather(torch.tensor([ctx_dim], dtype=torch.int64),
                     process_set=process_set)
    r = process_set.rank()
    return int(dims[:r].sum().item()) if r > 0 else 0


class HvdAllgather(torch.autograd.Function):
    """Allgather; the gradient of a rank's rows is the average over ranks of
    the gradient of the gathered tensor (Horovod's definition)."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = _first_dim(tensor)
        ctx.scalar = tensor.dim() == 0
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = allreduce(grad_output, op=Average,
                            process_set=ctx.process_set)
        offset = _offset_of_rank(ctx.dim, ctx.process_set)
        grad = reduced.narrow(0, offset, ctx.dim)
        if ctx.scalar:
            grad = grad.reshape(())
        return grad, None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's `tensor` along the first dimension (which
    may differ between ranks). Differentiable."""
    return HvdAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None,
                            process_set=global_process_set):
    """Allgather of a list of tensors as one operation."""
    return _engine.grouped_allgather_async(_adapter, tensors, name,
                                           process_set)


class HvdGroupedAllgather(torch.autograd.Function):

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [_first_dim(t) for t in tensors]
        ctx.scalars = [t.dim() == 0 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(
            list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        reduced = grouped_allreduce(list(grads), op=Average,
                                    process_set=ctx.process_set)
        dims = allgather(torch.tensor([ctx.dims], dtype=torch.int64),
                         process_set=ctx.process_set)
        r = ctx.process_set.rank()
        offsets = dims[:r].sum(dim=0) if r > 0 else torch.zeros(len(grads))
        out = []
        for i, g in enumerate(reduced):
            piece = g.narrow(0, int(offsets[i].item()), ctx.dims[i])
            out.append(piece.reshape(()) if ctx.scalars[i] else piece)
        return (None, None) + tuple(out)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgather of each tensor in a list, as one operation. Differentiable."""
    if not tensors:
        return []
    return list(HvdGroupedAllgather.apply(name, process_set, *tensors))


# --------------------------------------------------------------- alltoall --

def _splits_list(splits):
    if splits is None:
        return None
    if isinstance(splits, torch.Tensor):
        # Refused by type, as Horovod does, never by value: a float tensor's
        # values (torch.empty's, say) may pass on one rank and not on
        # another, leaving the ranks out of step.
        if splits.is_floating_point() or splits.is_complex() or (
                splits.dtype == torch.bool):
            raise ValueError("alltoall: splits must be a tensor of integers "
                             "(int32), not %s" % splits.dtype)
        return [int(s) for s in splits.reshape(-1).tolist()]
    return [int(s) for s in splits]


def _splits_tensor(received):
    return torch.tensor(received, dtype=torch.int32)


def alltoall_async(tensor, splits=None, name=None,
                   process_set=global_process_set):
    """Starts an alltoall: rows splits[i] of `tensor` go to rank i of the set
    (even split when None). synchronize() returns (output, received_splits)."""
    return _engine.alltoall_async(_adapter, tensor, _splits_list(splits),
                                  name, process_set, _splits_tensor)


class HvdAlltoall(torch.autograd.Function):
    """Alltoall; the gradient is the alltoall of the gradient back along the
    received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name,
                                                      process_set))
        ctx.process_set = process_set
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, _grad_received):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(),
                                             ctx.received,
                                             process_set=ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends rows splits[i] of `tensor` to rank i of the set and returns the
    rows received, in rank order. Returns the output alone when `splits` is
    None, else (output, received_splits). Differentiable."""
    output, received = HvdAlltoall.apply(tensor, splits, name, process_set)
    if splits is None:
        return output
    return output, received


# ---------------------------------------------------------- reducescatter --

def reducescatter_async(tensor, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts a reducescatter: the reduction of `tensor` over the set, split
    along the first dimension (the first ranks take one row more when it does
    not divide); synchronize() returns this rank's part."""
    op = resolve_op(op, None)
    return _engine.reducescatter_async(_adapter, tensor, name, op,
                                       prescale_factor, postscale_factor,
                                       process_set)


def _scatter_grad(grad, op, process_set, prescale, postscale):
    """Horovod's gradient of a reducescatter, applied to the allgathered
    gradient: times the set's size for Sum (1 for Average), times the
    factors. (Like allreduce's, it is the gradient summed over the ranks'
    losses, with Average's 1/size carried by the forward only.)"""
    scale = 1.0
    if op == Sum:
        scale = float(process_set.size())
    scale *= prescale
    scale *= postscale
    return grad * scale if scale != 1.0 else grad


class HvdReducescatter(torch.autograd.Function):
    """Reducescatter; the gradient is the allgather of the gradient, scaled
    as Horovod scales it (_scatter_grad)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor,
                postscale_factor):
        ctx.op = op
        ctx.process_set = process_set
        ctx.scale = (prescale_factor, postscale_factor)
        return synchronize(reducescatter_async(
            tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(allgather_async(grad_output.contiguous(),
                                           process_set=ctx.process_set))
        return (_scatter_grad(grad, ctx.op, ctx.process_set, *ctx.scale),
                None, None, None, None, None)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces `tensor` over the set and returns this rank's slice of the
    result along the first dimension. Differentiable."""
    op = resolve_op(op, None)
    compressed, cctx = compression.compress(tensor)
    out = HvdReducescatter.apply(compressed, name, op, process_set,
                                 prescale_factor, postscale_factor)
    return compression.decompress(out, cctx)


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatter of a list of tensors as one operation."""
    op = resolve_op(op, None)
    return _engine.grouped_reducescatter_async(
        _adapter, tensors, name, op, prescale_factor, postscale_factor,
        process_set)


class HvdGroupedReducescatter(torch.autograd.Function):

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor,
                postscale_factor, *tensors):
        ctx.op = op
        ctx.process_set = process_set
        ctx.scale = (prescale_factor, postscale_factor)
        return tuple(synchronize(grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor,
            postscale_factor)))

    @staticmethod
    def backward(ctx, *grads):
        gathered = synchronize(grouped_allgather_async(
            [g.contiguous() for g in grads], process_set=ctx.process_set))
        return (None, None, None, None, None) + tuple(
            _scatter_grad(g, ctx.op, ctx.process_set, *ctx.scale)
            for g in gathered)


def grouped_reducescatter(tensors, name=None, compression=Compression.none,
                          op=Average, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatter of each tensor in a list, as one operation.
    Differentiable."""
    op = resolve_op(op, None)
    return _apply_grouped(HvdGroupedReducescatter, compression, tensors, name,
                          op, process_set, prescale_factor, postscale_factor)


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Allreduce of a sparse COO tensor by allgathering its indices and
    values; returns a callable that waits and gives the reduced tensor."""
    t = tensor.coalesce() if not tensor.is_coalesced() else tensor
    indices_handle = allgather_async(t._indices().transpose(0, 1).contiguous(),
                                     name="%s.indices" % name,
                                     process_set=process_set)
    values_handle = allgather_async(t._values(), name="%s.values" % name,
                                    process_set=process_set)

    def wait():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / process_set.size()
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values,
                                       t.size())
    return wait

"""hvd.torch collectives: Horovod's names, arguments and autograd semantics.

Tensors cross to libhvd.so as DLPack (torch.utils.dlpack); bool tensors cross
as uint8 with the dtype named in the options (torch 1.13's DLPack has no bool).
Non-contiguous tensors are made contiguous first; in-place results are copied
back into them.
"""

import torch
import torch.utils.dlpack as _dlpack

from hvd import _engine, _lib
from hvd.basics import (Adasum, Average, Max, Min, Product, Sum,  # noqa: F401
                        rank, resolve_op)
from hvd.process_sets import global_process_set
from hvd.torch.compression import Compression

_SUPPORTED_DTYPES = {
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool,
}


class _TorchAdapter(_engine.Adapter):

    def prepare(self, tensor):
        # The per-call path: one attribute read per check, nothing built
        # that the call does not need.
        if not isinstance(tensor, torch.Tensor):
            raise TypeError("expected a torch.Tensor, got %s"
                            % type(tensor).__name__)
        dtype = tensor.dtype
        if dtype not in _SUPPORTED_DTYPES:
            raise ValueError("Tensor type %s is not supported by hvd "
                             "(supported: %s)" % (
                                 dtype, ", ".join(sorted(
                                     str(d) for d in _SUPPORTED_DTYPES))))
        if tensor.is_sparse:
            raise ValueError("hvd collectives take dense tensors; use "
                             "sparse_as_dense or sparse_allreduce_async")
        src = tensor.detach() if tensor.requires_grad else tensor
        copied = not src.is_contiguous()
        if copied:
            src = src.contiguous()
        hvd_dtype = -1
        view = src
        if dtype is torch.bool:
            view = src.view(torch.uint8)
            hvd_dtype = _lib.DTYPE_BOOL
        capsule = _to_dlpack(view)
        stream = None
        if src.is_cuda:
            stream = torch.cuda.current_stream(src.device).cuda_stream
        # The capsule holds the tensor; strides are left as torch wrote
        # them (the core accepts any stride of a size-1 dimension).
        return _engine.Prepared(_capsule_pointer(capsule), capsule,
                                hvd_dtype, src, copied, stream)

    def empty_like(self, prepared):
        src = prepared.src
        if not src.is_cuda and \
                src.numel() * src.element_size() >= _POOLED_OUTPUT_BYTES:
            return _engine.pooled_empty_like(self, prepared)
        return self.prepare(torch.empty_like(
            src, memory_format=torch.contiguous_format))

    def from_capsule(self, capsule, device):
        return _dlpack.from_dlpack(capsule)

    def restore(self, result, prepared):
        if prepared.src.dtype == torch.bool and result.dtype == torch.uint8:
            return result.view(torch.bool)
        return result

    def copy_back(self, dst, prepared):
        with torch.no_grad():
            dst.copy_(prepared.src)

    def is_integer(self, prepared):
        dtype = prepared.src.dtype
        return not dtype.is_floating_point and dtype != torch.bool


_to_dlpack = _dlpack.to_dlpack
_capsule_pointer = _engine.capsule_pointer
_POOLED_OUTPUT_BYTES = _engine.POOLED_OUTPUT_BYTES

_adapter = _TorchAdapter()

poll = _engine.poll


def synchronize(handle):
    """Waits for an asynchronous operation and returns its result: a tensor,
    a list of tensors (grouped ops), or (output, received_splits) for
    alltoall. Raises HvdInternalError (or a subclass) if it failed."""
    return _engine.synchronize(handle)


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
    return _engine.allreduce_async(_adapter, tensor, True, name, op,
                                   prescale_factor, postscale_factor,
                                   process_set)


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
    compressed, cctx = compression.compress(tensor)
    if not isinstance(compressed, torch.Tensor) or (
            compressed.requires_grad and torch.is_grad_enabled()):
        reduced = HvdAllreduce.apply(compressed, name, op, prescale_factor,
                                     postscale_factor, process_set)
    else:
        # No graph to record: the Function's forward without autograd's
        # bookkeeping (a few microseconds a call).
        reduced = synchronize(allreduce_async(
            compressed, None, name, op, prescale_factor, postscale_factor,
            process_set))
    return compression.decompress(reduced, cctx)


def allreduce_(tensor, average=None, name=None, op=None,
               prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """In-place allreduce; returns `tensor`."""
    return synchronize(allreduce_async_(tensor, average, name, op,
                                        prescale_factor, postscale_factor,
                                        process_set))


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
    if not tensors:
        return []
    compressed, cctxs = zip(*[compression.compress(t) for t in tensors])
    reduced = HvdGroupedAllreduce.apply(name, op, prescale_factor,
                                        postscale_factor, process_set,
                                        *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, cctxs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """In-place grouped allreduce; returns `tensors`."""
    return synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor,
        process_set))


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


# --------------------------------------------------------------- alltoall --

def _splits_list(splits):
    if splits is None:
        return None
    if isinstance(splits, torch.Tensor):
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
    if not tensors:
        return []
    compressed, cctxs = zip(*[compression.compress(t) for t in tensors])
    out = HvdGroupedReducescatter.apply(name, op, process_set,
                                        prescale_factor, postscale_factor,
                                        *compressed)
    return [compression.decompress(t, c) for t, c in zip(out, cctxs)]


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

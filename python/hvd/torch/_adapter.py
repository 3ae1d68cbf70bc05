"""The torch side of the core's calls: how a torch.Tensor crosses to
libhvd.so (DLPack; bool as uint8 with the dtype named; non-contiguous ones
made contiguous) and comes back, for every hvd.torch collective."""

import torch
import torch.utils.dlpack as _dlpack

from hvd import _engine, _fastpath, _lib

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
        return _prepared(src, copied)

    def empty_like(self, prepared):
        src = prepared.src
        if not src.is_cuda and \
                src.numel() * src.element_size() >= _POOLED_OUTPUT_BYTES:
            return _engine.pooled_empty_like(self, prepared)
        # A fresh contiguous tensor of a supported type, without autograd
        # history: nothing of prepare's to check.
        return _prepared(torch.empty_like(
            src, memory_format=torch.contiguous_format), False)

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


def _prepared(src, copied):
    """A Prepared for `src`, a contiguous dense tensor of a supported type
    that does not require grad."""
    hvd_dtype = -1
    view = src
    if src.dtype is torch.bool:
        view = src.view(torch.uint8)
        hvd_dtype = _lib.DTYPE_BOOL
    capsule = _to_dlpack(view)
    stream = None
    if src.is_cuda:
        stream = _current_stream(src.get_device())
    # The capsule holds the tensor; strides are left as torch wrote them
    # (the core accepts any stride of a size-1 dimension).
    return _engine.Prepared(_capsule_pointer(capsule), capsule, hvd_dtype,
                            src, copied, stream)


def _stream_object(device_index):
    return torch.cuda.current_stream(device_index).cuda_stream


# The current CUDA stream of a device, as the int hvd_options.stream takes:
# torch's raw getter where it has one (0.4 us a call on an H200 host,
# against 5.5 us for building the torch.cuda.Stream object), else the
# public API.
_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream",
                          _stream_object)
_to_dlpack = _dlpack.to_dlpack
_capsule_pointer = _engine.capsule_pointer
_POOLED_OUTPUT_BYTES = _engine.POOLED_OUTPUT_BYTES

_adapter = _TorchAdapter()

# What the C path takes, as DLPack (type code, bits): every supported type
# but bool, which crosses as uint8 with the type named in the options.
_FAST_DTYPES = {
    torch.uint8: (1, 8), torch.int8: (0, 8), torch.int16: (0, 16),
    torch.int32: (0, 32), torch.int64: (0, 64), torch.float16: (2, 16),
    torch.bfloat16: (4, 16), torch.float32: (2, 32), torch.float64: (2, 64),
}
_fastpath.register_tensor_type(torch.Tensor, _FAST_DTYPES, torch.empty_like,
                               _current_stream)

poll = _engine.poll


def synchronize(handle):
    """Waits for an asynchronous operation and returns its result: a tensor,
    a list of tensors (grouped ops), or (output, received_splits) for
    alltoall. Raises HvdInternalError (or a subclass) if it failed."""
    return _engine.synchronize(handle)

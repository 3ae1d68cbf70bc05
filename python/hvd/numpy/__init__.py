"""hvd for numpy arrays: `import hvd.numpy as hvd`.

The collectives of hvd.torch, with the same names and arguments, on numpy
arrays (no autograd, no optimizer):

    import numpy as np
    import hvd.numpy as hvd
    hvd.init()
    total = hvd.allreduce(np.ones(3), op=hvd.Sum)

Arrays cross to libhvd.so as DLPack (ndarray.__dlpack__ / numpy.from_dlpack);
bool arrays cross as uint8 with the dtype named in the options.
"""

import numpy as np

from hvd import _engine, _fastpath, _lib, _objects
from hvd.basics import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built,
    gloo_enabled, init, is_homogeneous, is_initialized, local_rank,
    local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
    rank, resolve_op, rocm_built, shutdown, size, start_timeline,
    stop_timeline, version)
from hvd.exceptions import (  # noqa: F401
    HostsUpdatedInterrupt, HvdAbortedError, HvdError, HvdInternalError,
    HvdInvalidArgumentError, HvdNotInitializedError, HvdNotSupportedError,
    HvdTimeoutError, HvdWorkerRemovedError)
from hvd.process_sets import (  # noqa: F401
    ProcessSet, add_process_set, global_process_set, remove_process_set)

# A set: membership is one hash lookup on the per-call path.
_SUPPORTED_DTYPES = frozenset(np.dtype(t) for t in (
    np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64, np.float16,
    np.float32, np.float64, np.bool_))


# DLPack (type code, bits) -> numpy dtype.
_FROM_DL = {
    (0, 8): np.int8, (0, 16): np.int16, (0, 32): np.int32, (0, 64): np.int64,
    (1, 8): np.uint8, (1, 16): np.uint16, (1, 32): np.uint32,
    (1, 64): np.uint64, (2, 16): np.float16, (2, 32): np.float32,
    (2, 64): np.float64,
}


class _Owned:
    """Owns an hvd-allocated DLManagedTensor and exposes its memory through
    __array_interface__: arrays made from it are writable, share the memory
    and keep this object (hence the memory) alive; the last one to go calls
    the DLPack deleter. (numpy.from_dlpack would give read-only arrays.)"""

    def __init__(self, managed_ptr, shape, typestr, data):
        self._ptr = managed_ptr
        self.__array_interface__ = {"shape": shape, "typestr": typestr,
                                    "data": (data, False), "version": 3}

    def __del__(self):
        if self._ptr:
            ptr, self._ptr = self._ptr, None
            _engine.free_managed(ptr)


class _NumpyAdapter(_engine.Adapter):

    def prepare(self, array):
        if not isinstance(array, np.ndarray):
            array = np.asarray(array)
        if array.dtype not in _SUPPORTED_DTYPES:
            raise ValueError("array type %s is not supported by hvd "
                             "(supported: %s)" % (array.dtype, ", ".join(
                                 sorted(str(d) for d in _SUPPORTED_DTYPES))))
        flags = array.flags
        copied = not (flags.c_contiguous and flags.writeable)
        # DLPack cannot export read-only arrays.
        src = np.array(array, order="C", copy=True) if copied else array
        return _prepared(src, copied)

    def empty_like(self, prepared):
        src = prepared.src
        if src.nbytes >= _engine.POOLED_OUTPUT_BYTES:
            return _engine.pooled_empty_like(self, prepared)
        # A fresh C-contiguous writable array of a supported type: nothing
        # of prepare's to check.
        return _prepared(np.empty(src.shape, src.dtype), False)

    def from_managed(self, managed_ptr):
        dl = _engine.managed_tensor(managed_ptr).dl_tensor
        if dl.device.device_type != _lib.DL_CPU:
            _engine.free_managed(managed_ptr)
            raise HvdInternalError("hvd.numpy: output on device type %d, "
                                   "not CPU" % dl.device.device_type)
        dtype = np.dtype(_FROM_DL[(dl.dtype.code, dl.dtype.bits)])
        shape = tuple(dl.shape[i] for i in range(dl.ndim))
        if dl.strides:
            expected = _c_strides(shape)
            if any(shape[i] > 1 and dl.strides[i] != expected[i]
                   for i in range(dl.ndim)):
                _engine.free_managed(managed_ptr)
                raise HvdInternalError("hvd.numpy: output is not compact")
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0 or not dl.data:
            _engine.free_managed(managed_ptr)
            return np.empty(shape, dtype=dtype)
        owner = _Owned(managed_ptr, shape, dtype.str,
                       dl.data + dl.byte_offset)
        return np.asarray(owner)

    def restore(self, result, prepared):
        if prepared.src.dtype == np.bool_ and result.dtype == np.uint8:
            return result.view(np.bool_)
        return result

    def copy_back(self, dst, prepared):
        np.copyto(dst, prepared.src)

    def is_integer(self, prepared):
        return prepared.src.dtype.kind in "iu"


def _prepared(src, copied):
    """A Prepared for `src`, a C-contiguous writable array of a supported
    type."""
    view = src
    dtype = -1
    if src.dtype.kind == "b":
        view = src.view(np.uint8)
        dtype = _lib.DTYPE_BOOL
    capsule = view.__dlpack__()
    # The capsule holds the array; strides are left as numpy wrote them
    # (the core accepts any stride of a size-1 dimension).
    return _engine.Prepared(_engine.capsule_pointer(capsule), capsule, dtype,
                            src, copied)


def _c_strides(shape):
    """Element strides of a C-contiguous array of `shape`."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return strides[::-1]


_adapter = _NumpyAdapter()
_fastpath.register_array_type(np.ndarray, np.empty_like)

poll = _engine.poll
synchronize = _engine.synchronize


def _check_inplace(array):
    if not isinstance(array, np.ndarray):
        raise TypeError("in-place operations take a numpy.ndarray, not %s"
                        % type(array).__name__)
    if not array.flags.writeable:
        raise ValueError("in-place operation on a read-only array")


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    return _engine.allreduce_async(_adapter, tensor, False, name,
                                   resolve_op(op, average), prescale_factor,
                                   postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    return _allreduce_async_in_place(tensor, name, resolve_op(op, average),
                                     prescale_factor, postscale_factor,
                                     process_set)


def _allreduce_async_in_place(tensor, name, op, prescale, postscale,
                              process_set):
    _check_inplace(tensor)
    return _engine.allreduce_async(_adapter, tensor, True, name, op, prescale,
                                   postscale, process_set)


def allreduce(tensor, average=None, name=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Returns the reduction (default Average) of `tensor` over the set."""
    op = resolve_op(op, average)
    out = _fastpath.allreduce(tensor, None, name, op, prescale_factor,
                              postscale_factor, process_set)
    if out is not NotImplemented:
        return out
    return synchronize(allreduce_async(tensor, None, name, op,
                                       prescale_factor, postscale_factor,
                                       process_set))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns `tensor`."""
    return _fastpath.allreduce_in_place(
        tensor, name, resolve_op(op, average), prescale_factor,
        postscale_factor, process_set, _allreduce_async_in_place)


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    return _engine.grouped_allreduce_async(
        _adapter, tensors, False, name, resolve_op(op, average),
        prescale_factor, postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    for t in tensors:
        _check_inplace(t)
    return _engine.grouped_allreduce_async(
        _adapter, tensors, True, name, resolve_op(op, average),
        prescale_factor, postscale_factor, process_set)


def grouped_allreduce(tensors, average=None, name=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    return synchronize(grouped_allreduce_async(
        tensors, average, name, op, prescale_factor, postscale_factor,
        process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor,
        process_set))


def allgather_async(tensor, name=None, process_set=global_process_set):
    return _engine.allgather_async(_adapter, tensor, name, process_set)


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenation of every rank's array along the first dimension."""
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None,
                            process_set=global_process_set):
    return _engine.grouped_allgather_async(_adapter, tensors, name,
                                           process_set)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    return _engine.broadcast_async(_adapter, tensor, False, root_rank, name,
                                   process_set)


def broadcast_async_(tensor, root_rank, name=None,
                     process_set=global_process_set):
    _check_inplace(tensor)
    return _engine.broadcast_async(_adapter, tensor, True, root_rank, name,
                                   process_set)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's array (root_rank is a global rank), on every rank."""
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name,
                                        process_set))


def _splits_array(received):
    return np.asarray(received, dtype=np.int32)


def alltoall_async(tensor, splits=None, name=None,
                   process_set=global_process_set):
    if isinstance(splits, np.ndarray) and splits.dtype.kind not in "iu":
        # Refused by type, never by value, as the torch binding does.
        raise ValueError("alltoall: splits must be an array of integers, "
                         "not %s" % splits.dtype)
    splits = None if splits is None else [int(s) for s in
                                          np.asarray(splits).reshape(-1)]
    return _engine.alltoall_async(_adapter, tensor, splits, name, process_set,
                                  _splits_array)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends rows splits[i] to rank i of the set; returns the received rows
    (and, when `splits` is given, the received splits)."""
    output, received = synchronize(alltoall_async(tensor, splits, name,
                                                  process_set))
    return output if splits is None else (output, received)


def reducescatter_async(tensor, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    return _engine.reducescatter_async(_adapter, tensor, name,
                                       resolve_op(op, None), prescale_factor,
                                       postscale_factor, process_set)


def reducescatter(tensor, name=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """This rank's slice (first dimension) of the reduction over the set."""
    return synchronize(reducescatter_async(tensor, name, op, process_set,
                                           prescale_factor, postscale_factor))


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    return _engine.grouped_reducescatter_async(
        _adapter, tensors, name, resolve_op(op, None), prescale_factor,
        postscale_factor, process_set)


def grouped_reducescatter(tensors, name=None, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    return synchronize(grouped_reducescatter_async(
        tensors, name, op, process_set, prescale_factor, postscale_factor))


def join():
    """This rank has no more data; returns the rank that joined last."""
    return synchronize(_engine.join_async())


def barrier(process_set=global_process_set):
    synchronize(_engine.barrier_async(process_set))


_OBJECTS = _objects.Frontend(broadcast_=broadcast_, allgather=allgather,
                             from_numpy=lambda a: a, to_numpy=lambda a: a)


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """root_rank's `obj` (picklable) on every rank."""
    return _objects.broadcast_object(_OBJECTS, obj, root_rank, name,
                                     process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's `obj` (picklable), as a list in rank order."""
    return _objects.allgather_object(_OBJECTS, obj, name, process_set)


# hvd.elastic with `import hvd.numpy as hvd`; last: it imports the above.
from hvd.numpy import elastic  # noqa: F401,E402

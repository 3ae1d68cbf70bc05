"""Collectives over the C ABI, for any framework that speaks DLPack.

A framework binding supplies an Adapter (how to turn its tensors into a
DLTensor pointer and back); everything else is here: options, handles, the
table that keeps inputs alive until their handle completes, error mapping.

Ownership rules (core/c_api.h):
  * Inputs cross as the DLTensor at offset 0 of a DLManagedTensor taken from
    the framework's own DLPack capsule. hvd never calls that capsule's
    deleter; the capsule (and the tensor behind it) is kept in the pending
    table until the handle completes, then dropped, and its destructor frees
    the DLManagedTensor as usual.
  * Outputs hvd allocates (allgather, alltoall, reducescatter) are taken with
    hvd_handle_output, which transfers ownership: the pointer is wrapped in a
    fresh "dltensor" capsule that the framework's from_dlpack consumes (and
    whose deleter it calls when the tensor dies).
  * Out-of-place outputs of host tensors of POOLED_OUTPUT_BYTES or more are
    allocated by hvd too (hvd_empty_like, pooled_empty_like): fresh pages
    cost more to touch than the collective moves; the pool's are warm.

The per-call path is kept lean (docs/python_performance.md):
options structs are cached by value, the pending table is a plain dict
(its operations are atomic under the GIL), and nothing is built per call
that a call does not need.
"""

import ctypes

from hvd import _lib
from hvd import process_sets as _ps
from hvd.exceptions import HvdInternalError, from_status

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# PyCapsule_New keeps the name pointer: it must live as long as the capsule.
_DLTENSOR_NAME = b"dltensor"

# Host outputs this large come from hvd's pool (hvd_empty_like); smaller ones
# from the framework's allocator, which reuses its memory itself.
POOLED_OUTPUT_BYTES = 4 << 20

# How long one hvd_wait call blocks before Python gets a chance to handle
# signals (Ctrl-C); the wait itself is repeated until the handle completes.
WAIT_SLICE_SECONDS = 1.0


class Prepared:
    """One tensor ready to cross the ABI.

    ptr:   address of its DLTensor (int).
    keep:  objects that must stay alive while hvd uses the memory.
    dtype: HVD_DTYPE_* override, or -1 (DLPack's dtype is right).
    src:   the (contiguous) framework tensor whose memory hvd reads/writes.
    copied: True if src is a copy of the caller's tensor (in-place results
            must then be copied back).
    stream: cudaStream_t as an int, or None.
    """
    __slots__ = ("ptr", "keep", "dtype", "src", "copied", "stream")

    def __init__(self, ptr, keep, dtype, src, copied, stream=None):
        self.ptr = ptr
        self.keep = keep
        self.dtype = dtype
        self.src = src
        self.copied = copied
        self.stream = stream


class Adapter:
    """What a framework binding implements."""

    def prepare(self, tensor):
        """Returns a Prepared for `tensor` (made contiguous if needed)."""
        raise NotImplementedError

    def empty_like(self, prepared):
        """A Prepared for a new uninitialized tensor like prepared.src."""
        raise NotImplementedError

    def from_capsule(self, capsule, device):
        """A framework tensor consuming a "dltensor" capsule."""
        raise NotImplementedError

    def from_managed(self, managed_ptr):
        """A framework tensor taking ownership of an hvd-allocated
        DLManagedTensor*; by default through a capsule and from_capsule."""
        return wrap_capsule(self, managed_ptr)

    def restore(self, result, prepared):
        """`result` (raw output tensor) cast back to the caller's dtype (bool
        tensors cross as uint8)."""
        return result

    def copy_back(self, dst, prepared):
        """Copies prepared.src into `dst` (in-place op on a copied input)."""
        raise NotImplementedError

    def is_integer(self, prepared):
        """True for integer (not bool, not floating-point) tensors."""
        raise NotImplementedError


def capsule_pointer(capsule):
    """Address of the DLManagedTensor in a "dltensor" capsule, which is also
    the address of its DLTensor (offset 0)."""
    return _capsule_get_pointer(capsule, _DLTENSOR_NAME)


def compact_pointer(capsule):
    """capsule_pointer() of a capsule exported from a C-contiguous tensor,
    with its strides cleared (NULL: compact row-major, in DLPack's terms).

    Frameworks write strides of their own choosing for dimensions of size 0
    and 1 (torch 1.13 writes 1), which a strict compactness check misreads.
    The strides array belongs to the producer and no deleter reads the
    pointer, so clearing it is safe."""
    ptr = capsule_pointer(capsule)
    _lib.DLTensor.from_address(ptr).strides = None
    return ptr


def pooled_empty_like(adapter, prepared):
    """A Prepared for a new tensor like prepared's, in memory hvd allocates
    (hvd_empty_like: pooled, warm pages), owned by the framework tensor."""
    ptr = _lib.lib().hvd_empty_like(prepared.ptr)
    if not ptr:
        raise _lib.last_error("allocating an output")
    return adapter.prepare(adapter.from_managed(ptr))


def managed_tensor(managed_ptr):
    return _lib.DLManagedTensor.from_address(managed_ptr)


def free_managed(managed_ptr):
    """Calls the deleter of an hvd-allocated DLManagedTensor."""
    managed = managed_tensor(managed_ptr)
    if managed.deleter:
        managed.deleter(ctypes.cast(managed_ptr,
                                    ctypes.POINTER(_lib.DLManagedTensor)))


def wrap_capsule(adapter, managed_ptr):
    """Framework tensor owning `managed_ptr`, through a new "dltensor"
    capsule handed to the adapter's from_capsule."""
    dl = managed_tensor(managed_ptr).dl_tensor
    device = (dl.device.device_type, dl.device.device_id)
    capsule = _capsule_new(managed_ptr, _DLTENSOR_NAME, None)
    try:
        return adapter.from_capsule(capsule, device)
    except BaseException:
        # Not consumed: the capsule has no destructor, so free it here.
        free_managed(managed_ptr)
        raise


# ---------------------------------------------------------------- handles --

# The C module's wait (_speedups.wait) while the module is on, else None:
# synchronize's path for handles whose result needs nothing from them (one
# C call waits and releases, instead of two ctypes calls and a frame).
# Set by _fastpath.
result_waiter = None

# handle -> (keep, finish): what its operation needs alive, and
# finish(handle), which makes synchronize's result (None: the result is
# `keep` itself, an in-place op's tensor); a tuple, made without a frame,
# one per gradient per step. Single dict operations (setitem, pop, clear)
# are atomic under the GIL, which is all the table needs: a handle is added
# once, by the thread that submitted it, and popped once.
_pending = {}


def forget_pending():
    """Drops the table (hvd.shutdown: the core completes every handle)."""
    _pending.clear()


def submit_handle(handle, keep, finish):
    """`handle` from an *_async call, with what its operation needs alive
    and finish(handle), which makes synchronize's result; finish None: the
    result is `keep` itself (an in-place op's tensor)."""
    if handle <= 0:
        raise _lib.last_error("enqueueing the operation (handle %d)" % handle)
    _pending[handle] = (keep, finish)  # keep_pending, without its frame
    return handle


def keep_pending(handle, keep, finish):
    _pending[handle] = (keep, finish)


def poll(handle):
    """True if the operation behind `handle` has completed."""
    rc = _lib.lib().hvd_poll(handle)
    if rc == _lib.HVD_INVALID_HANDLE:
        raise ValueError("hvd.poll: %r is not a handle of a pending "
                         "operation" % (handle,))
    return rc == 1


def synchronize(handle):
    """Waits for `handle` and returns its result; raises the core's error.
    Unknown handles give None (as Horovod's synchronize does)."""
    entry = _pending.pop(handle, None)
    if entry is None:
        return None
    keep, finish = entry
    if finish is None and result_waiter is not None:
        return _wait_in_c(handle, entry)
    lib = _lib.lib()
    try:
        rc = lib.hvd_wait(handle, WAIT_SLICE_SECONDS)
        while rc == _lib.HVD_TIMEOUT:
            rc = lib.hvd_wait(handle, WAIT_SLICE_SECONDS)
    except BaseException:
        # Interrupted (Ctrl-C): the operation may still be running, so its
        # tensors must stay alive and the handle stays waitable.
        _pending[handle] = entry
        raise
    try:
        if rc == _lib.HVD_OK:
            return keep if finish is None else finish(handle)
        if rc == _lib.HVD_ERROR:
            raise from_status(lib.hvd_handle_error_code(handle),
                              _lib.decode(lib.hvd_handle_error(handle)))
        raise HvdInternalError("hvd: handle %d is not valid (hvd_wait "
                               "returned %d)" % (handle, rc))
    finally:
        lib.hvd_release(handle)


def _wait_in_c(handle, entry):
    """synchronize through result_waiter: an entry whose result is its keep."""
    try:
        failed = result_waiter(handle)
    except BaseException:
        _pending[handle] = entry  # Interrupted: as synchronize does.
        raise
    if failed is not None:
        raise from_status(*failed)
    return entry[0]


def _take_outputs(adapter, handle, prepared_list):
    lib = _lib.lib()
    count = lib.hvd_handle_output_count(handle)
    if count != len(prepared_list):
        raise HvdInternalError("hvd: handle %d has %d outputs, expected %d"
                               % (handle, count, len(prepared_list)))
    results = []
    for i, prepared in enumerate(prepared_list):
        ptr = lib.hvd_handle_output(handle, i)
        if not ptr:
            raise HvdInternalError("hvd: handle %d has no output %d"
                                   % (handle, i))
        results.append(adapter.restore(adapter.from_managed(ptr),
                                      prepared))
    return results


def _received_splits(handle, index, capacity):
    lib = _lib.lib()
    buf = (ctypes.c_int64 * max(capacity, 1))()
    n = lib.hvd_handle_splits(handle, index, buf, capacity)
    if n > capacity:
        buf = (ctypes.c_int64 * n)()
        n = lib.hvd_handle_splits(handle, index, buf, n)
    if n < 0:
        raise HvdInternalError("hvd: handle %d has no received splits"
                               % handle)
    return list(buf[:n])


# ---------------------------------------------------------------- options --

# (kind, name, set id, op, prescale, postscale, root, dtype, stream) ->
# ctypes.byref of an hvd_options holding those values. The core copies the
# options (and the name) at enqueue, so one struct serves every call with
# the same values; the byref keeps the struct and its name alive.
_options_cache = {}
_OPTIONS_CACHE_LIMIT = 4096


def cached_options(kind, name, process_set, op=_lib.OP_SUM, prescale=1.0,
                   postscale=1.0, root_rank=0, dtype=-1, stream=None):
    """(ctypes.byref, address, keep) of an hvd_options for these values,
    cached. Hold the tuple while a call uses the struct. Once cached, one
    dict lookup and no further frame (every gradient of every step comes
    here): the set's id is read in place, and only a miss validates the set
    (_options, through process_sets.resolve, names a bad one)."""
    if process_set is None:
        set_id = 0
    elif isinstance(process_set, _ps.ProcessSet):
        set_id = process_set.process_set_id
    else:
        set_id = None
    key = (kind, name, set_id, op, prescale, postscale, root_rank, dtype,
           stream)
    cached = _options_cache.get(key)
    if cached is None:
        opts, keep = _options(kind, name, process_set, op, prescale,
                              postscale, root_rank, dtype, stream)
        # keep: the struct and its encoded name, alive as long as the entry
        # (a call in flight holds the returned ref, hence the struct).
        cached = (ctypes.byref(opts), ctypes.addressof(opts), keep)
        if len(_options_cache) >= _OPTIONS_CACHE_LIMIT:
            _options_cache.clear()  # e.g. names unique per call: start over
        _options_cache[key] = cached
    return cached


def _options_ref(kind, name, process_set, op=_lib.OP_SUM, prescale=1.0,
                 postscale=1.0, root_rank=0, dtype=-1, stream=None):
    """ctypes.byref(hvd_options) for these values, cached."""
    return cached_options(kind, name, process_set, op, prescale, postscale,
                          root_rank, dtype, stream)[0]


def _forget_process_set(set_id):
    """Drops the cached options of a removed process set: its calls will not
    come again, and a job that adds and removes sets would fill the cache."""
    for key in [k for k in _options_cache if k[2] == set_id]:
        del _options_cache[key]


_ps._on_remove.append(_forget_process_set)


def _options(kind, name, process_set, op=_lib.OP_SUM, prescale=1.0,
             postscale=1.0, root_rank=0, dtype=-1, stream=None):
    """hvd_options plus the objects its pointers refer to."""
    opts = _lib.default_options()
    keep = [opts]
    if name:
        encoded = ("%s.%s" % (kind, name)).encode()
        keep.append(encoded)
        opts.name = encoded
    opts.op = op
    opts.prescale_factor = float(prescale)
    opts.postscale_factor = float(postscale)
    opts.process_set_id = _ps.resolve(process_set)
    opts.root_rank = root_rank
    opts.dtype = dtype
    if stream:
        opts.stream = stream
    return opts, keep


def _common_dtype(prepared_list, what):
    dtypes = {p.dtype for p in prepared_list}
    if len(dtypes) > 1:
        raise ValueError("%s: bool tensors cannot be grouped with tensors of "
                         "other types" % what)
    return dtypes.pop() if dtypes else -1


def _pointer_array(prepared_list):
    return (ctypes.c_void_p * max(len(prepared_list), 1))(
        *[p.ptr for p in prepared_list])


def _finish_inplace(adapter, tensor, prepared):
    if prepared.copied:
        adapter.copy_back(tensor, prepared)
    return tensor


# ------------------------------------------------------------ collectives --

def _integer_average(adapter, op, prepared_list, process_set, postscale):
    """Horovod averages integer tensors as a Sum with the postscale factor
    divided by the set's size: the product is taken in float64 and
    truncated toward zero (so -7 averaged over 2 ranks is -3). The core's
    Average is for floating point only. Returns (op, postscale) to submit."""
    if op != _lib.OP_AVERAGE or not any(adapter.is_integer(p)
                                        for p in prepared_list):
        return op, postscale
    if process_set is None:
        process_set = _ps.global_process_set
    _ps.resolve(process_set)
    return _lib.OP_SUM, float(postscale) / process_set.size()


def allreduce_async(adapter, tensor, inplace, name, op, prescale, postscale,
                    process_set):
    inp = adapter.prepare(tensor)
    op, postscale = _integer_average(adapter, op, [inp], process_set,
                                     postscale)
    opts = _options_ref("allreduce", name, process_set, op, prescale,
                        postscale, 0, inp.dtype, inp.stream)
    if inplace:
        handle = _lib.lib().hvd_allreduce_async(inp.ptr, None, opts)
        if not inp.copied:
            return submit_handle(handle, (inp, opts), lambda _: tensor)

        def finish(_):
            return _finish_inplace(adapter, tensor, inp)
        return submit_handle(handle, (inp, opts), finish)
    out = adapter.empty_like(inp)
    handle = _lib.lib().hvd_allreduce_async(inp.ptr, out.ptr, opts)

    def finish(_):
        return adapter.restore(out.src, inp)
    return submit_handle(handle, (inp, out, opts), finish)


def grouped_allreduce_async(adapter, tensors, inplace, name, op, prescale,
                            postscale, process_set):
    tensors = list(tensors)
    inps = [adapter.prepare(t) for t in tensors]
    outs = None if inplace else [adapter.empty_like(p) for p in inps]
    dtype = _common_dtype(inps, "grouped_allreduce")
    op, postscale = _integer_average(adapter, op, inps, process_set,
                                     postscale)
    opts = _options_ref("grouped_allreduce", name, process_set, op,
                        prescale, postscale, 0, dtype,
                        inps[0].stream if inps else None)
    keep = opts
    in_arr = _pointer_array(inps)
    out_arr = None if outs is None else _pointer_array(outs)
    handle = _lib.lib().hvd_grouped_allreduce_async(
        len(inps), in_arr, out_arr, opts)
    if inplace:
        def finish(_):
            return [_finish_inplace(adapter, t, p)
                    for t, p in zip(tensors, inps)]
    else:
        def finish(_):
            return [adapter.restore(o.src, p) for o, p in zip(outs, inps)]
    return submit_handle(handle, (inps, outs, in_arr, out_arr, keep), finish)


def allgather_async(adapter, tensor, name, process_set):
    inp = adapter.prepare(tensor)
    keep = opts = _options_ref("allgather", name, process_set,
                               dtype=inp.dtype, stream=inp.stream)
    handle = _lib.lib().hvd_allgather_async(inp.ptr, opts)

    def finish(h):
        return _take_outputs(adapter, h, [inp])[0]
    return submit_handle(handle, (inp, keep), finish)


def grouped_allgather_async(adapter, tensors, name, process_set):
    inps = [adapter.prepare(t) for t in tensors]
    dtype = _common_dtype(inps, "grouped_allgather")
    keep = opts = _options_ref("grouped_allgather", name, process_set,
                               dtype=dtype,
                               stream=inps[0].stream if inps else None)
    in_arr = _pointer_array(inps)
    handle = _lib.lib().hvd_grouped_allgather_async(len(inps), in_arr, opts)

    def finish(h):
        return _take_outputs(adapter, h, inps)
    return submit_handle(handle, (inps, in_arr, keep), finish)


def broadcast_async(adapter, tensor, inplace, root_rank, name, process_set):
    if process_set is None:
        process_set = _ps.global_process_set
    root_in_set = process_set.set_rank_of(int(root_rank))
    inp = adapter.prepare(tensor)
    out = None if inplace else adapter.empty_like(inp)
    keep = opts = _options_ref("broadcast", name, process_set,
                               root_rank=root_in_set, dtype=inp.dtype,
                               stream=inp.stream)
    handle = _lib.lib().hvd_broadcast_async(
        inp.ptr, None if out is None else out.ptr, opts)
    if inplace:
        def finish(_):
            return _finish_inplace(adapter, tensor, inp)
    else:
        def finish(_):
            return adapter.restore(out.src, inp)
    return submit_handle(handle, (inp, out, keep), finish)


def alltoall_async(adapter, tensor, splits, name, process_set, wrap_splits):
    """`splits`: None (even) or a sequence of ints; the handle's result is
    (output, wrap_splits(received_splits_list))."""
    inp = adapter.prepare(tensor)
    opts, keep = _options("alltoall", name, process_set, dtype=inp.dtype,
                          stream=inp.stream)
    if splits is not None:
        splits = [int(s) for s in splits]
        arr = (ctypes.c_int64 * max(len(splits), 1))(*splits)
        keep.append(arr)
        opts.splits = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))
        opts.num_splits = len(splits)
    handle = _lib.lib().hvd_alltoall_async(inp.ptr, ctypes.byref(opts))
    set_size = process_set.size() if process_set is not None else None

    def finish(h):
        # Splits first: taking the output moves the whole result out.
        received = _received_splits(h, 0, set_size or 1)
        output = _take_outputs(adapter, h, [inp])[0]
        return output, wrap_splits(received)
    return submit_handle(handle, (inp, keep), finish)


def reducescatter_async(adapter, tensor, name, op, prescale, postscale,
                        process_set):
    inp = adapter.prepare(tensor)
    op, postscale = _integer_average(adapter, op, [inp], process_set,
                                     postscale)
    keep = opts = _options_ref("reducescatter", name, process_set, op,
                               prescale, postscale, dtype=inp.dtype,
                               stream=inp.stream)
    handle = _lib.lib().hvd_reducescatter_async(inp.ptr, opts)

    def finish(h):
        return _take_outputs(adapter, h, [inp])[0]
    return submit_handle(handle, (inp, keep), finish)


def grouped_reducescatter_async(adapter, tensors, name, op, prescale,
                                postscale, process_set):
    inps = [adapter.prepare(t) for t in tensors]
    dtype = _common_dtype(inps, "grouped_reducescatter")
    op, postscale = _integer_average(adapter, op, inps, process_set,
                                     postscale)
    keep = opts = _options_ref("grouped_reducescatter", name, process_set,
                               op, prescale, postscale, dtype=dtype,
                               stream=inps[0].stream if inps else None)
    in_arr = _pointer_array(inps)
    handle = _lib.lib().hvd_grouped_reducescatter_async(
        len(inps), in_arr, opts)

    def finish(h):
        return _take_outputs(adapter, h, inps)
    return submit_handle(handle, (inps, in_arr, keep), finish)


def barrier_async(process_set):
    opts, keep = _options("barrier", None, process_set)
    handle = _lib.lib().hvd_barrier_async(ctypes.byref(opts))
    return submit_handle(handle, keep, lambda _: None)


def join_async():
    opts, keep = _options("join", None, None)
    handle = _lib.lib().hvd_join_async(ctypes.byref(opts))
    return submit_handle(handle, keep,
                         lambda h: int(_lib.lib().hvd_handle_result(h)))

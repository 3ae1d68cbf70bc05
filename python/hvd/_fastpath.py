"""Allreduce calls through hvd's optional C module, _speedups (_speedups.c):
the submissions _engine makes, with the tensor read, the call into
libhvd.so and the wait in one C call instead of a dozen Python frames and
three ctypes calls (a 4 KiB allreduce: about 3 microseconds less).

Every function here answers NotImplemented, having submitted nothing, when
the module is not there (another Python than the one it was built for, a
build without it) or does not take the tensors (another type, a GPU tensor
of a type registered without a stream function, non-contiguous, bool,
empty, an integer Average); the caller then takes
_engine's path, which handles every case and names every error.
"""

import importlib.machinery
import importlib.util
import os

from hvd import _engine, _lib
from hvd.exceptions import from_status


def _load():
    for path in _lib.built_file_paths("python", "_speedups.abi3.so"):
        if not os.path.exists(path):
            continue
        loader = importlib.machinery.ExtensionFileLoader("hvd._speedups",
                                                         path)
        spec = importlib.util.spec_from_file_location("hvd._speedups", path,
                                                      loader=loader)
        try:
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
        except ImportError:
            continue  # built for another Python
        return module
    return None


_module = _load()
_bound = False
# The module when it is there and enabled, else None: what the per-call
# path tests.
speedups = _module


def available():
    """Whether the C module was found and loads in this Python."""
    return _module is not None


def set_enabled(enabled):
    """Turns the C path on or off (tests and benchmarks compare the two);
    returns whether it was on."""
    global speedups
    was = speedups is not None
    speedups = _module if enabled else None
    if _module is not None:
        _module.set_hooks_enabled(enabled)
    _engine.result_waiter = _module.wait if enabled and _bound else None
    return was


def _bind():
    global _bound
    lib = _lib.lib()

    def address(fn):
        return _lib.ctypes.cast(fn, _lib.ctypes.c_void_p).value
    _module.init(address(lib.hvd_allreduce_async), address(lib.hvd_wait),
                 address(lib.hvd_release), address(lib.hvd_handle_error),
                 address(lib.hvd_handle_error_code),
                 _engine.WAIT_SLICE_SECONDS, _engine.POOLED_OUTPUT_BYTES)
    _bound = True
    _engine.result_waiter = _module.wait


def register_array_type(array_type, empty_like):
    """numpy's: read through the buffer protocol; `empty_like(array)` makes
    out-of-place results."""
    if _module is not None:
        _module.register_array_type(array_type, empty_like)


def register_tensor_type(tensor_type, dtypes, empty_like, stream_of=None):
    """torch's: `dtypes` is {dtype: (DLPack type code, bits)};
    `empty_like(tensor)` makes out-of-place results; `stream_of(device
    index)` gives a GPU's current stream as an int (without it, GPU tensors
    take the Python path)."""
    if _module is not None:
        _module.register_tensor_type(tensor_type, dtypes, empty_like,
                                     stream_of)


def _keep_interrupted(handle, tensors):
    """A wait interrupted (Ctrl-C) leaves the operation running: its tensors
    stay alive and its handle waitable, as _engine.synchronize leaves
    them."""
    _engine.keep_pending(handle, tensors, lambda _: tensors[1])


def _bound_module():
    """The module, bound to the library on first use; None when it is off."""
    module = speedups
    if module is not None and not _bound:
        _bind()
    return module


def allreduce(tensor, out, name, op, prescale, postscale, process_set):
    """Allreduces `tensor` into `out` (`tensor` itself: in place; None: a
    new tensor like it, under POOLED_OUTPUT_BYTES) and waits; returns the
    result, or NotImplemented."""
    module = _bound_module()
    if module is None:
        return NotImplemented
    # Held while the call runs: the cache may drop its entry meanwhile.
    options = _engine.cached_options("allreduce", name, process_set, op,
                                     prescale, postscale)
    result = module.allreduce(tensor, out, options[1],
                              op == _lib.OP_AVERAGE, _keep_interrupted)
    kind = type(result)
    if kind is tuple:
        raise from_status(*result)
    if kind is int:
        raise _lib.last_error("enqueueing the operation (handle %d)"
                              % result)
    return result  # the output, or NotImplemented


def allreduce_in_place(tensor, name, op, prescale, postscale, process_set,
                       python_async_):
    """A binding's allreduce_: through the module when it takes `tensor`,
    else python_async_(tensor, name, op, prescale, postscale, process_set),
    the binding's in-place submission without the module, synchronized."""
    done = allreduce(tensor, tensor, name, op, prescale, postscale,
                     process_set)
    if done is not NotImplemented:
        return done
    return _engine.synchronize(python_async_(tensor, name, op, prescale,
                                             postscale, process_set))


def in_place_options(name, op, prescale, postscale, process_set):
    """The options of an in-place allreduce, for submit_kept: a caller that
    submits under the same ones step after step (DistributedOptimizer, for
    each gradient) keeps them, and skips the cache's lookup."""
    return (_engine.cached_options("allreduce", name, process_set, op,
                                   prescale, postscale),
            op == _lib.OP_AVERAGE)


def submit_kept(tensor, kept):
    """Submits the in-place allreduce of `tensor` under `kept`
    (in_place_options); returns its handle, whose synchronize returns
    `tensor`, or NotImplemented. Every gradient of every step comes here:
    as few frames as possible (each costs a fraction of a microsecond, 161
    times a step for ResNet-50)."""
    module = _bound_module()
    if module is None:
        return NotImplemented
    handle = module.submit(tensor, tensor, kept[0][1], kept[1])
    if handle is NotImplemented:
        return handle
    return _engine.submit_handle(handle, tensor, None)


def gradient_hook(gradient, slow, handles):
    """DistributedOptimizer's hook for `gradient` (reduced alone, without
    compression): the module's hook in C, which submits each step's
    in-place allreduce itself and records it in `handles` and _engine's
    pending table as the Python path does, and calls `slow`, the Python
    hook, for every other case (_speedups_hook.c); `slow` itself without
    the module."""
    if _module is None:
        return slow
    return _module.hook(gradient, slow, handles, _engine._pending)


def submit_in_place(tensor, name, op, prescale, postscale, process_set):
    """submit_kept under these options, looked up in the cache."""
    return submit_kept(tensor, in_place_options(name, op, prescale,
                                                postscale, process_set))

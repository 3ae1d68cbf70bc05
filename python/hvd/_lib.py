"""Loads libhvd.so with ctypes and declares the C ABI (core/c_api.h).

Nothing here knows a framework. The library is:
  1. $HVD_LIBRARY (a path to the .so) if set; then nothing else is tried.
Otherwise the first found of:
  2. next to this package (python/hvd/libhvd.so, where tools/setup.sh puts it),
  3. the source tree: <root>/bazel-bin/core/libhvd.so, or <root>/core/libhvd.so
     (the layout of a Bazel runfiles tree, where <root> is the workspace).
"""

import ctypes
import os
import threading

# Values of core/c_api.h; never renumber.
OP_SUM, OP_AVERAGE, OP_MIN, OP_MAX, OP_PRODUCT, OP_ADASUM = 0, 1, 2, 3, 4, 5

DTYPE_UINT8 = 0
DTYPE_INT8 = 1
DTYPE_UINT16 = 2
DTYPE_INT16 = 3
DTYPE_INT32 = 4
DTYPE_INT64 = 5
DTYPE_FLOAT16 = 6
DTYPE_BFLOAT16 = 7
DTYPE_FLOAT32 = 8
DTYPE_FLOAT64 = 9
DTYPE_BOOL = 10

HVD_OK = 0
HVD_TIMEOUT = 1
HVD_ERROR = -1
HVD_INVALID_HANDLE = -2

# DLPack device types (dlpack.h).
DL_CPU = 1
DL_CUDA = 2
DL_CUDA_HOST = 3


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p),
                ("device", DLDevice),
                ("ndim", ctypes.c_int32),
                ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor),
                            ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]


class Options(ctypes.Structure):
    """hvd_options; build with default_options(). A copy of the C struct:
    python/tests/options_layout_test.py compares it with the library's
    hvd_options_layout()."""
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("name", ctypes.c_char_p),
                ("op", ctypes.c_int32),
                ("prescale_factor", ctypes.c_double),
                ("postscale_factor", ctypes.c_double),
                ("process_set_id", ctypes.c_int32),
                ("root_rank", ctypes.c_int32),
                ("splits", ctypes.POINTER(ctypes.c_int64)),
                ("num_splits", ctypes.c_int32),
                ("stream", ctypes.c_void_p),
                ("dtype", ctypes.c_int32)]


_c_int = ctypes.c_int
_c_i32 = ctypes.c_int32
_c_i64 = ctypes.c_int64
_c_dbl = ctypes.c_double
_c_str = ctypes.c_char_p
_vp = ctypes.c_void_p
_pvp = ctypes.POINTER(ctypes.c_void_p)
_opts = ctypes.POINTER(Options)
_pi32 = ctypes.POINTER(ctypes.c_int32)
_pi64 = ctypes.POINTER(ctypes.c_int64)
_pint = ctypes.POINTER(ctypes.c_int)

# name: (restype, argtypes). DLTensor* and DLTensor** pass as void pointers:
# the bindings hand over the DLTensor at offset 0 of a DLManagedTensor.
_PROTOTYPES = {
    "hvd_default_options": (Options, []),
    "hvd_options_layout": (_c_str, []),
    "hvd_init": (_c_int, []),
    "hvd_shutdown": (_c_int, []),
    "hvd_is_initialized": (_c_int, []),
    "hvd_has_ended": (_c_int, []),
    "hvd_last_error": (_c_str, []),
    "hvd_last_error_code": (_c_int, []),
    "hvd_version": (_c_str, []),
    "hvd_rank": (_c_int, []),
    "hvd_size": (_c_int, []),
    "hvd_local_rank": (_c_int, []),
    "hvd_local_size": (_c_int, []),
    "hvd_cross_rank": (_c_int, []),
    "hvd_cross_size": (_c_int, []),
    "hvd_is_homogeneous": (_c_int, []),
    "hvd_nccl_built": (_c_int, []),
    "hvd_cuda_built": (_c_int, []),
    "hvd_mpi_built": (_c_int, []),
    "hvd_gloo_built": (_c_int, []),
    "hvd_gpu_description": (_c_str, []),
    "hvd_rdma_providers": (_c_str, []),
    "hvd_allreduce_async": (_c_i64, [_vp, _vp, _opts]),
    "hvd_grouped_allreduce_async": (_c_i64, [_c_i32, _pvp, _pvp, _opts]),
    "hvd_allgather_async": (_c_i64, [_vp, _opts]),
    "hvd_grouped_allgather_async": (_c_i64, [_c_i32, _pvp, _opts]),
    "hvd_broadcast_async": (_c_i64, [_vp, _vp, _opts]),
    "hvd_alltoall_async": (_c_i64, [_vp, _opts]),
    "hvd_reducescatter_async": (_c_i64, [_vp, _opts]),
    "hvd_grouped_reducescatter_async": (_c_i64, [_c_i32, _pvp, _opts]),
    "hvd_barrier_async": (_c_i64, [_opts]),
    "hvd_join_async": (_c_i64, [_opts]),
    "hvd_poll": (_c_int, [_c_i64]),
    "hvd_wait": (_c_int, [_c_i64, _c_dbl]),
    "hvd_handle_error": (_c_str, [_c_i64]),
    "hvd_handle_error_code": (_c_int, [_c_i64]),
    "hvd_handle_output_count": (_c_int, [_c_i64]),
    "hvd_handle_output": (_vp, [_c_i64, _c_i32]),
    "hvd_empty_like": (_vp, [_vp]),
    "hvd_handle_splits": (_c_int, [_c_i64, _c_i32, _pi64, _c_i32]),
    "hvd_handle_result": (_c_i64, [_c_i64]),
    "hvd_release": (None, [_c_i64]),
    "hvd_add_process_set": (_c_i32, [_pi32, _c_i32]),
    "hvd_remove_process_set": (_c_int, [_c_i32]),
    "hvd_process_set_rank": (_c_int, [_c_i32]),
    "hvd_process_set_size": (_c_int, [_c_i32]),
    "hvd_process_set_ranks": (_c_int, [_c_i32, _pi32, _c_i32]),
    "hvd_process_set_ids": (_c_int, [_pi32, _c_i32]),
    "hvd_start_timeline": (_c_int, [_c_str, _c_int]),
    "hvd_stop_timeline": (_c_int, []),
}

# Declared when the library has them, and not required of it: the bindings
# still load a library built before these were added. optional(name) gives
# the function or None.
_OPTIONAL_PROTOTYPES = {
    "hvd_elastic_enabled": (_c_int, []),
    "hvd_elastic_round": (_c_int, []),
    "hvd_elastic_host_updates": (_c_int, [_c_i64, _pi64, _pint, _pint]),
    "hvd_metrics_step": (_c_int, []),
}

_LIB_NAME = "libhvd.so"
_lock = threading.Lock()
_lib = None


def built_file_paths(package, name):
    """Where a file Bazel builds in `package` ("core", "python") is looked
    for, in order: in this Python package (the installed wheel), in the
    source tree's bazel-bin, and where Bazel's runfiles put it."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))  # python/hvd -> root
    return [os.path.join(here, name),
            os.path.join(root, "bazel-bin", package, name),
            os.path.join(root, package, name)]


def candidate_paths():
    """Where the library is looked for, in order."""
    env = os.environ.get("HVD_LIBRARY")
    if env:
        return [env]
    return built_file_paths("core", _LIB_NAME)


def lib():
    """The loaded library, loading it on first use."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            _lib = _load()
    return _lib


def _load():
    tried = []
    for path in candidate_paths():
        if not os.path.exists(path):
            tried.append(path + " (not found)")
            continue
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        _declare(handle, path)
        return handle
    raise ImportError(
        "hvd: cannot load %s; set HVD_LIBRARY to its path or build it with "
        "`bazel build //core:libhvd.so`. Tried: %s"
        % (_LIB_NAME, "; ".join(tried)))


def _declare(handle, path):
    missing = []
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(handle, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise ImportError("hvd: %s lacks %s: it does not match these "
                          "bindings" % (path, ", ".join(missing)))
    for name, (restype, argtypes) in _OPTIONAL_PROTOTYPES.items():
        fn = getattr(handle, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = argtypes


def optional(name):
    """The library's function `name` of _OPTIONAL_PROTOTYPES, declared, or
    None if this build of the library lacks it."""
    return getattr(lib(), name, None)


def decode(raw):
    """A C string returned by the library as Python text ("" for NULL)."""
    return raw.decode("utf-8", "replace") if raw else ""


def last_error(what):
    """The exception for the calling thread's last failed non-handle call:
    the class its status code maps to, the message prefixed with `what`."""
    from hvd.exceptions import from_status  # late: exceptions is pure Python
    return from_status(lib().hvd_last_error_code(),
                       "%s failed: %s" % (what, decode(lib().hvd_last_error())))


def default_options():
    """The library's defaults, with struct_size the size of this copy of the
    struct: the library refuses options whose size it does not know."""
    options = lib().hvd_default_options()
    options.struct_size = ctypes.sizeof(Options)
    return options

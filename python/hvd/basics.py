"""Lifecycle, topology and build facts: the framework-neutral part of the API."""

import atexit
import warnings

from hvd import _lib

# Reduction ops (values of core/c_api.h).
Sum = _lib.OP_SUM
Average = _lib.OP_AVERAGE
Min = _lib.OP_MIN
Max = _lib.OP_MAX
Product = _lib.OP_PRODUCT
Adasum = _lib.OP_ADASUM

_atexit_registered = False


def init(comm=None, process_sets=None):
    """Initializes hvd. With no HVD_* (or HOROVOD_*) variables in the
    environment the process is a job of size 1; under hvdrun it joins the job.
    Called again, it does nothing while the job runs; once the job has
    ended by itself (a stall shutdown, another rank's shutdown), it leaves
    that job and joins a new one, as shutdown() then init() does.

    Arguments:
        comm: Horovod's MPI communicator argument. hvd never uses MPI: only
            None is accepted.
        process_sets: ProcessSet objects to register now (every rank must pass
            the same list), or None / "dynamic". Sets can be added at any
            time with add_process_set().
    """
    global _atexit_registered
    if comm is not None:
        raise ValueError("hvd.init(comm=...): hvd does not use MPI "
                         "communicators; start the job with hvdrun instead")
    lib = _lib.lib()
    if lib.hvd_has_ended():
        # The job ended by itself (a stall shutdown, another rank's
        # shutdown): leave it, and join a new one below.
        shutdown()
    if lib.hvd_init() != _lib.HVD_OK:
        raise _lib.last_error("hvd.init()")
    if not _atexit_registered:
        atexit.register(_shutdown_at_exit)
        _atexit_registered = True
    from hvd import process_sets as _ps  # late: process_sets imports basics
    _ps._on_init(process_sets)


def shutdown():
    """Stops hvd's background thread and leaves the job. Operations still
    pending fail (their handles complete with an error)."""
    from hvd import _engine
    lib = _lib.lib()
    rc = lib.hvd_shutdown()
    # Only now, with the background thread gone, may pending inputs go.
    _engine.forget_pending()
    from hvd import process_sets as _ps
    _ps._on_shutdown()
    if rc != _lib.HVD_OK:
        raise _lib.last_error("hvd.shutdown()")


def _shutdown_at_exit():
    try:
        lib = _lib.lib()
        if lib.hvd_is_initialized():
            lib.hvd_shutdown()
    except Exception:  # Never fail the interpreter's exit.
        pass


def is_initialized():
    return bool(_lib.lib().hvd_is_initialized())


def _topology(value):
    if value < 0:
        raise ValueError("hvd has not been initialized; use hvd.init().")
    return value


def rank():
    """This process's rank in the job (0 .. size()-1)."""
    return _topology(_lib.lib().hvd_rank())


def size():
    """Number of processes in the job."""
    return _topology(_lib.lib().hvd_size())


def local_rank():
    """This process's rank among the processes of its host."""
    return _topology(_lib.lib().hvd_local_rank())


def local_size():
    """Number of processes on this process's host."""
    return _topology(_lib.lib().hvd_local_size())


def cross_rank():
    """The index of this process's host among the job's hosts."""
    return _topology(_lib.lib().hvd_cross_rank())


def cross_size():
    """Number of hosts with a process of local rank local_rank()."""
    return _topology(_lib.lib().hvd_cross_size())


def is_homogeneous():
    """True if every host runs the same number of processes."""
    _topology(_lib.lib().hvd_size())
    return bool(_lib.lib().hvd_is_homogeneous())


def version():
    """The version string of libhvd.so."""
    return _lib.decode(_lib.lib().hvd_version())


# What this build holds. hvd has its own data plane: no MPI, no Gloo.
def mpi_built():
    return bool(_lib.lib().hvd_mpi_built())


def gloo_built():
    return bool(_lib.lib().hvd_gloo_built())


def nccl_built():
    """NCCL's version code (e.g. 21803) if built with NCCL, else 0: an
    int, as Horovod's."""
    return int(_lib.lib().hvd_nccl_built())


def cuda_built():
    return bool(_lib.lib().hvd_cuda_built())


def mpi_enabled():
    return False


def gloo_enabled():
    return False


def mpi_threads_supported():
    return False


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a Chrome-trace timeline to `file_path` (rank 0)."""
    lib = _lib.lib()
    if lib.hvd_start_timeline(str(file_path).encode(), int(bool(mark_cycles))) \
            != _lib.HVD_OK:
        raise _lib.last_error("hvd.start_timeline(%r)" % (file_path,))


def stop_timeline():
    """Stops the timeline started by start_timeline() and closes its file."""
    lib = _lib.lib()
    if lib.hvd_stop_timeline() != _lib.HVD_OK:
        raise _lib.last_error("hvd.stop_timeline()")


def resolve_op(op, average, default=Average):
    """Horovod's `average` argument (deprecated) folded into `op`."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average; "
                         "give only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op`.",
                      DeprecationWarning)
        return Average if average else Sum
    if op is None:
        return default
    if op not in (Sum, Average, Min, Max, Product, Adasum):
        raise ValueError("unknown reduction op %r" % (op,))
    return op

"""hvd: Horovod-style distributed training over a C++ core (libhvd.so).

Framework bindings: `import hvd.torch as hvd` (PyTorch) and
`import hvd.numpy as hvd` (numpy arrays). Both load libhvd.so with ctypes and
pass tensors as DLPack; nothing is compiled against a framework or Python.
`import horovod.torch as hvd` gives hvd.torch under Horovod's name.
hvd.run(fn, num_proc=N, hosts=...) runs fn on every rank of an hvdrun job
and returns its results in rank order (also horovod.run).
"""

__version__ = "0.1.0"

from hvd.basics import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built,
    gloo_enabled, init, is_homogeneous, is_initialized, local_rank,
    local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
    rank, rocm_built, shutdown, size, start_timeline, stop_timeline)
from hvd.exceptions import (  # noqa: F401
    HostsUpdatedInterrupt, HvdAbortedError, HvdError, HvdInternalError,
    HvdInvalidArgumentError, HvdNotInitializedError, HvdNotSupportedError,
    HvdStallError, HvdTimeoutError, HvdWorkerRemovedError)
from hvd.process_sets import (  # noqa: F401
    ProcessSet, add_process_set, global_process_set, remove_process_set)
from hvd._run import HvdRunError, run  # noqa: F401,E402
from hvd import elastic  # noqa: F401,E402

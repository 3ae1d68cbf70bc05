"""hvd for PyTorch, with Horovod's API: `import hvd.torch as hvd`.

    hvd.init()
    torch.manual_seed(...)                       # any seed: rank 0's wins below
    model = ...
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size()),
        named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

Run it with `hvdrun -np 4 python3 train.py`; a plain `python3 train.py` is a
job of size 1. See docs/python.md.
"""

from hvd.basics import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built,
    gloo_enabled, init, is_homogeneous, is_initialized, local_rank,
    local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
    rank, rocm_built, shutdown, size, start_timeline, stop_timeline, version)
from hvd.exceptions import (  # noqa: F401
    HostsUpdatedInterrupt, HvdAbortedError, HvdError, HvdInternalError,
    HvdInvalidArgumentError, HvdNotInitializedError, HvdNotSupportedError,
    HvdStallError, HvdTimeoutError, HvdWorkerRemovedError)
from hvd.process_sets import (  # noqa: F401
    ProcessSet, add_process_set, global_process_set, remove_process_set)
from hvd.torch.compression import Compression  # noqa: F401
from hvd.torch.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_optimizer_state,
    broadcast_parameters)
from hvd.torch.mpi_ops import (  # noqa: F401
    allgather, allgather_async, allreduce, allreduce_, allreduce_async,
    allreduce_async_, alltoall, alltoall_async, barrier, broadcast,
    broadcast_, broadcast_async, broadcast_async_, grouped_allgather,
    grouped_allgather_async, grouped_allreduce, grouped_allreduce_,
    grouped_allreduce_async, grouped_allreduce_async_, grouped_reducescatter,
    grouped_reducescatter_async, join, poll, reducescatter,
    reducescatter_async, sparse_allreduce_async, synchronize)
from hvd.torch.optimizer import DistributedOptimizer  # noqa: F401
from hvd.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401

# Horovod's name for the collective error.
HorovodInternalError = HvdInternalError

# hvd.elastic with `import hvd.torch as hvd`; last: it imports the above.
from hvd.torch import elastic  # noqa: F401,E402

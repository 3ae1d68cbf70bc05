"""horovod.torch is hvd.torch (see hvd/torch/__init__.py)."""

import sys as _sys

from hvd.torch import *  # noqa: F401,F403
from hvd.torch import (  # noqa: F401
    Compression, DistributedOptimizer, HorovodInternalError, SyncBatchNorm)
from hvd.torch import (compression, elastic, functions,  # noqa: F401
                       mpi_ops, optimizer, sync_batch_norm)

# `from horovod.torch.mpi_ops import ...` and the like.
for _name in ("compression", "elastic", "elastic.sampler", "elastic.state",
              "functions", "mpi_ops", "optimizer", "sync_batch_norm"):
    _sys.modules["horovod.torch." + _name] = _sys.modules["hvd.torch." + _name]

"""A rank that leaves the job mid-training: every other rank's pending and
later collectives raise (HvdAbortedError, a HorovodInternalError) instead of
hanging. The leaving rank exits with code 0, so hvdrun
lets the others finish and the job's exit code is theirs.

(Used by peer_lost_np2_test / _np3_test; exits non-zero on failure.)
"""

import os
import time

import torch

import hvd.torch as hvd
from horovod.common.exceptions import HorovodInternalError

hvd.init()
LEAVER = 1
assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [hvd.size()] * 2
hvd.barrier()
if hvd.rank() == LEAVER:
    os._exit(0)

start = time.monotonic()
try:
    hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after.peer.left")
except HorovodInternalError as e:
    elapsed = time.monotonic() - start
    assert isinstance(e, hvd.HvdAbortedError), type(e)
    # Rank 0 (the coordinator) names the rank that left. Over TCP another
    # rank may only see rank 0 go, once rank 0 is done (the cause is not
    # forwarded to it), so there only "a rank" is required.
    if hvd.rank() == 0:
        assert "rank %d" % LEAVER in str(e), str(e)
    else:
        assert "rank " in str(e), str(e)
    print("rank %d: raised %s after %.1fs: %s"
          % (hvd.rank(), type(e).__name__, elapsed, e))
else:
    raise SystemExit("rank %d: allreduce with a lost peer did not raise"
                     % hvd.rank())

# And the job stays broken, loudly: later collectives raise too.
try:
    hvd.broadcast(torch.ones(1), root_rank=0)
    raise SystemExit("broadcast after the loss did not raise")
except HorovodInternalError:
    pass
print("rank %d: peer loss handled" % hvd.rank())

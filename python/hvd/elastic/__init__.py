"""Elastic training, framework-neutral, with the names of Horovod's elastic
API: a job whose workers may come and go while it trains (hvdrun --min-np or
--host-discovery-script; see docs/elastic.md).

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    train(hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, epoch=0))

with `import hvd.numpy as hvd` (hvd.numpy.elastic is this package's API) or
`import hvd.torch as hvd` (hvd.torch.elastic adds TorchState and
ElasticSampler). In a job that is not elastic the
same code runs: check_host_updates() never raises, and a reset after an
error joins the same fixed job again.
"""

from hvd.elastic.runner import recoverable, reset, run, run_fn  # noqa: F401
from hvd.elastic.state import ObjectState, State  # noqa: F401

__all__ = ["ObjectState", "State", "run", "run_fn"]

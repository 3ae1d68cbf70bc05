"""hvd.numpy.elastic: elastic training for hvd.numpy (see hvd.elastic).

    import hvd.numpy as hvd
    hvd.init()

    @hvd.elastic.run
    def train(state):
        ...
        state.commit()

    train(hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank,
                                  weights=w, epoch=0))
"""

from hvd.elastic import ObjectState, State, run, run_fn  # noqa: F401

__all__ = ["ObjectState", "State", "run", "run_fn"]

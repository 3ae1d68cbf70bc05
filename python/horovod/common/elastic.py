"""horovod.common.elastic over hvd.elastic: State, ObjectState and run_fn,
which Horovod's framework bindings build their elastic API from."""

from hvd.elastic import ObjectState, State, run_fn  # noqa: F401

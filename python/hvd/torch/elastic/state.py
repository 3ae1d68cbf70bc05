"""TorchState: the state of a PyTorch training function in an elastic job."""

import copy

import torch

from hvd.basics import rank
from hvd.elastic.state import ObjectState
from hvd.torch.elastic.sampler import ElasticSampler
from hvd.torch.functions import (allgather_object, broadcast_object,
                                 broadcast_optimizer_state,
                                 broadcast_parameters)


class _Tracked:
    """How TorchState saves, restores and syncs one kind of object: through
    its state_dict() and load_state_dict()."""

    def __init__(self, value):
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        # Each load_state_dict copies what it takes: the saved copy stays.
        self.value.load_state_dict(self._saved)

    def sync(self):
        raise NotImplementedError()


class _Model(_Tracked):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _Optimizer(_Tracked):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class _Sampler(_Tracked):
    def sync(self):
        # One collective: rank 0's epoch and count, every rank's indices.
        states = allgather_object(self.value.state_dict(),
                                  name="elastic.sampler")
        merged = dict(states[0])
        merged["processed_indices"] = set().union(
            *(s["processed_indices"] for s in states))
        self.value.load_state_dict(merged)


# type -> how it is tracked; the first match wins.
_TRACKED = [
    (torch.nn.Module, _Model),
    (torch.optim.Optimizer, _Optimizer),
    (ElasticSampler, _Sampler),
]


def _tracker(value):
    for kind, tracked in _TRACKED:
        if isinstance(value, kind):
            return tracked(value)
    return None


class TorchState(ObjectState):
    """State of a PyTorch training function: models, optimizers and
    ElasticSamplers, and plain objects, each an attribute of its keyword.

    A module's state_dict(), an optimizer's state_dict() and a sampler's
    record are saved as deep copies (commit()) and loaded back (restore());
    sync() gives every rank rank 0's parameters and buffers
    (broadcast_parameters), optimizer state (broadcast_optimizer_state), the
    samplers' records (with every rank's recorded indices), and the other
    objects (broadcast_object), then commits. Assigning a new model,
    optimizer or sampler to its attribute tracks the new one and commits it.

    Arguments:
        model: a torch.nn.Module, or None.
        optimizer: a torch.optim.Optimizer (a DistributedOptimizer too), or
            None.
        kwargs: more modules, optimizers, ElasticSamplers, and picklable
            objects (epoch, batch, ...).
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        if model is not None:
            kwargs["model"] = model
        if optimizer is not None:
            kwargs["optimizer"] = optimizer
        tracked = {name: _tracker(value) for name, value in kwargs.items()}
        self._tracked = {name: t for name, t in tracked.items() if t}
        plain = {name: value for name, value in kwargs.items()
                 if not tracked[name]}
        for name, t in self._tracked.items():
            setattr(self, name, t.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank,
                         **plain)
        if model is None:
            self.model = None
        if optimizer is None:
            self.optimizer = None

    def save(self):
        for t in self._tracked.values():
            t.save()
        super().save()

    def restore(self):
        for t in self._tracked.values():
            t.restore()
        super().restore()

    def sync(self):
        for t in self._tracked.values():
            t.sync()
        super().sync()  # the plain objects, then save()

    def __setattr__(self, name, value):
        tracked = self.__dict__.get("_tracked")
        if tracked and name in tracked and value is not tracked[name].value:
            tracked[name].value = value
            tracked[name].save()
        super().__setattr__(name, value)

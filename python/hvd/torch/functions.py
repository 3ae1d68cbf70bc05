"""Helpers over the collectives: broadcasting model and optimizer state and
arbitrary picklable objects (Horovod's horovod.torch.functions)."""

import torch

from hvd import _objects
from hvd.basics import rank
from hvd.process_sets import global_process_set
from hvd.torch.mpi_ops import (allgather, broadcast_, broadcast_async_,
                               synchronize)


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites `params` in place with root_rank's values.

    Arguments:
        params: model.state_dict(), model.named_parameters() (a list or
            iterator of (name, tensor)), or a list of tensors.
        root_rank: the global rank whose values everyone gets.
    """
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for i, (name, p) in enumerate(items):
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError("broadcast_parameters: %s is a %s, not a tensor"
                             % (name, type(p).__name__))
        key = "parameter.%s" % (name if name is not None else i)
        handles.append(broadcast_async_(p.data if p.requires_grad else p,
                                        root_rank, name=key,
                                        process_set=process_set))
    for handle in handles:
        synchronize(handle)


def _state_layout(optimizer, params):
    """root_rank's description of its optimizer state: per (parameter index,
    key) either ("tensor", shape, dtype, on_param_device) or ("value", v)."""
    layout = {}
    for index, p in enumerate(params):
        for key, value in optimizer.state.get(p, {}).items():
            if torch.is_tensor(value):
                layout[(index, key)] = ("tensor", tuple(value.shape),
                                        value.dtype, value.device == p.device)
            else:
                layout[(index, key)] = ("value", value)
    return layout


def broadcast_optimizer_state(optimizer, root_rank, model=None,
                              process_set=global_process_set):
    """Makes every rank's optimizer state equal to root_rank's: per-parameter
    state (momentum buffers, Adam moments, step counts) and the param_groups'
    options (lr, momentum, ...).

    root_rank first sends the layout of its state and its options (pickled);
    every rank then shapes its own state like root's (allocating what a fresh
    optimizer lacks, dropping what root does not have) and receives the
    tensors in place. `model` is accepted for Horovod compatibility.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    params = [p for g in optimizer.param_groups for p in g["params"]]
    if not optimizer.state:
        # A fresh optimizer: Horovod initialises its state with a step on
        # zero gradients, after which every parameter that requires a
        # gradient has one. hvd takes no step (see docs/python.md) but leaves
        # the gradients as Horovod does: zeros where there were none.
        for p in params:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p.data)
    message = None
    if rank() == root_rank:
        message = (_state_layout(optimizer, params),
                   [{k: v for k, v in g.items() if k != "params"}
                    for g in optimizer.param_groups])
    layout, options = broadcast_object(message, root_rank,
                                       name="optimizer_state.layout",
                                       process_set=process_set)
    if len(options) != len(optimizer.param_groups):
        raise ValueError("broadcast_optimizer_state: rank %d has %d param "
                         "groups, root rank %d has %d" % (
                             rank(), len(optimizer.param_groups), root_rank,
                             len(options)))

    for index, p in enumerate(params):
        state = optimizer.state.get(p)
        if state is None:
            continue
        for key in list(state):
            if (index, key) not in layout:
                del state[key]
        if not state:
            del optimizer.state[p]

    handles = []
    for (index, key), spec in sorted(layout.items(),
                                     key=lambda kv: (kv[0][0], str(kv[0][1]))):
        p = params[index]
        state = optimizer.state[p]
        if spec[0] == "value":
            state[key] = spec[1]
            continue
        _, shape, dtype, on_param_device = spec
        device = p.device if on_param_device else torch.device("cpu")
        t = state.get(key)
        if not (torch.is_tensor(t) and tuple(t.shape) == shape
                and t.dtype == dtype and t.device == device):
            t = torch.zeros(shape, dtype=dtype, device=device)
            state[key] = t
        handles.append(broadcast_async_(t, root_rank,
                                        name="optimizer_state.%d.%s"
                                        % (index, key),
                                        process_set=process_set))
    for handle in handles:
        synchronize(handle)
    for group, opts in zip(optimizer.param_groups, options):
        group.update(opts)


_OBJECTS = _objects.Frontend(broadcast_=broadcast_, allgather=allgather,
                             from_numpy=torch.from_numpy,
                             to_numpy=lambda t: t.numpy())


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """Returns root_rank's `obj` (any picklable object) on every rank. Other
    ranks may pass anything (e.g. None)."""
    return _objects.broadcast_object(_OBJECTS, obj, root_rank, name,
                                     process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj` (picklable), in rank order."""
    return _objects.allgather_object(_OBJECTS, obj, name, process_set)

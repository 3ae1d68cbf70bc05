"""broadcast_object and allgather_object for every framework: the object
pickled into a uint8 tensor of the framework, its length sent first.

A framework module passes its collectives and its way to and from numpy
arrays as a Frontend:

    _FRONTEND = _objects.Frontend(broadcast_=broadcast_, allgather=allgather,
                                  from_numpy=torch.from_numpy,
                                  to_numpy=lambda t: t.numpy())
"""

import collections
import pickle

import numpy as np

from hvd.basics import rank

# broadcast_(tensor, root_rank, name=, process_set=) -> tensor, in place;
# allgather(tensor, name=, process_set=) -> tensor; from_numpy(ndarray) ->
# a CPU tensor; to_numpy(tensor) -> ndarray.
Frontend = collections.namedtuple(
    "Frontend", ["broadcast_", "allgather", "from_numpy", "to_numpy"])


def _pickled(obj):
    return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL),
                         dtype=np.uint8).copy()


def broadcast_object(frontend, obj, root_rank, name, process_set):
    """root_rank's `obj` on every rank; the others' `obj` is ignored."""
    name = name or "object"
    is_root = rank() == root_rank
    payload = _pickled(obj) if is_root else None
    length = np.array([payload.size if is_root else 0], dtype=np.int64)
    length = frontend.to_numpy(frontend.broadcast_(
        frontend.from_numpy(length), root_rank, name="%s.size" % name,
        process_set=process_set))
    if payload is None:
        payload = np.zeros(int(length[0]), dtype=np.uint8)
    payload = frontend.to_numpy(frontend.broadcast_(
        frontend.from_numpy(payload), root_rank, name="%s.data" % name,
        process_set=process_set))
    return obj if is_root else pickle.loads(payload.tobytes())


def allgather_object(frontend, obj, name, process_set):
    """Every rank's `obj`, as a list in rank order of the set."""
    name = name or "object"
    payload = _pickled(obj)
    sizes = frontend.to_numpy(frontend.allgather(
        frontend.from_numpy(np.array([payload.size], dtype=np.int64)),
        name="%s.sizes" % name, process_set=process_set))
    data = frontend.to_numpy(frontend.allgather(
        frontend.from_numpy(payload), name="%s.data" % name,
        process_set=process_set))
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(data[offset:offset + n].tobytes()))
        offset += n
    return out

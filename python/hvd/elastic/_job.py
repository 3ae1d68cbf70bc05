"""What the core knows of the elastic job this process belongs to
(core/c_api.h, "Elastic jobs"), framework-neutral.

A library built without the elastic functions is a library whose jobs are
never elastic: every function here then answers as in a fixed job.
"""

import collections
import ctypes

from hvd import _lib

# The launcher's host updates newer than some number: `seq` is the newest
# update's number (0: none yet), `added` / `removed` whether any of the
# newer ones added or removed hosts.
HostUpdates = collections.namedtuple("HostUpdates",
                                     ["seq", "added", "removed"])


def enabled():
    """True in a worker of an elastic job (hvdrun --min-np or
    --host-discovery-script)."""
    fn = _lib.optional("hvd_elastic_enabled")
    return bool(fn is not None and fn())


def current_round():
    """The round of the job this process last joined; -1 before any (and
    always in a fixed job)."""
    fn = _lib.optional("hvd_elastic_round")
    return fn() if fn is not None else -1


def host_updates(after_seq=0):
    """The host updates announced to this process, in any round, numbered
    above `after_seq`, as HostUpdates."""
    fn = _lib.optional("hvd_elastic_host_updates")
    if fn is None:
        return HostUpdates(0, False, False)
    seq, added, removed = ctypes.c_int64(0), ctypes.c_int(0), ctypes.c_int(0)
    if fn(int(after_seq), ctypes.byref(seq), ctypes.byref(added),
          ctypes.byref(removed)) != _lib.HVD_OK:
        raise _lib.last_error("hvd_elastic_host_updates()")
    return HostUpdates(int(seq.value), bool(added.value), bool(removed.value))

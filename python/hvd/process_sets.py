"""Process sets: collectives over a subset of the job's ranks.

Horovod's API: ProcessSet(ranks), global_process_set, add_process_set,
remove_process_set, and hvd.init(process_sets=[...]). Ranks are always global
ranks, including the root_rank of a broadcast within a set.
"""

import ctypes

from hvd import _lib


class ProcessSet:
    """A set of global ranks. It takes part in collectives once registered
    (hvd.init(process_sets=[...]) or hvd.add_process_set()); its
    `process_set_id` is None until then."""

    def __init__(self, ranks):
        if isinstance(ranks, ProcessSet):
            ranks = ranks.ranks
        try:
            ranks = sorted(set(int(r) for r in ranks))
        except TypeError:
            raise ValueError("ProcessSet takes a list of ranks, not %r"
                             % (ranks,)) from None
        self.ranks = ranks
        self.process_set_id = None

    def _registered(self):
        return self.process_set_id is not None

    def size(self):
        """Number of ranks in the set; None if not registered."""
        if not self._registered():
            return None
        value = _lib.lib().hvd_process_set_size(self.process_set_id)
        return None if value < 0 else value

    def rank(self):
        """This process's rank within the set: -1 if not a member, None if
        the set is not registered."""
        if not self._registered():
            return None
        return _lib.lib().hvd_process_set_rank(self.process_set_id)

    def included(self):
        """True if this process is a member of the (registered) set."""
        r = self.rank()
        return r is not None and r >= 0

    def set_rank_of(self, global_rank):
        """Position of `global_rank` in the set (what the core calls the
        rank within the set)."""
        ranks = self.ranks
        if self.process_set_id == 0:
            return global_rank
        try:
            return ranks.index(global_rank)
        except ValueError:
            raise ValueError("rank %d is not a member of %s"
                             % (global_rank, self)) from None

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (
            self.process_set_id, self.ranks)

    __repr__ = __str__


class _GlobalProcessSet(ProcessSet):
    """All ranks of the job (id 0)."""

    def __init__(self):
        self.process_set_id = 0

    @property
    def ranks(self):
        n = _lib.lib().hvd_size()
        return list(range(n)) if n > 0 else []

    @ranks.setter
    def ranks(self, value):
        pass


global_process_set = _GlobalProcessSet()

# id -> ProcessSet, the sets this process registered (global excluded).
_registered = {}
# Called with the id of each process set removed (hvd._engine forgets what
# it cached for it).
_on_remove = []


def _ranks_of(set_id):
    lib = _lib.lib()
    n = lib.hvd_process_set_size(set_id)
    if n < 0:
        return None
    buf = (ctypes.c_int32 * max(n, 1))()
    n = lib.hvd_process_set_ranks(set_id, buf, n)
    return None if n < 0 else list(buf[:n])


def add_process_set(process_set):
    """Registers a process set; every rank of the job must call this with the
    same ranks, in the same order relative to other add/remove calls.

    Arguments:
        process_set: a ProcessSet, or a list of global ranks.
    Returns:
        The registered ProcessSet.
    """
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("%s is already registered" % process_set)
    ranks = process_set.ranks
    arr = (ctypes.c_int32 * max(len(ranks), 1))(*ranks)
    lib = _lib.lib()
    set_id = lib.hvd_add_process_set(arr, len(ranks))
    if set_id < 0:
        raise _lib.last_error("hvd.add_process_set(%s)" % (ranks,))
    process_set.process_set_id = set_id
    _registered[set_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Unregisters a process set (collective over all ranks). Returns True if
    it was removed, False if it was not registered (or is the global set)."""
    if not isinstance(process_set, ProcessSet):
        raise ValueError("remove_process_set takes a ProcessSet, not %r"
                         % (process_set,))
    set_id = process_set.process_set_id
    if set_id is None or set_id == 0:
        return False
    lib = _lib.lib()
    if lib.hvd_remove_process_set(set_id) != _lib.HVD_OK:
        raise _lib.last_error("hvd.remove_process_set(%s)" % (process_set,))
    _registered.pop(set_id, None)
    for forget in _on_remove:
        forget(set_id)
    process_set.process_set_id = None
    return True


def _on_init(process_sets):
    if process_sets is None or process_sets == "dynamic":
        return
    for ps in process_sets:
        if isinstance(ps, ProcessSet) and ps.process_set_id is not None:
            continue
        add_process_set(ps)


def _on_shutdown():
    for ps in list(_registered.values()):
        ps.process_set_id = None
    _registered.clear()


def resolve(process_set):
    """The core's id of `process_set` (a ProcessSet), validated."""
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a ProcessSet, not %r"
                         % (process_set,))
    if process_set.process_set_id is None:
        raise ValueError("%s is not registered: pass it to hvd.init() or "
                         "hvd.add_process_set() first" % process_set)
    return process_set.process_set_id

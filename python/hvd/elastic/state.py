"""State and ObjectState: what an elastic training function keeps in step
across its workers, with Horovod's names and semantics.

A State has three copies of the training state in mind: the live values the
training function changes, the committed copy in host memory (commit() /
save() write it, restore() brings it back), and rank 0's live values, which
sync() gives every rank.
"""

import copy

from hvd.elastic import _job
from hvd.exceptions import HostsUpdatedInterrupt


class State:
    """Base of the state kept in step across the workers of an elastic job.

    Subclasses implement save(), restore() and sync(), and may override
    reset(), which runs after each reset of the job before the callbacks.

    Arguments:
        bcast_object: bcast_object(obj) returns rank 0's obj on every rank
            (e.g. hvd.torch.broadcast_object).
        get_rank: returns this worker's rank (e.g. hvd.torch.rank).
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []
        # The newest host update this state has acted on: a reset of the
        # job, or a HostsUpdatedInterrupt raised for it.
        self._host_update_seq = 0

    def register_reset_callbacks(self, callbacks):
        """Adds functions (no arguments) that run after every reset of the
        job (a worker added or lost), after hvd.init() and before the state
        is synchronized: e.g. to scale the learning rate with hvd.size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """Runs reset() then the registered callbacks; hvd.elastic.run calls
        it after each reset of the job."""
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """save(), then check_host_updates(): the committed copy is what a
        failure rolls back to, and a commit is also where announced host
        changes interrupt training. A commit copies the whole state (from
        the GPU too), so commit every few batches rather than every one."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank if the launcher
        announced hosts added or removed since this state last acted on
        such an announcement; skip_sync is True if hosts were only removed.

        Every rank takes rank 0's view (one broadcast), so all raise or none
        does, even if the announcement has reached some ranks only. In a job
        that is not elastic this returns at once, without a collective."""
        if not _job.enabled():
            return
        mine = _job.host_updates(self._host_update_seq)
        view = (self._host_update_seq, mine.seq, mine.added, mine.removed)
        seen, newest, added, removed = self._bcast_object(view)
        self._host_update_seq = max(seen, newest)
        if newest > seen:
            raise HostsUpdatedInterrupt(skip_sync=removed and not added)

    def _host_updates_handled(self, seq):
        """Updates numbered up to `seq` were announced before the job was
        reset: the new round is formed from the hosts the launcher knew
        then, so they need no interrupt of their own."""
        self._host_update_seq = max(self._host_update_seq, seq)

    def save(self):
        """Copies the live state into the committed copy."""
        raise NotImplementedError()

    def restore(self):
        """Brings back the committed copy, undoing changes made since."""
        raise NotImplementedError()

    def sync(self):
        """Gives every rank rank 0's state."""
        raise NotImplementedError()

    def reset(self):
        """Called after each reset of the job, before the callbacks."""


class ObjectState(State):
    """State of plain Python objects, given as keyword arguments and kept as
    attributes of the same names (`state.epoch`, `state.batch`).

    save() keeps deep copies, so changing a list in place after a commit
    does not change the committed copy. sync() broadcasts rank 0's live
    values (pickled) and commits them on every rank.

    Arguments:
        bcast_object: bcast_object(obj) returns rank 0's obj on every rank.
        get_rank: returns this worker's rank.
        kwargs: the objects; each must be picklable and deep-copyable.
    """

    def __init__(self, bcast_object, get_rank, **kwargs):
        super().__init__(bcast_object, get_rank)
        self._saved_state = copy.deepcopy(kwargs)
        for name, value in kwargs.items():
            setattr(self, name, value)

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name))
                             for name in self._saved_state}

    def restore(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))

    def sync(self):
        # Rank 0's live values, not its committed ones (Horovod sends the
        # latter): after a HostsUpdatedInterrupt raised by
        # check_host_updates() alone, the model is rank 0's live one and
        # these values belong with it. Committing them at once gives a
        # worker that just joined the committed copy the others have.
        if self._saved_state:
            live = {name: getattr(self, name) for name in self._saved_state}
            for name, value in self._bcast_object(live).items():
                setattr(self, name, value)
        self.save()

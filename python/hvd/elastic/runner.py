"""hvd.elastic.run: runs a training function again after each reset of an
elastic job, from the last committed or the current state.

Which errors reset the job: those that say the job broke, not the program.
Horovod catches HorovodInternalError, which in Horovod is every collective
error, a shape mismatch included; hvd's HvdInternalError is the same base,
but two of its kinds fail again on every retry, so they propagate:

    reset (recoverable)                 propagate (the program's fault)
    HvdAbortedError (peer lost, stall)  HvdInvalidArgumentError (ValueError)
    HvdTimeoutError                     HvdNotSupportedError
    HvdNotInitializedError              anything not an HvdInternalError
    HvdInternalError itself (e.g. a script's own `raise HorovodInternalError`)
"""

import functools
import sys
import time

from hvd import basics
from hvd.elastic import _job
from hvd.exceptions import (HostsUpdatedInterrupt, HvdAbortedError,
                            HvdInternalError, HvdInvalidArgumentError,
                            HvdNotSupportedError, HvdWorkerRemovedError)

_NOT_RECOVERABLE = (HvdInvalidArgumentError, HvdNotSupportedError)

# Pause before trying again to join the next round, doubling from the first
# up to the last: the core bounds each attempt itself.
_RETRY_PAUSE_S = (0.1, 2.0)


def recoverable(error):
    """True if `error` is one hvd.elastic.run resets the job after."""
    return (isinstance(error, HvdInternalError)
            and not isinstance(error, _NOT_RECOVERABLE))


def _log(message):
    print("hvd.elastic: %s" % message, file=sys.stderr, flush=True)


def _exit_removed(error):
    _log("this worker left the job (%s); exiting with status 0" % error)
    sys.exit(0)


def reset():
    """hvd.shutdown() then hvd.init(): joins the next round of an elastic
    job (a fixed job is joined again as it was).

    In an elastic job an init that fails with HvdAbortedError (the round
    it was joining ended before it was complete) is tried again, for as
    long as it fails that way: the launcher ends its workers when it gives
    the job up. HvdWorkerRemovedError, and any other error, propagate.
    Process sets passed to the first init() are not registered again."""
    pause = _RETRY_PAUSE_S[0]
    while True:
        basics.shutdown()
        try:
            basics.init()
            return
        except HvdWorkerRemovedError:
            raise
        except HvdAbortedError as e:
            if not _job.enabled():
                raise
            _log("joining the next round failed (%s); trying again in "
                 "%.1f s" % (e, pause))
        time.sleep(pause)
        pause = min(2 * pause, _RETRY_PAUSE_S[1])


def _reset_state(state, reset_fn):
    # Updates announced up to now are in the round the reset joins.
    handled = _job.host_updates(0).seq
    try:
        reset_fn()
    except HvdWorkerRemovedError as e:
        _exit_removed(e)
    state._host_updates_handled(handled)
    state.on_reset()


def run_fn(func, reset):
    """The decorator hvd.elastic.run with `reset` as the way to reset the
    job. `func(state, *args, **kwargs)` gets a State first.

    Before each call every rank gets rank 0's state (state.sync()). When the
    call raises:
      - a recoverable HvdInternalError (see the module's docstring): the
        state goes back to its last commit (state.restore()), the job is
        reset, state.on_reset() runs, and the call is made again;
      - HostsUpdatedInterrupt: the same without the restore, and without
        the sync if only hosts were removed (e.skip_sync);
      - HvdWorkerRemovedError (here or in the reset): the process exits
        with status 0, as a worker whose host left the job should.
    Anything else propagates. The value of the first call that returns is
    returned."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt as e:
                _log("hosts were %s; resetting the job"
                     % ("removed" if e.skip_sync else "added or removed"))
                skip_sync = e.skip_sync
            except HvdWorkerRemovedError as e:
                _exit_removed(e)
            except HvdInternalError as e:
                if not recoverable(e):
                    raise
                _log("%s: %s; restoring the last commit and resetting the "
                     "job" % (type(e).__name__, e))
                state.restore()
                skip_sync = False
            _reset_state(state, reset)
    return wrapper


def run(func):
    """Decorator: runs `func(state, ...)` on every worker of an elastic job
    and again after each reset of the job (a worker lost or hosts changed),
    from the state every rank then has. No collective may run before the
    first call: workers that join later start at the sync that precedes it.
    See run_fn for what happens on which error."""
    return run_fn(func, reset)

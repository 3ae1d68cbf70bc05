"""Exceptions raised for errors reported by the core.

    HvdError (RuntimeError)
     └─ HvdInternalError              a collective failed; = horovod's HorovodInternalError
         ├─ HvdInvalidArgumentError   bad arguments, or ranks disagree (also ValueError)
         ├─ HvdNotSupportedError      e.g. Adasum (also NotImplementedError)
         ├─ HvdTimeoutError           a bounded wait expired (also TimeoutError)
         ├─ HvdNotInitializedError    hvd.init() has not run, or shutdown did
         └─ HvdAbortedError           a peer was lost, or the job is shutting down
             ├─ HvdStallError         a tensor waited past HVD_STALL_SHUTDOWN_TIME_SECONDS
             └─ HvdWorkerRemovedError init: this worker is no longer in the elastic job
    HostsUpdatedInterrupt (RuntimeError)  elastic: hosts were added or removed

Every collective error derives from HvdInternalError, so code written for
Horovod (`except HorovodInternalError`) catches all of them. The message is the
core's, unchanged: it names the rank, the tensor and the mismatched values.

HostsUpdatedInterrupt is not an error of the core: hvd.elastic's
State.commit() and check_host_updates() raise it on every rank at once when
the launcher announced new or removed hosts (see hvd/elastic).
"""


class HvdError(RuntimeError):
    """Base of every error hvd raises from the core."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code  # absl::StatusCode value, None if not from the core


class HvdInternalError(HvdError):
    """A collective operation failed."""


class HvdInvalidArgumentError(HvdInternalError, ValueError):
    """Invalid arguments, or arguments that differ between ranks."""


class HvdNotSupportedError(HvdInternalError, NotImplementedError):
    """The operation is not supported by this build (e.g. Adasum)."""


class HvdTimeoutError(HvdInternalError, TimeoutError):
    """A bounded wait expired."""


class HvdNotInitializedError(HvdInternalError):
    """hvd is not initialized (or was shut down)."""


class HvdAbortedError(HvdInternalError):
    """The job lost a peer or is shutting down."""


class HvdStallError(HvdAbortedError):
    """The stall inspector ended the job: a tensor some ranks submitted
    waited longer than HVD_STALL_SHUTDOWN_TIME_SECONDS for the others. The
    message names the tensor and the ranks that never submitted it."""


class HvdWorkerRemovedError(HvdAbortedError):
    """hvd.init() in an elastic job whose launcher no longer counts this
    worker in (its host was removed). The process should exit with status
    0; hvd.elastic.run does that."""


class HostsUpdatedInterrupt(RuntimeError):
    """Elastic jobs: hosts were added to or removed from the job. Raised by
    State.commit() and State.check_host_updates() on every rank together;
    hvd.elastic.run catches it and resets without restoring the last commit.

    Arguments:
        skip_sync: True if hosts were only removed: the remaining workers
            already hold the same state, so the state is not broadcast again
            after the reset.
    """

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated" + (" (removed only)" if skip_sync
                                            else ""))
        self.skip_sync = skip_sync


_STALL_PREFIX = "stall shutdown: "
_REMOVED_PREFIX = "removed from the elastic job: "


# absl::StatusCode values (gRPC's codes).
_CANCELLED = 1
_INVALID_ARGUMENT = 3
_DEADLINE_EXCEEDED = 4
_NOT_FOUND = 5
_ALREADY_EXISTS = 6
_FAILED_PRECONDITION = 9
_ABORTED = 10
_OUT_OF_RANGE = 11
_UNIMPLEMENTED = 12
_UNAVAILABLE = 14

_BY_CODE = {
    _CANCELLED: HvdAbortedError,
    _INVALID_ARGUMENT: HvdInvalidArgumentError,
    _DEADLINE_EXCEEDED: HvdTimeoutError,
    _NOT_FOUND: HvdInvalidArgumentError,
    _ALREADY_EXISTS: HvdInvalidArgumentError,
    _FAILED_PRECONDITION: HvdNotInitializedError,
    _ABORTED: HvdAbortedError,
    _OUT_OF_RANGE: HvdInvalidArgumentError,
    _UNIMPLEMENTED: HvdNotSupportedError,
    _UNAVAILABLE: HvdAbortedError,
}


def from_status(code, message):
    """The exception for an absl::StatusCode and the core's message."""
    cls = _BY_CODE.get(code, HvdInternalError)
    if code == _ABORTED and _STALL_PREFIX in (message or ""):
        cls = HvdStallError
    if code == _CANCELLED and _REMOVED_PREFIX in (message or ""):
        cls = HvdWorkerRemovedError
    if not message:
        message = "hvd operation failed (status code %d, no message)" % code
    return cls(message, code)

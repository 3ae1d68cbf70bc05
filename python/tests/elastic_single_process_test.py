"""hvd.elastic without hvdrun (a job of size 1): the run decorator's
handling of each error with a recording State and reset, the re-join loop
of its reset, check_host_updates over a simulated core, ObjectState's
copies, the exceptions of elastic jobs, and the names Horovod scripts
import. The multi-rank behaviour is in elastic_test.py.
"""

import os
import subprocess
import sys

import pytest

# A job of size 1: no job environment, whatever the caller had.
for _key in list(os.environ):
    if _key.startswith(("HVD_", "HOROVOD_")) and _key != "HVD_LIBRARY":
        del os.environ[_key]

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import hvd  # noqa: E402
import hvd.elastic.runner as runner  # noqa: E402
from hvd import exceptions  # noqa: E402
from hvd.elastic import _job  # noqa: E402


class RecordingState(hvd.elastic.State):
    """Records the calls run makes on it, in order, in `log`."""

    def __init__(self, log):
        super().__init__(bcast_object=lambda obj: obj, get_rank=lambda: 0)
        self.log = log
        self.register_reset_callbacks([lambda: log.append("callback")])

    def save(self):
        self.log.append("save")

    def restore(self):
        self.log.append("restore")

    def sync(self):
        self.log.append("sync")

    def reset(self):
        self.log.append("state.reset")


def run_raising(errors, log, reset=None):
    """Runs a function under run_fn that raises `errors` one per call, then
    returns "done"; `reset` defaults to one that records "reset"."""
    pending = list(errors)

    def train(state, arg):
        log.append("train(%s)" % arg)
        if pending:
            raise pending.pop(0)
        return "done"

    reset = reset or (lambda: log.append("reset"))
    return runner.run_fn(train, reset)(RecordingState(log), "x")


def test_run_syncs_once_and_returns_the_value():
    log = []
    assert run_raising([], log) == "done"
    assert log == ["sync", "train(x)"]


def test_run_restores_resets_then_calls_back_syncs_and_calls_again():
    log = []
    assert run_raising([hvd.HvdAbortedError("rank 1 lost")], log) == "done"
    assert log == ["sync", "train(x)", "restore", "reset", "state.reset",
                   "callback", "sync", "train(x)"]


@pytest.mark.parametrize("error", [
    hvd.HvdAbortedError("lost"), hvd.HvdStallError("stall shutdown: t"),
    hvd.HvdTimeoutError("timed out"), hvd.HvdNotInitializedError("shut"),
    hvd.HvdInternalError("a script's own HorovodInternalError")])
def test_run_resets_after_each_failure_of_the_job(error):
    log = []
    assert run_raising([error], log) == "done"
    assert log.count("restore") == 1 and log.count("reset") == 1


@pytest.mark.parametrize("error", [
    hvd.HvdInvalidArgumentError("shape [2] on rank 0, [3] on rank 1"),
    hvd.HvdNotSupportedError("Adasum"), ValueError("bad"),
    KeyError("k")])
def test_run_lets_errors_of_the_program_propagate_untouched(error):
    log = []
    with pytest.raises(type(error)) as raised:
        run_raising([error], log)
    assert raised.value is error
    assert log == ["sync", "train(x)"]


def test_hosts_updated_resets_without_restoring_and_syncs():
    log = []
    assert run_raising([hvd.HostsUpdatedInterrupt(skip_sync=False)],
                       log) == "done"
    assert log == ["sync", "train(x)", "reset", "state.reset", "callback",
                   "sync", "train(x)"]


def test_hosts_removed_only_resets_without_restoring_or_syncing():
    log = []
    assert run_raising([hvd.HostsUpdatedInterrupt(skip_sync=True)],
                       log) == "done"
    assert log == ["sync", "train(x)", "reset", "state.reset", "callback",
                   "train(x)"]


def test_a_failure_after_a_removal_syncs_again():
    log = []
    run_raising([hvd.HostsUpdatedInterrupt(skip_sync=True),
                 hvd.HvdAbortedError("lost")], log)
    assert log == ["sync", "train(x)", "reset", "state.reset", "callback",
                   "train(x)", "restore", "reset", "state.reset", "callback",
                   "sync", "train(x)"]


def test_a_failed_sync_is_a_failure_of_the_job():
    log = []
    state = RecordingState(log)
    syncs = iter([hvd.HvdAbortedError("lost in sync"), None])

    def sync():
        log.append("sync")
        error = next(syncs)
        if error:
            raise error
    state.sync = sync
    wrapped = runner.run_fn(lambda s: log.append("train") or 7,
                            lambda: log.append("reset"))
    assert wrapped(state) == 7
    assert log == ["sync", "restore", "reset", "state.reset", "callback",
                   "sync", "train"]


def test_a_removed_worker_exits_with_status_zero():
    removed = exceptions.from_status(
        1, "hvd.init() failed: removed from the elastic job: host h2 was "
           "removed by the discovery script")

    def reset():
        raise removed
    with pytest.raises(SystemExit) as raised:
        run_raising([hvd.HvdAbortedError("lost")], [], reset=reset)
    assert raised.value.code == 0
    with pytest.raises(SystemExit) as raised:
        run_raising([removed], [])
    assert raised.value.code == 0


def test_removal_has_its_own_exception_for_cancelled_only():
    message = "hvd.init() failed: removed from the elastic job: host h2 gone"
    removed = exceptions.from_status(1, message)
    assert type(removed) is hvd.HvdWorkerRemovedError
    assert isinstance(removed, hvd.HvdAbortedError)
    assert str(removed) == message
    assert type(exceptions.from_status(1, "cancelled")) is hvd.HvdAbortedError
    # A survivor's collective naming another worker's removal is an abort.
    assert type(exceptions.from_status(10, message)) is hvd.HvdAbortedError


def test_hosts_updated_interrupt_is_horovods():
    from horovod.common.exceptions import (HorovodInternalError,
                                           HostsUpdatedInterrupt)
    assert HostsUpdatedInterrupt is hvd.HostsUpdatedInterrupt
    assert HorovodInternalError is hvd.HvdInternalError
    assert issubclass(HostsUpdatedInterrupt, RuntimeError)
    assert not issubclass(HostsUpdatedInterrupt, hvd.HvdInternalError)
    assert HostsUpdatedInterrupt().skip_sync is False
    assert HostsUpdatedInterrupt(True).skip_sync is True


def test_horovod_names_are_hvd_elastic():
    import horovod.common.elastic as common_elastic
    import horovod.torch as horovod_hvd
    from horovod.torch.elastic import ElasticSampler, TorchState, run
    from horovod.torch.elastic.sampler import ElasticSampler as Sampler2
    import hvd.numpy as hnp
    import hvd.torch as htorch
    assert horovod_hvd.elastic is htorch.elastic
    assert htorch.elastic.run is hvd.elastic.run is run is hnp.elastic.run
    assert htorch.elastic.TorchState is TorchState
    assert ElasticSampler is Sampler2 is htorch.elastic.ElasticSampler
    assert common_elastic.run_fn is hvd.elastic.run_fn
    assert common_elastic.State is htorch.elastic.State is hvd.elastic.State
    assert common_elastic.ObjectState is hnp.elastic.ObjectState


def test_a_fixed_job_is_not_elastic():
    hvd.init()
    assert not _job.enabled()
    assert _job.current_round() == -1
    assert _job.host_updates(0) == (0, False, False)
    state = RecordingState([])
    state.check_host_updates()  # no collective, no interrupt
    state.commit()
    assert state.log == ["save"]


def test_a_library_without_the_elastic_functions_still_loads():
    code = ("from hvd import _lib\n"
            "_lib._OPTIONAL_PROTOTYPES['hvd_no_such_function'] = "
            "(None, [])\n"
            "assert _lib.optional('hvd_no_such_function') is None\n"
            "import hvd.torch as hvd\n"
            "hvd.init()\n"
            "print('loaded', hvd.size())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ,
                                   PYTHONPATH=os.path.dirname(HERE)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "loaded 1"


class FakeCore:
    """Stands in for the core's elastic functions: an elastic job whose
    launcher announced `updates` [(seq, added, removed)]."""

    def __init__(self, monkeypatch):
        self.updates = []
        monkeypatch.setattr(_job, "enabled", lambda: True)
        monkeypatch.setattr(_job, "host_updates", self.host_updates)

    def host_updates(self, after_seq=0):
        newer = [u for u in self.updates if u[0] > after_seq]
        seq = max([u[0] for u in self.updates] or [0])
        return _job.HostUpdates(seq, any(u[1] for u in newer),
                                any(u[2] for u in newer))


def test_check_host_updates_raises_once_per_announcement(monkeypatch):
    core = FakeCore(monkeypatch)
    state = RecordingState([])
    state.check_host_updates()
    core.updates.append((1, True, False))
    with pytest.raises(hvd.HostsUpdatedInterrupt) as raised:
        state.check_host_updates()
    assert raised.value.skip_sync is False
    state.check_host_updates()  # seen
    core.updates.append((2, False, True))
    with pytest.raises(hvd.HostsUpdatedInterrupt) as raised:
        state.commit()
    assert raised.value.skip_sync is True
    assert state.log == ["save"]  # commit saves before it checks
    core.updates += [(3, False, True), (4, True, False)]
    with pytest.raises(hvd.HostsUpdatedInterrupt) as raised:
        state.check_host_updates()
    assert raised.value.skip_sync is False


def test_check_host_updates_takes_rank_zeros_view(monkeypatch):
    core = FakeCore(monkeypatch)
    state = RecordingState([])
    # This rank heard of update 1; rank 0 (the broadcast) had not yet.
    core.updates.append((1, True, False))
    state._bcast_object = lambda view: (0, 0, False, False)
    state.check_host_updates()
    # Rank 0 heard of it; this rank had not: it raises all the same.
    core.updates = []
    state._bcast_object = lambda view: (0, 1, True, False)
    with pytest.raises(hvd.HostsUpdatedInterrupt):
        state.check_host_updates()
    assert state._host_update_seq == 1


def test_updates_announced_before_a_reset_need_no_interrupt(monkeypatch):
    core = FakeCore(monkeypatch)
    core.updates.append((1, False, True))
    state = RecordingState([])
    runner._reset_state(state, lambda: None)
    state.check_host_updates()  # update 1 is in the new round
    core.updates.append((2, True, False))
    with pytest.raises(hvd.HostsUpdatedInterrupt):
        state.check_host_updates()


def test_reset_joins_again_while_the_round_aborts(monkeypatch):
    FakeCore(monkeypatch)
    calls = []
    failures = [hvd.HvdAbortedError("round 3 ended: rank 2 lost"),
                hvd.HvdAbortedError("round 4 ended: rank 1 lost")]

    def init():
        calls.append("init")
        if failures:
            raise failures.pop(0)
    monkeypatch.setattr(runner.basics, "init", init)
    monkeypatch.setattr(runner.basics, "shutdown",
                        lambda: calls.append("shutdown"))
    monkeypatch.setattr(runner.time, "sleep", lambda s: calls.append(s))
    runner.reset()
    assert calls == ["shutdown", "init", 0.1, "shutdown", "init", 0.2,
                     "shutdown", "init"]


def test_reset_raises_other_init_errors_at_once(monkeypatch):
    FakeCore(monkeypatch)
    for error in [hvd.HvdWorkerRemovedError("removed from the elastic "
                                            "job: h2"),
                  hvd.HvdTimeoutError("no round formed")]:
        def init(error=error):
            raise error
        monkeypatch.setattr(runner.basics, "init", init)
        monkeypatch.setattr(runner.basics, "shutdown", lambda: None)
        with pytest.raises(type(error)):
            runner.reset()


def test_reset_in_a_fixed_job_raises_an_aborted_init(monkeypatch):
    def init():
        raise hvd.HvdAbortedError("rank 1 stopped")
    monkeypatch.setattr(runner.basics, "init", init)
    monkeypatch.setattr(runner.basics, "shutdown", lambda: None)
    with pytest.raises(hvd.HvdAbortedError, match="rank 1 stopped"):
        runner.reset()


def test_reset_of_a_fixed_job_joins_it_again():
    hvd.init()
    runner.reset()
    assert hvd.is_initialized() and hvd.size() == 1


def test_object_state_keeps_copies_of_what_it_commits():
    calls = []

    def bcast(obj):
        calls.append(obj)
        return {"epoch": 5, "seen": [9]}
    state = hvd.elastic.ObjectState(bcast, lambda: 0, epoch=0, seen=[])
    state.seen.append(1)
    state.epoch = 1
    state.restore()
    assert (state.epoch, state.seen) == (0, [])
    state.seen.append(2)
    state.commit()
    state.seen.append(3)  # in place, after the commit
    state.restore()
    assert state.seen == [2]
    state.seen.append(4)
    state.sync()  # sends the live values, takes rank 0's, commits them
    assert calls == [{"epoch": 0, "seen": [2, 4]}]
    state.epoch = 6
    state.restore()
    assert (state.epoch, state.seen) == (5, [9])


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):  # under bazel test: per-case report
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))

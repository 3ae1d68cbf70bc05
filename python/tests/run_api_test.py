"""hvd.run / horovod.run: a function run on every rank of a real hvdrun job.

Runs in one process (the caller); each test starts hvdrun jobs of 1 to 3
local ranks. Finds hvdrun, hvd-agent and libhvd.so in the Bazel runfiles
tree, or else in bazel-bin/ of the source tree (runs by hand).
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
ROOT = os.path.dirname(PYTHON_DIR)
sys.path.insert(0, PYTHON_DIR)


def _find(relative):
    for base in (ROOT, os.path.join(ROOT, "bazel-bin")):
        path = os.path.join(base, relative)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError("%s not found: bazel build //launcher:hvdrun "
                            "//agent:hvd-agent //core:libhvd.so" % relative)


for _key in list(os.environ):  # the caller is no rank of any job
    if _key.startswith(("HVD_", "HOROVOD_")) and \
            not _key.startswith("HVD_MH_"):  # the multi-host harness's
        del os.environ[_key]
os.environ["HVD_HVDRUN_PATH"] = _find("launcher/hvdrun")
os.environ["HVD_AGENT_PATH"] = _find("agent/hvd-agent")
os.environ["HVD_LIBRARY"] = _find("core/libhvd.so")
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"

import cloudpickle  # noqa: E402
import horovod  # noqa: E402
import horovod.runner  # noqa: E402
import hvd  # noqa: E402

# The ranks cannot import this file (python/tests is on no path of theirs):
# send its functions by value, as a script's __main__ functions are.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


# -- helpers (module level: cloudpickle sends them by value) -------------

def rank_size_and_sum():
    """A real job: every rank joins and allreduces its rank."""
    import torch
    import hvd.torch as h
    h.init()
    total = h.allreduce(torch.tensor([float(h.rank())]), op=h.Sum)
    return h.rank(), h.size(), float(total[0])


def job_processes(mark):
    """Pids of this user's processes whose environment holds `mark`."""
    found = []
    needle = ("RUN_API_TEST_MARK=" + mark).encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            pass
    return found


def assert_nothing_left(mark, within=10.0):
    deadline = time.monotonic() + within
    while job_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job_processes(mark) == []


@pytest.fixture
def mark():
    """A unique variable for the ranks, to find any process left behind."""
    value = uuid.uuid4().hex
    yield value
    assert_nothing_left(value)


# -- results -------------------------------------------------------------

@pytest.mark.parametrize("np", [2, 3])
def test_returns_results_in_rank_order(np, mark):
    results = hvd.run(rank_size_and_sum, num_proc=np,
                      env={"RUN_API_TEST_MARK": mark})
    expected_sum = float(sum(range(np)))
    assert results == [(r, np, expected_sum) for r in range(np)]


def test_horovod_names_are_hvd_run():
    assert horovod.run is hvd.run
    assert horovod.runner.run is hvd.run
    assert horovod.runner.HvdRunError is hvd.HvdRunError
    assert issubclass(hvd.HvdRunError, RuntimeError)


def test_args_kwargs_and_env_pass_through(mark):
    def fn(a, b, c=None, *, d):
        return (int(os.environ["HVD_RANK"]), a, b, c, d,
                os.environ.get("MY_SETTING"), os.environ.get("HOSTNAME"))
    results = horovod.run(fn, args=(1, [2, 3]), kwargs={"c": "x", "d": 4.5},
                          num_proc=2,
                          env={"MY_SETTING": "on", "HOSTNAME": "forwarded",
                               "RUN_API_TEST_MARK": mark})
    assert results == [(r, 1, [2, 3], "x", 4.5, "on", "forwarded")
                       for r in range(2)]


def test_default_is_one_rank():
    assert hvd.run(lambda: os.environ["HVD_SIZE"]) == ["1"]


def test_rank_output_is_relayed(capsys):
    def fn():
        print("hello from rank", os.environ["HVD_RANK"])
        print("to stderr", file=sys.stderr)
        return None
    assert hvd.run(fn, num_proc=2) == [None, None]
    out, err = capsys.readouterr()
    assert "[0]<stdout>:hello from rank 0" in out
    assert "[1]<stdout>:hello from rank 1" in out
    assert "[1]<stderr>:to stderr" in err
    assert "hvd-run-result" not in out


def test_verbose_prints_the_command_and_hvdruns_lines(capsys):
    assert hvd.run(lambda: 1, verbose=True) == [1]
    _, err = capsys.readouterr()
    assert "hvd.run: " in err and "-m hvd._run_task" in err
    assert "hvdrun: host localhost joined" in err


def test_results_stream_back_when_ranks_do_not_see_the_callers_dir(
        monkeypatch, capsys, mark):
    # As on ssh hosts: the payload travels in the environment, the record
    # as marked lines of the rank's stdout (several, > 48 KiB of base64).
    monkeypatch.setenv("HVD_RUN_NO_SHARED_DIR", "1")

    def fn(blob):
        sys.stdout.write("left open ")  # the marker follows on this line
        sys.stdout.flush()
        return int(os.environ["HVD_RANK"]), blob * 2
    blob = os.urandom(100 * 1024)
    results = hvd.run(fn, args=(blob,), num_proc=2,
                      env={"RUN_API_TEST_MARK": mark})
    assert results == [(0, blob * 2), (1, blob * 2)]
    out, _ = capsys.readouterr()
    assert "[0]<stdout>:left open" in out
    assert "hvd-run-result" not in out


def test_payload_larger_than_the_environment_goes_by_file(mark):
    blob = b"x" * (3 << 20)
    assert hvd.run(len, args=(blob,), num_proc=2,
                   env={"RUN_API_TEST_MARK": mark}) == [3 << 20] * 2


def test_payload_too_large_without_a_shared_dir_says_so(monkeypatch, mark):
    monkeypatch.setenv("HVD_RUN_NO_SHARED_DIR", "1")
    with pytest.raises(hvd.HvdRunError,
                       match="too large for the job's environment"):
        hvd.run(len, args=(b"x" * (3 << 20),), num_proc=2,
                env={"RUN_API_TEST_MARK": mark})


# -- failures of func ----------------------------------------------------

def fail_on_rank_one():
    import hvd.torch as h
    h.init()
    if h.rank() == 1:
        raise ValueError("bad shard on rank %d" % h.rank())
    time.sleep(300)  # the others would wait forever: the job must end them


@pytest.mark.parametrize("np", [2, 3])
def test_exception_on_one_rank_is_raised_with_its_traceback(np, mark):
    start = time.monotonic()
    with pytest.raises(hvd.HvdRunError) as info:
        hvd.run(fail_on_rank_one, num_proc=np,
                env={"RUN_API_TEST_MARK": mark})
    assert time.monotonic() - start < 60
    err = info.value
    assert err.rank == 1
    assert err.exit_code == 1
    assert str(err).startswith("rank 1 (host ")
    assert "raised ValueError: bad shard on rank 1" in str(err)
    assert "in fail_on_rank_one" in err.remote_traceback
    assert 'raise ValueError("bad shard on rank %d"' in str(err)
    assert isinstance(err.__cause__, ValueError)
    assert str(err.__cause__) == "bad shard on rank 1"
    assert [r for r, _, _ in err.errors] == [1]


def test_exceptions_on_every_rank_name_the_first_and_the_others(mark):
    def fn():
        rank = int(os.environ["HVD_RANK"])
        time.sleep(0.5 * rank)
        raise KeyError("rank%d" % rank)
    with pytest.raises(hvd.HvdRunError) as info:
        hvd.run(fn, num_proc=2, env={"RUN_API_TEST_MARK": mark})
    assert info.value.rank == 0
    assert isinstance(info.value.__cause__, KeyError)


def test_rank_that_exits_without_a_record_gives_hvdruns_message(mark):
    def fn():
        if os.environ["HVD_RANK"] == "1":
            os._exit(3)
        time.sleep(300)
    with pytest.raises(hvd.HvdRunError,
                       match=r"hvdrun: rank 1 \(host .*\) exited with code 3"
                       ) as info:
        hvd.run(fn, num_proc=2, env={"RUN_API_TEST_MARK": mark})
    assert info.value.rank == 1
    assert info.value.exit_code == 3


def test_unpicklable_return_value_is_an_error_of_that_rank():
    import threading

    def fn():
        return threading.Lock()
    with pytest.raises(hvd.HvdRunError,
                       match="return value of func .* cannot be pickled"):
        hvd.run(fn, num_proc=2)


def test_unpicklable_func_raises_type_error_before_starting():
    import threading
    lock = threading.Lock()
    with pytest.raises(TypeError, match="picklable with cloudpickle"):
        hvd.run(lambda: lock)


# -- bad arguments: raised at once, nothing started ----------------------

@pytest.mark.parametrize("kwargs,message", [
    (dict(num_proc=0), "num_proc must be at least 1"),
    (dict(num_proc=-2), "num_proc must be at least 1"),
    (dict(num_proc="2"), "num_proc must be an int"),
    (dict(np=0), "num_proc must be at least 1"),
    (dict(hosts="localhost:2", hostfile="/nonexistent"), "not both"),
    (dict(start_timeout=0), "start_timeout must be a positive"),
    (dict(min_num_proc=1), "no elastic jobs"),
    (dict(host_discovery_script="discover.sh"), "no elastic jobs"),
    (dict(use_mpi=True), "no MPI controller"),
    (dict(use_gloo=True, use_mpi=True), "cannot both be True"),
    (dict(mpi_args="--bind-to none"), "does not use MPI"),
    (dict(env={"HVD_RUN_JOB": "x"}), "hvd.run's own variable"),
])
def test_bad_arguments_raise_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hvd.run(os.getpid, **kwargs)


@pytest.mark.parametrize("kwargs,message", [
    (dict(num_proc=2, hosts="localhost:x"), r"^hvdrun: -H: bad slot count"),
    (dict(num_proc=2, hosts="localhost:1,localhost:1"),
     r"^hvdrun: .*localhost.*"),
    (dict(num_proc=3, hosts="localhost:2"), r"^hvdrun: .*"),
    (dict(hostfile="/nonexistent/hostfile"), r"^hvdrun: .*/nonexistent"),
])
def test_hvdrun_usage_errors_raise_its_one_line_message(kwargs, message):
    start = time.monotonic()
    with pytest.raises(ValueError, match=message) as info:
        hvd.run(os.getpid, **kwargs)
    assert "\n" not in str(info.value)
    assert time.monotonic() - start < 10


def test_accepted_arguments_without_effect_here(mark):
    assert hvd.run(lambda: 7, num_proc=1, use_gloo=True, disable_cache=True,
                   start_timeout=20, env={"RUN_API_TEST_MARK": mark}) == [7]


def test_hosts_given_take_np_from_their_slots(mark):
    assert hvd.run(lambda: os.environ["HVD_SIZE"], hosts="localhost:2",
                   env={"RUN_API_TEST_MARK": mark}) == ["2", "2"]


# -- the caller interrupted ----------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_caller_interrupted_or_killed_ends_the_job(sig, tmp_path):
    # SIGINT: KeyboardInterrupt in run(), which ends the job and re-raises;
    # SIGKILL (a notebook kernel killed): hvdrun's parent-death signal.
    mark = uuid.uuid4().hex
    started = tmp_path / "started"
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time
        sys.path.insert(0, %r)
        import hvd
        def fn(path):
            open(path + os.environ["HVD_RANK"], "w").close()
            time.sleep(300)
        try:
            hvd.run(fn, args=(%r,), num_proc=2,
                    env={"RUN_API_TEST_MARK": %r})
        except KeyboardInterrupt:
            print("caller: KeyboardInterrupt")
            sys.exit(42)
        """ % (PYTHON_DIR, str(started), mark)))
    # The job's directory goes here, not in /tmp: a killed caller cannot
    # remove it.
    job_dirs = tmp_path / "job_dirs"
    job_dirs.mkdir()
    proc = subprocess.Popen([sys.executable, str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True,
                            env=dict(os.environ, HVD_RUN_TMPDIR=str(job_dirs)))
    try:
        deadline = time.monotonic() + 60
        while not all(os.path.exists(str(started) + r) for r in "01"):
            assert time.monotonic() < deadline, "ranks never started"
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.1)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if sig == signal.SIGINT:
        assert proc.returncode == 42, out
        assert "caller: KeyboardInterrupt" in out
        assert list(job_dirs.iterdir()) == []  # the caller removed its own
    else:
        assert proc.returncode == -signal.SIGKILL
    assert_nothing_left(mark)


# -- horovod.runner helpers ----------------------------------------------

def test_in_thread_runs_target_and_checks_args():
    from horovod.runner.util.threads import in_thread
    seen = []
    t = in_thread(target=seen.append, args=(1,))
    t.join(5)
    assert seen == [1] and t.daemon
    with pytest.raises(ValueError, match="must be a tuple"):
        in_thread(target=seen.append, args=[1])
    in_thread(target=lambda: 1 / 0, silent=True).join(5)


def test_on_event_calls_once_set_unless_stopped():
    import threading
    from horovod.runner.util.threads import on_event
    event, stop, seen = threading.Event(), threading.Event(), []
    t = on_event(event, seen.append, args=("fired",))
    event.set()
    t.join(5)
    assert seen == ["fired"]
    t = on_event(threading.Event(), seen.append, args=("never",), stop=stop,
                 check_stop_interval_s=0.01, daemon=False)
    stop.set()
    t.join(5)
    assert not t.is_alive() and seen == ["fired"]
    with pytest.raises(ValueError):
        on_event(threading.Event(), print, daemon=False)
    with pytest.raises(ValueError):
        on_event(None, print)


@pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_execute_function_multithreaded():
    from horovod.runner.util.threads import execute_function_multithreaded
    assert execute_function_multithreaded(
        lambda a, b: a * b, [[1, 2], [3, 4], [5, 6]],
        max_concurrent_executions=2) == {0: 2, 1: 12, 2: 30}

    def fails(x):
        raise RuntimeError("no")
    with pytest.raises(RuntimeError, match="did not complete"):
        execute_function_multithreaded(fails, [[1]])


def test_get_env_rank_and_size(monkeypatch):
    from horovod.runner.common.util.env import get_env_rank_and_size
    assert get_env_rank_and_size() == (0, 1)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    assert get_env_rank_and_size() == (2, 4)
    monkeypatch.setenv("HOROVOD_RANK", "1")
    with pytest.raises(RuntimeError, match="HOROVOD_SIZE"):
        get_env_rank_and_size()


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):  # under bazel test: per-case report
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))

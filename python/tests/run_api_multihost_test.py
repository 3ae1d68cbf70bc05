"""hvd.run across ssh hosts: network-namespace hosts h1, h2 with their own
sshd (tests/multihost/netns_hosts.sh), the caller on the client host h0.

Run by `netns_hosts.sh run --hosts 2 -- run_python.sh <this file>` (root):
the file re-executes itself inside h0's namespace. The hosts share this
machine's filesystem, so a plain run is the shared-filesystem case;
HVD_RUN_NO_SHARED_DIR=1 makes it the remote case proper (payload in the
environment, records streamed back through hvdrun).
"""

import os
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
ROOT = os.path.dirname(PYTHON_DIR)
_IN_H0 = "RUN_API_MULTIHOST_IN_H0"

if os.environ.get("HVD_MH_CLIENT_NETNS") and not os.environ.get(_IN_H0):
    os.environ[_IN_H0] = "1"
    os.execvp("ip", ["ip", "netns", "exec", os.environ["HVD_MH_CLIENT_NETNS"],
                     sys.executable, os.path.abspath(__file__)] + sys.argv[1:])

sys.path.insert(0, PYTHON_DIR)
sys.path.insert(0, HERE)

import cloudpickle  # noqa: E402
import hvd  # noqa: E402
# run_api_test also points HVD_HVDRUN_PATH, HVD_AGENT_PATH, HVD_LIBRARY at
# the built ones.
import run_api_test as local  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.skipif(
    not os.environ.get("HVD_MH_SSH_CONFIG"),
    reason="needs tests/multihost/netns_hosts.sh run (root)")


def ssh_options():
    return dict(ssh_identity_file=os.environ.get("HVD_MH_SSH_KEY"),
                ssh_config_file=os.environ.get("HVD_MH_SSH_CONFIG"))


def ranks_and_hosts(tag):
    import torch
    import hvd.torch as h
    h.init()
    total = h.allreduce(torch.tensor([float(h.rank())]), op=h.Sum)
    return h.rank(), h.local_rank(), os.environ["HVD_HOSTNAME"], \
        float(total[0]), tag


def fail_on_rank_two():
    import hvd.torch as h
    h.init()
    if h.rank() == 2:
        raise RuntimeError("remote failure on rank %d" % h.rank())
    time.sleep(300)


@pytest.fixture
def mark():
    value = uuid.uuid4().hex
    yield value
    local.assert_nothing_left(value)


@pytest.fixture(params=["shared_dir", "no_shared_dir"])
def transport(request, monkeypatch):
    if request.param == "no_shared_dir":
        monkeypatch.setenv("HVD_RUN_NO_SHARED_DIR", "1")
    return request.param


def test_results_in_rank_order_over_two_ssh_hosts(transport, mark):
    blob = os.urandom(70 * 1024)  # a payload and records of several parts
    results = hvd.run(ranks_and_hosts, args=(blob,), num_proc=4,
                      hosts="h1:2,h2:2", env={"RUN_API_TEST_MARK": mark},
                      **ssh_options())
    assert results == [(0, 0, "h1", 6.0, blob), (1, 1, "h1", 6.0, blob),
                       (2, 0, "h2", 6.0, blob), (3, 1, "h2", 6.0, blob)]


def test_exception_on_a_remote_rank_has_its_traceback(transport, mark):
    with pytest.raises(hvd.HvdRunError) as info:
        hvd.run(fail_on_rank_two, num_proc=4, hosts="h1:2,h2:2",
                env={"RUN_API_TEST_MARK": mark}, **ssh_options())
    err = info.value
    assert (err.rank, err.host) == (2, "h2")
    assert str(err).startswith(
        "rank 2 (host h2) raised RuntimeError: remote failure on rank 2")
    assert "in fail_on_rank_two" in err.remote_traceback
    assert isinstance(err.__cause__, RuntimeError)


def test_payload_over_the_environment_limit_needs_a_shared_dir(monkeypatch,
                                                              mark):
    monkeypatch.setenv("HVD_RUN_NO_SHARED_DIR", "1")
    with pytest.raises(hvd.HvdRunError,
                       match="too large for the job's environment.*host "
                             r"\(h[12]\)"):
        hvd.run(len, args=(b"x" * (2 << 20),), num_proc=2, hosts="h1:1,h2:1",
                env={"RUN_API_TEST_MARK": mark}, **ssh_options())


def test_ssh_refused_raises_hvdruns_message():
    options = ssh_options()
    options["ssh_identity_file"] = os.environ["HVD_MH_BAD_KEY"]
    with pytest.raises(hvd.HvdRunError,
                       match="hvdrun: host h1: could not start hvd-agent: "
                             "ssh exited with code 255.*Permission denied"
                       ) as info:
        hvd.run(os.getpid, num_proc=1, hosts="h1:1", **options)
    assert info.value.rank is None


def test_start_timeout_is_honoured():
    start = time.monotonic()
    with pytest.raises(hvd.HvdRunError, match="hvdrun: host .*"):
        hvd.run(os.getpid, num_proc=1, start_timeout=3,
                hosts=os.environ["HVD_MH_UNREACHABLE"] + ":1",
                **ssh_options())
    assert time.monotonic() - start < 20


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):  # under bazel test: per-case report
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))

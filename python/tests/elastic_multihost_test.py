"""Elastic jobs across ssh hosts: network-namespace hosts h1..h3 with their
own sshd (tests/multihost/netns_hosts.sh), hvdrun on the client host h0, and
a Horovod elastic training script (elastic_train_script.py) that commits a
step counter every step.

Each test asserts the job's exit, the sizes of the rounds the script saw,
and that the final state of every rank holds exactly the steps trained: a
committed step lost or done twice would show as step != done or a size
sequence out of place.

Run by `netns_hosts.sh run --hosts 3 -- run_python.sh <this file>` (root).
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
_IN_H0 = "ELASTIC_MULTIHOST_IN_H0"

if os.environ.get("HVD_MH_CLIENT_NETNS") and not os.environ.get(_IN_H0):
    os.environ[_IN_H0] = "1"
    os.execvp("ip", ["ip", "netns", "exec", os.environ["HVD_MH_CLIENT_NETNS"],
                     sys.executable, os.path.abspath(__file__)] + sys.argv[1:])

sys.path.insert(0, HERE)
import run_api_test  # noqa: E402,F401  (points HVD_* paths at the build)

pytestmark = pytest.mark.skipif(
    not os.environ.get("HVD_MH_SSH_CONFIG"),
    reason="needs tests/multihost/netns_hosts.sh run (root)")

SCRIPT = os.path.join(HERE, "elastic_train_script.py")


class Job:
    def __init__(self, tmp, steps=20, fail="", sleep=0.2):
        self.log = os.path.join(tmp, "log")
        self.env = dict(os.environ, ELASTIC_LOG=self.log,
                        ELASTIC_STEPS=str(steps), ELASTIC_SLEEP=str(sleep),
                        ELASTIC_FAIL=fail, PYTHONPATH=PYTHON_DIR,
                        HVD_START_TIMEOUT="30")

    def argv(self, flags):
        return ([os.environ["HVD_HVDRUN_PATH"],
                 "--ssh-config-file", os.environ["HVD_MH_SSH_CONFIG"],
                 "-i", os.environ["HVD_MH_SSH_KEY"],
                 "--agent-path", os.environ["HVD_AGENT_PATH"],
                 "-x", "HVD_LIBRARY", "-x", "PYTHONPATH",
                 "-x", "ELASTIC_LOG", "-x", "ELASTIC_STEPS",
                 "-x", "ELASTIC_SLEEP", "-x", "ELASTIC_FAIL"] + flags +
                ["/usr/bin/python3", SCRIPT])

    def start(self, flags):
        return subprocess.Popen(self.argv(flags), env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def run(self, flags, timeout=240):
        p = self.start(flags)
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def commits(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def finals(self):
        path = self.log + ".final"
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f]


class Discovery:
    """A discovery script printing the lines of a file the test rewrites."""

    def __init__(self, tmp, hosts):
        self.file = os.path.join(tmp, "hosts")
        self.script = os.path.join(tmp, "discover.sh")
        with open(self.script, "w") as f:
            f.write("#!/bin/sh\ncat %s\n" % self.file)
        os.chmod(self.script, 0o755)
        self.set(hosts)

    def set(self, hosts):
        with open(self.file + ".new", "w") as f:
            f.write("".join(h + "\n" for h in hosts))
        os.replace(self.file + ".new", self.file)

    def flags(self):
        return ["--host-discovery-script", self.script]


def wait_for_sizes(job, expected, timeout=120):
    """Waits until the rounds' sizes so far are `expected`."""
    start = time.time()
    while time.time() - start < timeout:
        if sizes(job.commits()) == expected:
            return
        time.sleep(0.1)
    raise AssertionError("sizes %s, not %s" % (sizes(job.commits()), expected))


def agent_pid(host):
    """The pid of the hvd-agent running in host's network namespace."""
    ns = os.environ["HVD_MH_NETNS_" + host]
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                          text=True, check=True).stdout.split()
    for pid in pids:
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0) == b"hvd-agent":
            return int(pid)
    return None


def sizes(commits):
    """The sizes of the rounds in order, each run of equal sizes once."""
    out = []
    for c in commits:
        if not out or out[-1] != c["size"]:
            out.append(c["size"])
    return out


def rounds(err):
    """How many rounds hvdrun formed (it says each: "elastic round N: ...")."""
    return len(re.findall(r"^hvdrun: elastic round \d+: ", err, re.M))


def check_state(job, steps, final_size):
    finals = job.finals()
    assert len(finals) == final_size, finals
    for f in finals:
        assert f["step"] == steps and f["done"] == steps, f
        assert f["size"] == final_size, f
    # The ranks are 0..size-1, and w0, there from the start, kept rank 0.
    assert sorted(f["rank"] for f in finals) == list(range(final_size))
    assert [f["worker"] for f in finals if f["rank"] == 0] == ["w0"], finals
    committed = [c["step"] for c in job.commits()]
    assert committed[-1] == steps
    # Logged before each commit: a step after a reset is the one after the
    # last commit, so the log never skips a step, and goes back at most to
    # redo the step that was in flight.
    for a, b in zip(committed, committed[1:]):
        assert b in (a + 1, a), committed


def test_a_killed_worker_blacklists_its_host_and_the_job_goes_on():
    with tempfile.TemporaryDirectory() as tmp:
        job = Job(tmp, fail="w2:6:kill")
        code, out, err = job.run(["-np", "3", "--min-np", "2",
                                  "-H", "h1:2,h2:1"])
        assert code == 0, err
        assert rounds(err) == 2, err
        assert "host h2 is blacklisted" in err, err
        assert sizes(job.commits()) == [3, 2], job.commits()
        check_state(job, 20, 2)


def test_a_raising_worker_with_discovery_then_a_host_added():
    with tempfile.TemporaryDirectory() as tmp:
        hosts = Discovery(tmp, ["h1:1", "h2:1"])
        job = Job(tmp, steps=40, fail="w1:4:exception", sleep=0.3)
        p = job.start(["-np", "2", "--min-np", "1"] + hosts.flags())
        wait_for_sizes(job, [2, 1])
        hosts.set(["h1:1", "h3:1"])
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        assert rounds(err) == 3, err
        assert sizes(job.commits()) == [2, 1, 2], (job.commits(), err)
        assert "host h3 added" in err, err
        check_state(job, 40, 2)


def test_a_killed_worker_with_discovery():
    with tempfile.TemporaryDirectory() as tmp:
        hosts = Discovery(tmp, ["h1:2", "h2:1"])
        job = Job(tmp, fail="w2:6:kill")
        code, out, err = job.run(["-np", "3", "--min-np", "2"] + hosts.flags())
        assert code == 0, err
        assert rounds(err) == 2, err
        assert "host h2 is blacklisted" in err, err
        assert sizes(job.commits()) == [3, 2], job.commits()
        check_state(job, 20, 2)


def test_a_raising_worker_with_fixed_hosts():
    with tempfile.TemporaryDirectory() as tmp:
        job = Job(tmp, fail="w1:5:exception")
        code, out, err = job.run(["-np", "2", "--min-np", "1",
                                  "-H", "h1:1,h2:1"])
        assert code == 0, err
        assert rounds(err) == 2, err
        assert "injected failure of worker w1 at 5" in err, err
        assert sizes(job.commits()) == [2, 1], job.commits()
        check_state(job, 20, 1)


def test_hosts_added_then_removed_with_slots_2_and_1():
    with tempfile.TemporaryDirectory() as tmp:
        hosts = Discovery(tmp, ["h1:1"])
        job = Job(tmp, steps=100, sleep=0.2)
        p = job.start(["-np", "1", "--min-np", "1"] + hosts.flags())
        wait_for_sizes(job, [1])
        hosts.set(["h1:1", "h2:2"])
        wait_for_sizes(job, [1, 3])
        hosts.set(["h1:1", "h3:1"])
        wait_for_sizes(job, [1, 3, 2])
        hosts.set(["h1:1"])
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        assert rounds(err) == 4, err
        assert sizes(job.commits()) == [1, 3, 2, 1], (job.commits(), err)
        assert "host h2 left host discovery" in err, err
        assert "host h3 left host discovery" in err, err
        check_state(job, 100, 1)


def test_all_ranks_failing_fails_the_job():
    with tempfile.TemporaryDirectory() as tmp:
        job = Job(tmp, fail="*:5:exception")
        code, out, err = job.run(["-np", "2", "--min-np", "1",
                                  "-H", "h1:1,h2:1"])
        assert code == 1, err
        assert rounds(err) == 1, err
        assert "every host is blacklisted (h1, h2)" in err, err
        assert max(c["step"] for c in job.commits()) == 4, job.commits()
        assert not job.finals()


def test_every_host_blacklisted_one_after_another_fails_the_job():
    with tempfile.TemporaryDirectory() as tmp:
        job = Job(tmp, fail="w1:3:kill,w0:8:kill")
        code, out, err = job.run(["-np", "2", "--min-np", "1",
                                  "-H", "h1:1,h2:1"])
        assert code == 137, err
        assert rounds(err) == 2, err
        assert "every host is blacklisted (h1, h2)" in err, err
        assert sizes(job.commits()) == [2, 1], job.commits()
        assert not job.finals()


def test_the_reset_limit_ends_the_job():
    with tempfile.TemporaryDirectory() as tmp:
        job = Job(tmp, fail="w2:3:kill,w1:6:kill")
        code, out, err = job.run(["-np", "3", "--min-np", "1",
                                  "--reset-limit", "1",
                                  "-H", "h1:1,h2:1,h3:1"])
        assert code == 137, err
        assert rounds(err) == 2, err
        assert "the job was reset 1 time, the limit (--reset-limit 1)" \
            in err, err
        assert sizes(job.commits()) == [3, 2], job.commits()


def test_a_blacklisted_host_comes_back_after_its_cooldown():
    with tempfile.TemporaryDirectory() as tmp:
        job = Job(tmp, steps=40, fail="w1:3:kill", sleep=0.3)
        code, out, err = job.run(["-np", "2", "--min-np", "1",
                                  "--blacklist-cooldown-range", "1", "2",
                                  "-H", "h1:1,h2:1"])
        assert code == 0, err
        assert rounds(err) == 3, err
        assert "host h2 is blacklisted for " in err, err
        assert "host h2 added" in err, err
        assert sizes(job.commits()) == [2, 1, 2], (job.commits(), err)
        check_state(job, 40, 2)


def test_a_killed_agent_loses_its_host_and_the_job_goes_on():
    with tempfile.TemporaryDirectory() as tmp:
        job = Job(tmp, steps=40, sleep=0.25)
        p = job.start(["-np", "3", "--min-np", "1", "-H", "h1:2,h2:1"])
        start = time.time()
        while len(job.commits()) < 5 and time.time() - start < 120:
            time.sleep(0.1)
        pid = agent_pid("h2")
        assert pid, "no hvd-agent in h2"
        os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        assert rounds(err) == 2, err
        assert "host h2 is blacklisted" in err, err
        assert sizes(job.commits()) == [3, 2], (job.commits(), err)
        check_state(job, 40, 2)


@pytest.mark.parametrize("when", ["rejoin", "reset"])
def test_a_worker_killed_during_the_re_rendezvous(when):
    # rejoin: before it joins the next round (while the round forms);
    # reset: after that round formed and connected, before the sync.
    with tempfile.TemporaryDirectory() as tmp:
        job = Job(tmp, fail="w2:4:kill,w1:%s:kill" % when)
        code, out, err = job.run(["-np", "3", "--min-np", "1",
                                  "-H", "h1:1,h2:1,h3:1"])
        assert code == 0, err
        # rejoin: round 1 formed without w1; reset: with it, then round 2.
        assert rounds(err) == (2 if when == "rejoin" else 3), err
        assert "host h3 is blacklisted" in err, err
        assert "host h2 is blacklisted" in err, err
        assert sizes(job.commits()) == [3, 1], (job.commits(), err)
        check_state(job, 20, 1)


def test_too_few_slots_for_the_elastic_timeout_ends_the_job():
    with tempfile.TemporaryDirectory() as tmp:
        job = Job(tmp, fail="w1:3:kill")
        code, out, err = job.run(["-np", "2", "--min-np", "2",
                                  "--elastic-timeout", "3",
                                  "-H", "h1:1,h2:1"])
        assert code != 0
        assert rounds(err) == 1, err
        assert "fewer than the 2 needed (--min-np)" in err, err


def test_a_failing_discovery_script_starts_nothing():
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "discover.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho inventory unreachable >&2\nexit 4\n")
        os.chmod(script, 0o755)
        job = Job(tmp)
        code, out, err = job.run(["-np", "1", "--host-discovery-script",
                                  script], timeout=60)
        assert code == 1
        assert "exited with code 4: inventory unreachable" in err, err
        assert not job.commits()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-x"] + sys.argv[1:]))

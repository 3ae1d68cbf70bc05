"""The hvd chart's pods, run for real: the chart rendered with test values,
then each rendered pod's container (command, args, environment, volumes)
started on network-namespace hosts, with the Services' names resolving as
cluster DNS would (k8s_sim.py says exactly what is and is not simulated).

Hosts (tests/multihost/netns_hosts.sh run --hosts 3 --dead-iface none):
the launcher pod on h0, worker pods on h1, h2 (and h3 when an elastic job
is scaled up). Release "train" in namespace "ml". The image is this
machine's filesystem with the Bazel-built hvdrun and hvd-agent; the
values add what the image would hold (the Python package's path, the
repository as working directory).

Run by `netns_hosts.sh run ... -- python3 tests/k8s/pods_test.py` (root).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import k8s_sim  # noqa: E402

pytestmark = pytest.mark.skipif(
    not os.environ.get("HVD_MH_DIR") or os.geteuid() != 0,
    reason="needs tests/multihost/netns_hosts.sh run (root)")

RELEASE = "train"
NAMESPACE = "ml"
# Every worker process says who it is before its real work.
WHO = ('echo "rank $HVD_RANK/$HVD_SIZE local $HVD_LOCAL_RANK/'
       '$HVD_LOCAL_SIZE host $HVD_HOSTNAME uts $(uname -n)"; ')
RANK_LINE = re.compile(r"^\[(\d+)\]<stdout>:rank (\d+)/(\d+) local (\d+)/(\d+)"
                       r" host (\S+) uts (\S+)$", re.M)


def built(relative):
    """A file of the Bazel build: in the runfiles tree, else bazel-bin/."""
    for base in (ROOT, os.path.join(ROOT, "bazel-bin")):
        path = os.path.join(base, relative)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(relative + ": bazel build //tests/k8s:all")


def host(i):
    """(network namespace, address) of netns host h<i>."""
    return (os.environ["HVD_MH_NETNS_h%d" % i],
            os.environ["HVD_MH_ADDR_h%d" % i])


class Sim:
    def __init__(self, work):
        self.work = work
        # hvdrun and hvd-agent of this build, where the image has them.
        self.image_bin = k8s_sim.image_bin(
            work, [built("launcher/hvdrun"), built("agent/hvd-agent")])
        self.mark = uuid.uuid4().hex
        self.count = 0

    def base_values(self):
        """What the image would provide, as values: the package on the
        Python path, the repository as the working directory; and a mark
        to find every process of the job."""
        return {
            "workingDir": ROOT,
            "env": [
                {"name": "PYTHONPATH", "value": os.path.join(ROOT, "python")},
                {"name": "HVD_LIBRARY", "value": built("core/libhvd.so")},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                {"name": "K8S_SIM_MARK", "value": self.mark},
            ],
        }

    def cluster(self, values, extra_env=()):
        self.count += 1
        work = os.path.join(self.work, "c%d" % self.count)
        os.makedirs(work)
        base = self.base_values()
        base["env"] += list(extra_env)
        docs = k8s_sim.render(ROOT, [base, values], RELEASE, NAMESPACE, work)
        return k8s_sim.Cluster(docs, NAMESPACE, work, self.image_bin,
                               prober_netns=host(0)[0])

    def assert_nothing_left(self, within=15.0):
        needle = "K8S_SIM_MARK=" + self.mark
        deadline = time.time() + within
        while k8s_sim.processes_with(needle) and time.time() < deadline:
            time.sleep(0.2)
        assert k8s_sim.processes_with(needle) == []


@pytest.fixture
def sim():
    work = k8s_sim.tempdir("k8s-pods.")
    s = Sim(work)
    yield s
    s.assert_nothing_left()
    k8s_sim.rmtree(work)


def outputs(*pods):
    return "\n".join("---- pod %s:\n%s" % (p.name, p.output()) for p in pods)


def rank_lines(text):
    """{rank: (size, local_rank, local_size, HVD_HOSTNAME, uname -n)}"""
    found = {}
    for m in RANK_LINE.finditer(text):
        assert m.group(1) == m.group(2), m.group(0)
        found[int(m.group(1))] = (int(m.group(3)), int(m.group(4)),
                                  int(m.group(5)), m.group(6), m.group(7))
    return found


def wait_for(predicate, timeout, what):
    """Waits until predicate(); `what` (a string, or a function making one
    when the wait fails) says what for."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " +
                         (what() if callable(what) else what))


def pid1_command(pod):
    pid = pod.pid1()
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().split(b"\0")


# -- orchestrator mode: launcher Job + indexed worker Job --------------------

def test_job_runs_every_rank_and_exits_zero(sim):
    values = {"worker": {"replicas": 2, "slots": 2},
              "command": ["/bin/sh", "-c", WHO + "exec python3 "
                          "examples/function_approximation.py --epochs 3"]}
    with sim.cluster(values) as c:
        workers = [c.job_pod("train-worker", *host(i + 1), index=i).start()
                   for i in range(2)]
        # No launcher pod yet: its name does not resolve, and the agents'
        # start script waits for it (hvd-agent itself is not started).
        time.sleep(3)
        for w in workers:
            assert w.running(), outputs(w)
            argv = pid1_command(w)
            assert argv[1] == b"/etc/hvd/scripts/resolve-rendezvous.sh", argv
        launcher = c.job_pod("train-launcher", *host(0)).start()
        rc = launcher.wait(300)
        out = launcher.output()
        assert rc == 0, outputs(launcher, *workers)
        for w in workers:
            assert w.wait(30) == 0, outputs(w)
        ranks = rank_lines(out)
        assert sorted(ranks) == [0, 1, 2, 3], out
        by_pod = {}
        for size, local, local_size, hvd_host, uts in ranks.values():
            assert (size, local_size) == (4, 2)
            assert hvd_host == uts  # the agent's host name: the pod's
            by_pod.setdefault(uts, []).append(local)
        assert {k: sorted(v) for k, v in by_pod.items()} == {
            "train-worker-0": [0, 1], "train-worker-1": [0, 1]}, out
        assert "final error on a 101-point grid" in out
        assert "hvdrun: warning: no --tls-cert" in out
        # The token is in no log: --rendezvous-file keeps it out of hvdrun's.
        token = c.secrets["train-token"]["token"].decode()
        assert token not in outputs(launcher, *workers)


def test_a_failing_process_fails_both_jobs_with_its_code(sim):
    values = {"worker": {"replicas": 2, "slots": 2},
              "command": ["/bin/sh", "-c", WHO + 'if [ "$HVD_RANK" = 2 ]; '
                          'then exit 3; fi; exec sleep 300']}
    with sim.cluster(values) as c:
        launcher = c.job_pod("train-launcher", *host(0)).start()
        workers = [c.job_pod("train-worker", *host(i + 1), index=i).start()
                   for i in range(2)]
        assert launcher.wait(120) == 3, outputs(launcher, *workers)
        for w in workers:  # every agent exits with the job's code
            assert w.wait(60) == 3, outputs(w)
        out = launcher.output()
        assert re.search(r"^hvdrun: rank 2 \(host train-worker-[01]\) "
                         r"exited with code 3$", out, re.M), out
    print(out)


def test_a_killed_worker_pod_fails_the_job_and_every_pod_ends(sim):
    values = {"worker": {"replicas": 2, "slots": 1},
              "command": ["/bin/sh", "-c", WHO + "exec python3 "
                          "examples/function_approximation.py --epochs "
                          "100000"]}
    with sim.cluster(values) as c:
        launcher = c.job_pod("train-launcher", *host(0)).start()
        workers = [c.job_pod("train-worker", *host(i + 1), index=i).start()
                   for i in range(2)]
        wait_for(lambda: "<stdout>:epoch" in launcher.output(), 180,
                 "training to start")
        victim = workers[1]
        assert pid1_command(victim)[0].endswith(b"hvd-agent")
        # The container's main process SIGKILLed (the OOM killer, a crash):
        # the whole pod goes.
        victim.signal(signal.SIGKILL)
        assert victim.wait(10) != 0
        rc = launcher.wait(60)
        out = launcher.output()
        assert rc != 0, outputs(launcher, *workers)
        assert "hvdrun: host train-worker-1: lost the connection to " \
            "hvd-agent" in out, out
        assert workers[0].wait(60) != 0, outputs(workers[0])
    print(out)


def test_the_launcher_pod_lost_ends_every_worker_pod(sim):
    values = {"worker": {"replicas": 2, "slots": 2},
              "command": ["/bin/sh", "-c", WHO + "exec python3 "
                          "examples/function_approximation.py --epochs "
                          "100000"]}
    with sim.cluster(values) as c:
        launcher = c.job_pod("train-launcher", *host(0)).start()
        workers = [c.job_pod("train-worker", *host(i + 1), index=i).start()
                   for i in range(2)]
        wait_for(lambda: "<stdout>:epoch" in launcher.output(), 180,
                 "training to start")
        launcher.signal(signal.SIGKILL)  # its node lost, say
        assert launcher.wait(10) != 0
        for i, w in enumerate(workers):
            assert w.wait(60) == 1, outputs(w)
            assert "hvd-agent train-worker-%d: lost the launcher at " % i \
                in w.output(), outputs(w)
    print(outputs(*workers))


def test_a_worker_node_cut_off_fails_the_job_on_heartbeats(sim):
    """A node gone silent (no connection closed): the launcher and the
    cut-off agent each notice the other's missing heartbeats."""
    values = {"worker": {"replicas": 2, "slots": 1},
              "command": ["/bin/sh", "-c", WHO + "exec python3 "
                          "examples/function_approximation.py --epochs "
                          "100000"]}
    netns = host(2)[0]
    with sim.cluster(values) as c:
        launcher = c.job_pod("train-launcher", *host(0)).start()
        workers = [c.job_pod("train-worker", *host(i + 1), index=i).start()
                   for i in range(2)]
        wait_for(lambda: "<stdout>:epoch" in launcher.output(), 180,
                 "training to start")
        subprocess.run(["ip", "-n", netns, "link", "set", "eth0", "down"],
                       check=True)
        try:
            assert launcher.wait(60) != 0, outputs(launcher)
            out = launcher.output()
            assert "hvdrun: host train-worker-1: no heartbeat from " \
                "hvd-agent for " in out, out
            assert workers[0].wait(60) != 0, outputs(workers[0])
            assert workers[1].wait(60) == 1, outputs(workers[1])
            assert "hvd-agent train-worker-1: no word from the launcher " \
                "at " in workers[1].output(), outputs(workers[1])
        finally:
            subprocess.run(["ip", "-n", netns, "link", "set", "eth0", "up"],
                           check=True)
    print(outputs(launcher, *workers))


def test_a_pod_with_the_wrong_token_is_refused_and_the_job_fails(sim):
    values = {"worker": {"replicas": 2, "slots": 1},
              "launcher": {"startTimeout": 15},
              "command": ["/bin/sh", "-c", WHO]}
    with sim.cluster(values) as c:
        launcher = c.job_pod("train-launcher", *host(0)).start()
        good = c.job_pod("train-worker", *host(1), index=0).start()
        # A pod that read another install's Secret.
        stale = {"train-token": {"token": b"token-of-an-earlier-install"}}
        bad = c.job_pod("train-worker", *host(2), index=1,
                        secrets=stale).start()
        assert bad.wait(120) == 1, outputs(bad)
        assert "refused the job token: missing or wrong job token" in \
            bad.output(), outputs(bad)
        assert launcher.wait(60) == 1, outputs(launcher)
        out = launcher.output()
        assert "only 1 of 2 slots joined within 15 s (--start-timeout)" in \
            out, out
        assert "rendezvous: rejected /hvd.launcher.AgentService/Attach " \
            "from ipv4:%s:" % host(2)[1] in out, out
        assert "missing or wrong job token" in out, out
        assert good.wait(60) != 0, outputs(good)
        assert "<stdout>:rank" not in out


def test_tls_rendezvous_with_a_certificate_secret(sim):
    tls = make_tls(sim.work, "train-launcher")
    values = {"worker": {"replicas": 2, "slots": 1},
              "tls": {"secretName": "train-tls"},
              "command": ["/bin/sh", "-c", WHO + "exec python3 -c '"
                          "import torch, hvd.torch as h; h.init(); "
                          "print(\"sum\", h.allreduce(torch.tensor([1.0]), "
                          "op=h.Sum).item())'"]}
    with sim.cluster(values) as c:
        c.add_secret("train-tls", tls)
        launcher = c.job_pod("train-launcher", *host(0)).start()
        workers = [c.job_pod("train-worker", *host(i + 1), index=i).start()
                   for i in range(2)]
        assert launcher.wait(300) == 0, outputs(launcher, *workers)
        for w in workers:
            assert w.wait(30) == 0, outputs(w)
        out = launcher.output()
        assert sorted(rank_lines(out)) == [0, 1], out
        assert out.count("<stdout>:sum 2.0") == 2, out
        assert "plaintext" not in out, out
        # The workers' pods hold the CA only, not the key.
        for w in workers:
            assert sorted(os.listdir(os.path.join(w.dir, "volumes", "tls"))) \
                == ["ca.crt"]


def make_tls(work, name):
    """A CA and a server certificate for `name`, as a kubernetes.io/tls
    Secret's data (cert-manager's keys)."""
    d = os.path.join(work, "tls")
    os.makedirs(d)

    def openssl(*args):
        subprocess.run(["openssl"] + list(args), check=True, cwd=d,
                       capture_output=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key", "-out",
            "ca.crt", "-days", "1", "-subj", "/CN=test-ca")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", "tls.key", "-out", "tls.csr", "-subj",
            "/CN=" + name)
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=DNS:%s\n" % name)
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey",
            "ca.key", "-CAcreateserial", "-out", "tls.crt", "-days", "1",
            "-extfile", "ext")
    data = {}
    for key in ("tls.crt", "tls.key", "ca.crt"):
        with open(os.path.join(d, key), "rb") as f:
            data[key] = f.read()
    return data


# -- elastic: launcher Job over ssh + worker StatefulSet ----------------------

def make_ssh_secret(work):
    """The ssh Secret as the docs make it: the launcher's key and the
    workers' host key, with authorized_keys and known_hosts."""
    d = os.path.join(work, "ssh")
    os.makedirs(d)
    for key in ("id_ed25519", "host_ed25519_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                        key, "-f", os.path.join(d, key)], check=True)

    def read(name):
        with open(os.path.join(d, name), "rb") as f:
            return f.read()
    return {"id_ed25519": read("id_ed25519"),
            "authorized_keys": read("id_ed25519.pub"),
            "host_ed25519_key": read("host_ed25519_key"),
            "known_hosts": b"* " + read("host_ed25519_key.pub")}


def sizes(records):
    out = []
    for r in records:
        if not out or out[-1] != r["size"]:
            out.append(r["size"])
    return out


def read_json_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


def test_elastic_job_follows_the_statefulset(sim):
    log = os.path.join(sim.work, "elastic.log")
    stop = os.path.join(sim.work, "elastic.stop")
    values = {"worker": {"replicas": 2, "slots": 1},
              "elastic": {"enabled": True, "sshSecret": "train-ssh",
                          "sshPort": 2222, "minNp": 1, "maxNp": 3,
                          "timeout": 120},
              "command": ["python3", "tests/k8s/elastic_train.py"]}
    extra_env = [{"name": "K8S_ELASTIC_LOG", "value": log},
                 {"name": "K8S_ELASTIC_STOP", "value": stop},
                 {"name": "K8S_ELASTIC_STEPS", "value": "5000"},
                 {"name": "K8S_ELASTIC_SLEEP", "value": "0.1"}]
    with sim.cluster(values, extra_env) as c:
        c.add_secret("train-ssh", make_ssh_secret(sim.work))
        # The launcher first: discovery finds no ready worker pod yet.
        launcher = c.job_pod("train-launcher", *host(0)).start()
        time.sleep(3)
        assert launcher.running(), outputs(launcher)
        workers = [c.statefulset_pod("train-worker", i, *host(i + 1)).start()
                   for i in range(2)]

        def wait_sizes(expected, timeout=120):
            wait_for(lambda: sizes(read_json_lines(log)) == expected,
                     timeout, lambda: "round sizes %s (have %s)\n%s" % (
                         expected, sizes(read_json_lines(log)),
                         outputs(launcher, *workers)))
        wait_sizes([2])
        # kubectl scale statefulset train-worker --replicas 3
        workers.append(c.statefulset_pod("train-worker", 2, *host(3)).start())
        wait_sizes([2, 3])
        # kubectl scale statefulset train-worker --replicas 2: the highest
        # ordinal goes.
        assert workers[2].delete(grace=10) in (0, 143), outputs(workers[2])
        wait_sizes([2, 3, 2])
        open(stop, "w").close()
        rc = launcher.wait(120)
        out = launcher.output()
        assert rc == 0, outputs(launcher, *workers)
        finals = read_json_lines(log + ".final")
        assert sorted((f["rank"], f["size"]) for f in finals) == \
            [(0, 2), (1, 2)], finals
        assert sorted(f["host"] for f in finals) == \
            ["train-worker-0", "train-worker-1"], finals
        # Rank 0 stayed where it started (older workers keep the lower ranks).
        hosts_seen = {r["host"] for r in read_json_lines(log)}
        assert len(hosts_seen) == 1 and hosts_seen < {
            "train-worker-0", "train-worker-1"}, hosts_seen
        # The pods were found by their DNS names, through the Service.
        assert "hvdrun: host train-worker-2.train-workers.ml.svc.cluster." \
            "local added with 1 slot" in out, out
        # Its ssh or its stream, whichever is noticed first.
        w2 = r"train-worker-2\.train-workers\.ml\.svc\.cluster\.local"
        assert re.search(r"^hvdrun: host %s: (lost the connection to "
                         r"hvd-agent|hvd-agent ended unexpectedly: ssh exited "
                         r"with code 255: .*); host %s is blacklisted for "
                         r"[0-9.]+ s, and the job goes on with 2 slots$" % (
                             w2, w2), out, re.M), out
        # helm uninstall: the StatefulSet's pods are deleted.
        for w in workers[:2]:
            assert w.delete(grace=10) in (0, 143), outputs(w)
    print(out)


if __name__ == "__main__":
    args = [__file__, "-v", "-p", "no:cacheprovider"] + sys.argv[1:]
    if os.environ.get("XML_OUTPUT_FILE"):  # under bazel test
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))

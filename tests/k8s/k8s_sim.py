"""The pods of the rendered hvd chart, run for real without a cluster.

What Kubernetes would do with the chart's objects, done by hand on
network-namespace hosts (tests/multihost/netns_hosts.sh):

- render: the chart (deploy/hvd) through deploy/render/render.sh, as `helm
  template` would render it.
- a pod: the rendered pod template's (only) container, started in one
  host's network namespace, in fresh mount, UTS and PID namespaces (its
  command is its PID 1, the host name is the pod's), with exactly the
  container's environment (the image's PATH and HOME, HOSTNAME, the spec's
  env: literal values with $(VAR) expanded, secretKeyRef from the rendered
  or given Secret, fieldRef), its command and args ($(VAR) expanded), its
  workingDir, and its volumeMounts: ConfigMap and Secret volumes written
  with their items and defaultMode and mounted read-only, emptyDir
  (medium Memory: a tmpfs of sizeLimit). The image is this machine's
  filesystem with the Bazel-built hvdrun and hvd-agent over /usr/local/bin
  (where deploy/Dockerfile installs them) and a private /tmp. A mount point
  this machine lacks (/etc/hvd) is made here as an empty directory, each
  pod mounting its own over it, and removed at the end.
- the kubelet's /etc/hosts and cluster DNS: each pod's /etc/hosts is the
  kubelet's file (its own name) plus what CoreDNS would answer, kept
  current: every headless Service's name (and the short forms a pod's
  search path <ns>.svc.cluster.local, svc.cluster.local, cluster.local
  completes) resolves to the ready pods it selects, and each ready pod with
  a subdomain to its <hostname>.<subdomain>.<ns>.svc.cluster.local, which
  also answers reverse lookups of the pod's address.
- readiness: a tcpSocket readinessProbe is probed from the client host
  every 0.3 s; a pod without one is ready while it runs; a pod being deleted
  is not.
- deletion: SIGTERM to the pod's PID 1, SIGKILL after the grace period;
  when PID 1 ends, the kernel ends everything else in the pod.

Not simulated: the API server, controllers and scheduler (the test starts
each pod itself), resources and limits (no cgroups), image pulls, the
KUBERNETES_SERVICE_* variables of the API server (hvd reads none; the
chart turns service links off), Secret and ConfigMap files as the
kubelet's symlinks (plain files here), DNS over UDP (glibc reads the hosts
file instead of asking a server), container restarts.
"""

import atexit
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import yaml

# The source checkout, through any runfiles link.
REPO_REAL = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__))))

CLUSTER_DOMAIN = "cluster.local"
# What the image (deploy/Dockerfile, FROM debian:12) sets.
IMAGE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
}
TOOLS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"


_render_dir = []


def render(root, values_list, name, namespace, work):
    """The chart's objects for these values (dicts), as render.sh prints
    them: a list of dicts. Raises CalledProcessError with the renderer's
    message if rendering fails. The renderer is built once per process."""
    if not _render_dir:
        _render_dir.append(tempdir("k8s-renderer."))
        atexit.register(rmtree, _render_dir[0])
    args = [os.path.join(root, "deploy", "render", "render.sh"),
            "--name", name, "--namespace", namespace]
    for i, values in enumerate(values_list):
        path = os.path.join(work, "values-%s-%d.yaml" % (name, i))
        with open(path, "w") as f:
            yaml.safe_dump(values, f)
        args += ["-f", path]
    out = subprocess.run(args, check=True, capture_output=True, text=True,
                         env=dict(os.environ, HVD_RENDER_DIR=_render_dir[0]))
    return [d for d in yaml.safe_load_all(out.stdout) if d is not None]


def find(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and
             (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, "%d %s objects named %s" % (len(found), kind, name)
    return found[0]


_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text, env):
    """Kubernetes' $(VAR) expansion: defined variables are replaced, $$ is
    $, anything else is left as written."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _REF.sub(sub, text)


def secret_data(secret):
    data = {k: base64.b64decode(v) for k, v in
            (secret.get("data") or {}).items()}
    for k, v in (secret.get("stringData") or {}).items():
        data[k] = v.encode()
    return data


class Pod:
    def __init__(self, cluster, name, hostname, subdomain, labels, spec,
                 netns, ip, extra_env=None, secrets=None):
        self.cluster = cluster
        self.name = name
        self.hostname = hostname
        self.subdomain = subdomain
        self.labels = labels
        self.spec = spec
        self.container = spec["containers"][0]
        self.netns = netns
        self.ip = ip
        self.extra_env = extra_env or {}
        # Secrets as this pod sees them (a test may give one pod a stale
        # Secret); by default the cluster's.
        self.secrets = dict(cluster.secrets, **(secrets or {}))
        self.dir = os.path.join(cluster.work, "pods", name)
        self.log_path = os.path.join(cluster.work, "pods", name + ".log")
        self.hosts_path = os.path.join(self.dir, "hosts")
        self.proc = None
        self.terminating = False
        self.ready = False

    # -- what the kubelet and the runtime prepare ---------------------------

    def environment(self):
        env = dict(IMAGE_ENV)
        env["HOSTNAME"] = self.hostname
        env.update(self.extra_env)
        for e in self.container.get("env") or []:
            name = e["name"]
            if "value" in e:
                env[name] = expand(str(e["value"]), env)
            elif "secretKeyRef" in (e.get("valueFrom") or {}):
                ref = e["valueFrom"]["secretKeyRef"]
                env[name] = self.secrets[ref["name"]][ref["key"]].decode()
            elif "fieldRef" in (e.get("valueFrom") or {}):
                path = e["valueFrom"]["fieldRef"]["fieldPath"]
                env[name] = {"metadata.name": self.name,
                             "metadata.namespace": self.cluster.namespace,
                             "status.podIP": self.ip}[path]
            else:
                raise AssertionError("env %s: not simulated" % name)
        return env

    def argv(self, env):
        command = self.container.get("command")
        assert command, "%s: no command (the image has no entrypoint)" % \
            self.name
        return [expand(str(a), env) for a in
                command + (self.container.get("args") or [])]

    def _write_files(self, path, files, source):
        """A ConfigMap or Secret volume's files, with items and modes."""
        os.makedirs(path)
        mode = source.get("defaultMode", 0o644)
        items = source.get("items")
        pairs = [(i["key"], i["path"], i.get("mode", mode)) for i in items] \
            if items else [(k, k, mode) for k in files]
        for key, rel, m in pairs:
            target = os.path.join(path, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            data = files[key]
            with open(target, "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode())
            os.chmod(target, m)

    def mounts(self):
        """The mounts of the pod, in mounting order."""
        mounts = [
            {"kind": "bind", "source": self.cluster.image_bin,
             "target": "/usr/local/bin", "readOnly": True},
            {"kind": "bind", "source": self.hosts_path,
             "target": "/etc/hosts"},
        ]
        scratch = {}  # mount point missing here -> this pod's directory
        volumes = {v["name"]: v for v in self.spec.get("volumes") or []}
        for vm in self.container.get("volumeMounts") or []:
            target = vm["mountPath"]
            top = self.cluster.mount_point(target)
            if top is not None:
                if top not in scratch:
                    scratch[top] = os.path.join(self.dir, "mnt" + top)
                    os.makedirs(scratch[top])
                    mounts.append({"kind": "bind", "source": scratch[top],
                                   "target": top})
                os.makedirs(os.path.join(scratch[top],
                                         os.path.relpath(target, top)),
                            exist_ok=True)
            v = volumes[vm["name"]]
            path = os.path.join(self.dir, "volumes", vm["name"])
            if "configMap" in v:
                cm = self.cluster.configmaps[v["configMap"]["name"]]
                self._write_files(path, cm, v["configMap"])
                mounts.append({"kind": "bind", "source": path,
                               "target": target, "readOnly": True})
            elif "secret" in v:
                s = self.secrets[v["secret"]["secretName"]]
                self._write_files(path, s, v["secret"])
                mounts.append({"kind": "bind", "source": path,
                               "target": target, "readOnly": True})
            elif "emptyDir" in v:
                ed = v["emptyDir"] or {}
                if ed.get("medium") == "Memory":
                    size = str(ed.get("sizeLimit", ""))
                    size = re.sub(r"([KMGT])i$", r"\1", size)  # 1Gi -> 1G
                    mounts.append({"kind": "tmpfs", "target": target,
                                   "size": size})
                else:
                    os.makedirs(path)
                    mounts.append({"kind": "bind", "source": path,
                                   "target": target})
            else:
                raise AssertionError("volume %s: not simulated" % vm["name"])
        mounts.sort(key=lambda m: m["target"].rstrip("/").count("/"))
        # The container's own /tmp; last, as the sources above may be in
        # this machine's /tmp. A checkout in /tmp (the test's scripts and
        # runfiles link into it) stays visible there, as the image's files.
        tmp = {"kind": "tmpfs", "target": "/tmp"}
        if REPO_REAL.startswith("/tmp/"):
            tmp["keep"] = [REPO_REAL]
        mounts.append(tmp)
        return mounts

    # -- life ----------------------------------------------------------------

    def start(self):
        os.makedirs(self.dir)
        env = self.environment()
        spec = {"hostname": self.hostname,
                "workingDir": self.container.get("workingDir", "/"),
                "argv": self.argv(env), "env": env, "mounts": self.mounts()}
        spec_path = os.path.join(self.dir, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f, indent=1)
        with self.cluster.lock:
            self.cluster.write_hosts(self)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, "unshare", "--mount", "--uts",
             "--pid", "--fork", "--kill-child", "--mount-proc", PYTHON,
             os.path.join(HERE, "podinit.py"), spec_path],
            stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env={"PATH": TOOLS_PATH},
            start_new_session=True)
        self.started = time.time()
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def pid1(self, timeout=10.0):
        """The pod's PID 1, as this machine numbers it."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            path = "/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)
            try:
                with open(path) as f:
                    children = f.read().split()
            except OSError:
                children = []
            if children:
                return int(children[0])
            if not self.running():
                return None
            time.sleep(0.05)
        return None

    def wait(self, timeout):
        """The pod's exit code: its PID 1's (unshare makes a SIGKILL 1)."""
        rc = self.proc.wait(timeout=timeout)
        return 128 - rc if rc < 0 else rc

    def signal(self, sig):
        pid = self.pid1()
        if pid is not None:
            os.kill(pid, sig)

    def delete(self, grace=10.0):
        """kubectl delete pod: out of the Services at once, SIGTERM, then
        SIGKILL after the grace period."""
        self.terminating = True
        self.cluster.update_dns()
        self.signal(signal.SIGTERM)
        try:
            return self.wait(grace)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            return self.wait(10)

    def output(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")


class Cluster:
    """The pods of one release, with their DNS. Use as a context manager:
    leaving it kills every pod and removes what it made."""

    def __init__(self, docs, namespace, work, image_bin, prober_netns):
        self.docs = docs
        self.namespace = namespace
        self.work = work
        self.image_bin = image_bin
        self.lock = threading.RLock()
        self.pods = []
        self.secrets = {d["metadata"]["name"]: secret_data(d)
                        for d in docs if d["kind"] == "Secret"}
        self.configmaps = {d["metadata"]["name"]: d.get("data") or {}
                           for d in docs if d["kind"] == "ConfigMap"}
        self.services = [d for d in docs if d["kind"] == "Service"]
        for s in self.services:
            assert s["spec"].get("clusterIP") == "None", \
                "only headless Services are simulated"
        self.made_dirs = []
        self._dns_state = None
        self._stop = threading.Event()
        self._prober = subprocess.Popen(
            ["ip", "netns", "exec", prober_netns, PYTHON, "-u", "-c",
             _PROBER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env={"PATH": TOOLS_PATH})
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def add_secret(self, name, data):
        """kubectl create secret generic NAME --from-file=...: data is
        {key: bytes}."""
        self.secrets[name] = data

    def mount_point(self, target):
        """None if `target` exists here; else the topmost missing directory
        on its path, made here (empty, removed at close) so that a pod can
        mount its own directory over it, as a container runtime makes mount
        points in the image."""
        with self.lock:
            if os.path.isdir(target) and target not in self.made_dirs:
                return None
            top = target
            while True:
                parent = os.path.dirname(top)
                if os.path.isdir(parent) and parent not in self.made_dirs:
                    break
                top = parent
            if not os.path.isdir(top):
                os.mkdir(top)
                self.made_dirs.append(top)
        return top

    # -- pods from the rendered workloads -------------------------------------

    def _pod(self, template, name, hostname, subdomain, netns, ip,
             extra_labels=None, extra_env=None, secrets=None):
        labels = dict(template["metadata"].get("labels") or {})
        labels.update(extra_labels or {})
        pod = Pod(self, name, hostname, subdomain, labels, template["spec"],
                  netns, ip, extra_env=extra_env, secrets=secrets)
        with self.lock:
            self.pods.append(pod)
        return pod

    def job_pod(self, job_name, netns, ip, index=None, secrets=None):
        """A pod of the Job: an indexed Job's pod <job>-<index> (host name
        <job>-<index>, JOB_COMPLETION_INDEX), else <job>-<random>."""
        job = find(self.docs, "Job", job_name)
        template = job["spec"]["template"]
        suffix = os.urandom(3).hex()[:5]
        if job["spec"].get("completionMode") == "Indexed":
            assert index is not None
            hostname = "%s-%d" % (job_name, index)
            return self._pod(
                template, "%s-%s" % (hostname, suffix), hostname,
                template["spec"].get("subdomain"), netns, ip,
                extra_labels={"batch.kubernetes.io/job-completion-index":
                              str(index)},
                extra_env={"JOB_COMPLETION_INDEX": str(index)},
                secrets=secrets)
        name = "%s-%s" % (job_name, suffix)
        return self._pod(template, name, name,
                         template["spec"].get("subdomain"), netns, ip,
                         secrets=secrets)

    def statefulset_pod(self, name, ordinal, netns, ip):
        """Pod <name>-<ordinal> of the StatefulSet: that host name, and its
        serviceName as subdomain."""
        sts = find(self.docs, "StatefulSet", name)
        pod_name = "%s-%d" % (name, ordinal)
        return self._pod(sts["spec"]["template"], pod_name, pod_name,
                         sts["spec"]["serviceName"], netns, ip,
                         extra_labels={
                             "statefulset.kubernetes.io/pod-name": pod_name})

    # -- endpoints, DNS, readiness --------------------------------------------

    def _selects(self, service, pod):
        selector = service["spec"].get("selector") or {}
        return bool(selector) and all(pod.labels.get(k) == v
                                      for k, v in selector.items())

    def _names(self, name):
        """`name` (relative to the namespace) and the forms a pod's search
        path completes to it, fully qualified first."""
        ns = self.namespace
        return ["%s.%s.svc.%s" % (name, ns, CLUSTER_DOMAIN),
                "%s.%s.svc" % (name, ns), "%s.%s" % (name, ns), name]

    def dns_records(self):
        """(address, names) lines, as CoreDNS would answer."""
        records = []
        ready = [p for p in self.pods if p.ready]
        for s in self.services:
            sname = s["metadata"]["name"]
            for p in ready:
                if self._selects(s, p) and p.subdomain == sname:
                    records.append((p.ip, self._names(
                        "%s.%s" % (p.hostname, sname))))
        for s in self.services:
            for p in ready:
                if self._selects(s, p):
                    records.append((p.ip, self._names(s["metadata"]["name"])))
        return records

    def write_hosts(self, pod, records=None):
        if records is None:
            records = self.dns_records()
        lines = ["# Kubernetes-managed hosts file (simulated).",
                 "127.0.0.1\tlocalhost",
                 "::1\tlocalhost ip6-localhost ip6-loopback"]
        if pod.subdomain:
            lines.append("%s\t%s.%s.%s.svc.%s\t%s" % (
                pod.ip, pod.hostname, pod.subdomain, self.namespace,
                CLUSTER_DOMAIN, pod.hostname))
        else:
            lines.append("%s\t%s" % (pod.ip, pod.hostname))
        lines.append("# Cluster DNS (simulated CoreDNS): ready pods of "
                     "headless Services.")
        lines += ["%s\t%s" % (ip, " ".join(names)) for ip, names in records]
        text = "\n".join(lines) + "\n"
        # In place: the pod's /etc/hosts is a bind mount of this inode.
        mode = "r+" if os.path.exists(pod.hosts_path) else "w"
        with open(pod.hosts_path, mode) as f:
            f.seek(0)
            f.write(text)
            f.truncate()

    def update_dns(self):
        with self.lock:
            for p in self.pods:
                p.ready = p.running() and not p.terminating and \
                    self._probe(p)
            state = self.dns_records()
            if state == self._dns_state:
                return
            self._dns_state = state
            for p in self.pods:
                if p.proc is not None and p.running():
                    self.write_hosts(p, state)

    def _probe(self, pod):
        probe = pod.container.get("readinessProbe")
        if not probe:
            return True
        port = probe["tcpSocket"]["port"]
        if isinstance(port, str):
            port = next(p["containerPort"] for p in pod.container["ports"]
                        if p.get("name") == port)
        self._prober.stdin.write("%s %d\n" % (pod.ip, port))
        self._prober.stdin.flush()
        return self._prober.stdout.readline().strip() == "1"

    def _loop(self):
        while not self._stop.wait(0.3):
            try:
                self.update_dns()
            except (OSError, ValueError):
                if self._stop.is_set():
                    return
                raise

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)
        for p in self.pods:
            if p.running():
                p.proc.kill()  # unshare --kill-child: PID 1 goes too
            if p.proc is not None:
                p.proc.wait(timeout=10)
                p.log.close()
        self._prober.kill()
        self._prober.wait()
        for d in reversed(self.made_dirs):
            try:
                os.rmdir(d)
            except OSError:
                pass


# The kubelet's tcpSocket probe: "ADDRESS PORT" in, "1" (connected) or "0".
_PROBER = r"""
import socket, sys
for line in sys.stdin:
    addr, port = line.split()
    try:
        socket.create_connection((addr, int(port)), timeout=1).close()
        print(1)
    except OSError:
        print(0)
"""


def image_bin(work, binaries):
    """The image's /usr/local/bin, holding `binaries` (paths)."""
    path = os.path.join(work, "image-bin")
    os.makedirs(path)
    for b in binaries:
        os.symlink(os.path.realpath(b),
                   os.path.join(path, os.path.basename(b)))
    return path


def processes_with(variable):
    """Pids of processes on this machine whose environment has `variable`
    (NAME=VALUE)."""
    needle = variable.encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            pass
    return found


def tempdir(prefix):
    """A directory for a test's files, outside /tmp: every simulated pod
    has a /tmp of its own, but the rest of this machine's filesystem is
    common to them (the tests' logs included)."""
    base = os.environ.get("TEST_TMPDIR") or "/var/tmp"
    path = tempfile.mkdtemp(prefix=prefix, dir=base)
    assert not (path + "/").startswith("/tmp/"), \
        "%s: pods cannot see this machine's /tmp (set TEST_TMPDIR)" % path
    return path


def rmtree(path):
    shutil.rmtree(path, ignore_errors=True)

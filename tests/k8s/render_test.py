"""The hvd chart (deploy/hvd) rendered without Helm or a cluster: the
objects, and where each value lands. Fast, needs no root.

Renders with deploy/render/render.sh (Go's text/template, as Helm; the
chart's values through python3-yaml) and checks the parsed documents.
Where a kubectl is on PATH, `kubectl kustomize` (offline) must also accept
the output. Also checks the pods' scripts (deploy/hvd/files) that need no
cluster, and that deploy/Dockerfile is made of known instructions.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import k8s_sim  # noqa: E402

CHART = os.path.join(ROOT, "deploy", "hvd")
FILES = os.path.join(CHART, "files")
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.fixture
def work():
    path = k8s_sim.tempdir("k8s-render.")
    yield path
    k8s_sim.rmtree(path)


def render(work, *values, name="train", namespace="ml"):
    return k8s_sim.render(ROOT, list(values), name, namespace, work)


def render_error(work, *values):
    with pytest.raises(subprocess.CalledProcessError) as info:
        render(work, *values)
    return info.value.stderr


def kinds(docs):
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs)


def container(workload):
    cs = workload["spec"]["template"]["spec"]["containers"]
    assert len(cs) == 1
    return cs[0]


def env_of(c):
    return {e["name"]: e for e in c.get("env") or []}


def split_args(c):
    """hvdrun's flags, and the command after --."""
    args = c["args"]
    i = args.index("--")
    return args[:i], args[i + 1:]


def flag(args, name, count=1):
    i = args.index(name)
    return args[i + 1:i + 1 + count] if count > 1 else args[i + 1]


def selects(service, template):
    labels = template["metadata"]["labels"]
    selector = service["spec"]["selector"]
    return all(labels.get(k) == v for k, v in selector.items())


def check_common(docs):
    """What holds for any values."""
    for d in docs:
        assert d["apiVersion"] and d["kind"]
        name = d["metadata"]["name"]
        assert DNS_1123.match(name) and len(name) <= 63, name
        labels = d["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "hvd"
        assert labels["app.kubernetes.io/instance"] == "train"
    for d in docs:
        if d["kind"] in ("Job", "StatefulSet"):
            pod = d["spec"]["template"]["spec"]
            assert pod["automountServiceAccountToken"] is False
            assert pod["enableServiceLinks"] is False
    # Every referenced ConfigMap key / mount is there.
    cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    for d in docs:
        if d["kind"] not in ("Job", "StatefulSet"):
            continue
        spec = d["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        for vm in container(d)["volumeMounts"]:
            v = volumes[vm["name"]]
            if "configMap" in v:
                assert v["configMap"]["name"] in cms
        # Scripts the container runs from the ConfigMap exist in it.
        c = container(d)
        for a in c["command"] + c.get("args", []):
            if isinstance(a, str) and a.startswith("/etc/hvd/scripts/"):
                key = a[len("/etc/hvd/scripts/"):]
                assert key in cms["train-scripts"]["data"], key


# -- default values -----------------------------------------------------------

def test_defaults_render_the_orchestrator_mode_objects(work):
    docs = render(work)
    check_common(docs)
    assert kinds(docs) == [
        ("ConfigMap", "train-scripts"), ("Job", "train-launcher"),
        ("Job", "train-worker"), ("Secret", "train-token"),
        ("Service", "train-launcher"), ("Service", "train-workers")]
    svc = k8s_sim.find(docs, "Service", "train-workers")
    launcher_svc = k8s_sim.find(docs, "Service", "train-launcher")
    workers = k8s_sim.find(docs, "Job", "train-worker")
    launcher = k8s_sim.find(docs, "Job", "train-launcher")
    secret = k8s_sim.find(docs, "Secret", "train-token")

    # Headless Services, selecting their pods.
    assert svc["spec"]["clusterIP"] == "None"
    assert launcher_svc["spec"]["clusterIP"] == "None"
    assert selects(svc, workers["spec"]["template"])
    assert not selects(svc, launcher["spec"]["template"])
    assert selects(launcher_svc, launcher["spec"]["template"])
    assert not selects(launcher_svc, workers["spec"]["template"])

    # Workers: an indexed Job, one pod per replica, named through the
    # headless Service, never restarted.
    ws = workers["spec"]
    assert ws["completionMode"] == "Indexed"
    assert ws["completions"] == ws["parallelism"] == 2
    assert ws["backoffLimit"] == 0
    pod = ws["template"]["spec"]
    assert pod["subdomain"] == "train-workers"
    assert pod["restartPolicy"] == "Never"
    c = container(workers)
    assert c["image"] == "hvd:0.1.0"
    assert c["command"] == ["/etc/hvd/scripts/resolve-rendezvous.sh"]
    assert c["args"] == ["hvd-agent", "--rendezvous", "train-launcher:29500",
                         "--slots", "1", "--connect-timeout", "600"]
    env = env_of(c)
    assert env["HVD_JOB_TOKEN"]["valueFrom"]["secretKeyRef"] == \
        {"name": "train-token", "key": "token"}
    assert "HVD_RENDEZVOUS_CA" not in env
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts == {"scripts": "/etc/hvd/scripts", "shm": "/dev/shm"}
    shm = [v for v in pod["volumes"] if v["name"] == "shm"][0]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
    assert [v for v in pod["volumes"] if v["name"] == "scripts"][0][
        "configMap"]["defaultMode"] == 0o555

    # Launcher: hvdrun --rendezvous-only for replicas * slots, the port the
    # Service and the agents use, the token from the Secret, never printed.
    ls = launcher["spec"]
    assert ls["backoffLimit"] == 0
    assert ls["template"]["spec"]["restartPolicy"] == "Never"
    c = container(launcher)
    assert c["command"] == ["hvdrun"]
    flags, command = split_args(c)
    assert flags[0] == "--rendezvous-only"
    assert flag(flags, "-np") == "2"
    assert flag(flags, "--port") == "29500"
    assert flag(flags, "--rendezvous-file") == "/tmp/hvd-rendezvous"
    assert "--start-timeout" not in flags and "--tls-cert" not in flags
    assert command == ["python3", "examples/function_approximation.py"]
    assert c["workingDir"] == "/opt/hvd"
    assert env_of(c)["HVD_JOB_TOKEN"]["valueFrom"]["secretKeyRef"] == \
        {"name": "train-token", "key": "token"}
    port = c["ports"][0]
    assert (port["name"], port["containerPort"]) == ("rendezvous", 29500)
    assert launcher_svc["spec"]["ports"] == [
        {"name": "rendezvous", "port": 29500, "targetPort": "rendezvous"}]
    assert c["readinessProbe"]["tcpSocket"]["port"] == "rendezvous"

    # The token: 64 random characters, another at every install.
    token = secret["stringData"]["token"]
    assert re.match(r"^[A-Za-z0-9]{64}$", token)
    again = k8s_sim.find(render(work), "Secret", "train-token")
    assert again["stringData"]["token"] != token

    # The scripts are the chart's files, and valid bash.
    data = k8s_sim.find(docs, "ConfigMap", "train-scripts")["data"]
    assert sorted(data) == ["discover-hosts.sh", "resolve-rendezvous.sh"]
    for key, text in data.items():
        with open(os.path.join(FILES, key)) as f:
            assert text == f.read(), key
        subprocess.run(["bash", "-n", "-c", text], check=True)


def test_every_value_lands_where_it_should(work):
    values = {
        "image": {"repository": "registry.example/ml/hvd", "tag": "2024.1",
                  "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "regcred"}],
        "command": ["python3", "train.py", "--epochs", "90"],
        "workingDir": "/work",
        "env": [{"name": "HVD_LOG_LEVEL", "value": "info"},
                {"name": "NCCL_DEBUG", "value": "WARN"}],
        "fullnameOverride": "resnet",
        "worker": {"replicas": 3, "slots": 4, "shmSize": "8Gi",
                   "connectTimeout": 900,
                   "resources": {"limits": {"nvidia.com/gpu": 4,
                                            "memory": "64Gi"},
                                 "requests": {"cpu": "16"}},
                   "nodeSelector": {"pool": "gpu"},
                   "tolerations": [{"key": "nvidia.com/gpu",
                                    "operator": "Exists",
                                    "effect": "NoSchedule"}],
                   "podAnnotations": {"team": "ml"}},
        "launcher": {"port": 31000, "startTimeout": 1800,
                     "extraArgs": ["--verbose", "--fusion-threshold-mb",
                                   "32"],
                     "resources": {"requests": {"cpu": "1"}},
                     "nodeSelector": {"pool": "cpu"}},
        "ttlSecondsAfterFinished": 3600,
        "activeDeadlineSeconds": 86400,
        "jobToken": {"existingSecret": "resnet-token",
                     "existingSecretKey": "hvd"},
        "tls": {"secretName": "resnet-tls"},
    }
    docs = render(work, values)
    check_common_names = [d["metadata"]["name"] for d in docs]
    assert sorted(check_common_names) == [
        "resnet-launcher", "resnet-launcher", "resnet-scripts",
        "resnet-worker", "resnet-workers"]  # no Secret: the given one
    workers = k8s_sim.find(docs, "Job", "resnet-worker")
    launcher = k8s_sim.find(docs, "Job", "resnet-launcher")
    for job in (workers, launcher):
        assert job["spec"]["ttlSecondsAfterFinished"] == 3600
        assert job["spec"]["activeDeadlineSeconds"] == 86400
        pod = job["spec"]["template"]["spec"]
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        c = container(job)
        assert c["image"] == "registry.example/ml/hvd:2024.1"
        assert c["imagePullPolicy"] == "Always"
        assert c["workingDir"] == "/work"
        env = env_of(c)
        assert env["HVD_LOG_LEVEL"]["value"] == "info"
        assert env["NCCL_DEBUG"]["value"] == "WARN"
        assert env["HVD_JOB_TOKEN"]["valueFrom"]["secretKeyRef"] == \
            {"name": "resnet-token", "key": "hvd"}

    ws = workers["spec"]
    assert ws["completions"] == ws["parallelism"] == 3
    pod = ws["template"]["spec"]
    assert pod["subdomain"] == "resnet-workers"
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert ws["template"]["metadata"]["annotations"] == {"team": "ml"}
    c = container(workers)
    assert c["resources"] == {"limits": {"nvidia.com/gpu": 4,
                                         "memory": "64Gi"},
                              "requests": {"cpu": "16"}}
    assert c["args"] == ["hvd-agent", "--rendezvous", "resnet-launcher:31000",
                         "--slots", "4", "--connect-timeout", "900"]
    env = env_of(c)
    assert env["HVD_K8S_RESOLVE_TIMEOUT"]["value"] == "900"
    # TLS: the workers get the CA and the name in the certificate.
    assert env["HVD_RENDEZVOUS_CA"]["value"] == "/etc/hvd/tls/ca.crt"
    assert env["HVD_RENDEZVOUS_TLS_NAME"]["value"] == "resnet-launcher"
    tls = [v for v in pod["volumes"] if v["name"] == "tls"][0]["secret"]
    assert tls["secretName"] == "resnet-tls"
    assert tls["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    shm = [v for v in pod["volumes"] if v["name"] == "shm"][0]
    assert shm["emptyDir"]["sizeLimit"] == "8Gi"

    c = container(launcher)
    flags, command = split_args(c)
    assert flag(flags, "-np") == "12"
    assert flag(flags, "--port") == "31000"
    assert flag(flags, "--start-timeout") == "1800"
    assert flags[-3:] == ["--verbose", "--fusion-threshold-mb", "32"]
    assert flag(flags, "--tls-cert") == "/etc/hvd/tls/tls.crt"
    assert flag(flags, "--tls-key") == "/etc/hvd/tls/tls.key"
    assert command == ["python3", "train.py", "--epochs", "90"]
    assert c["resources"] == {"requests": {"cpu": "1"}}
    assert c["ports"][0]["containerPort"] == 31000
    pod = launcher["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "cpu"}
    tls = [v for v in pod["volumes"] if v["name"] == "tls"][0]["secret"]
    assert [i["key"] for i in tls["items"]] == ["tls.crt", "tls.key"]
    svc = k8s_sim.find(docs, "Service", "resnet-launcher")
    assert svc["spec"]["ports"][0]["port"] == 31000


def test_a_given_server_name_and_a_long_release_name(work):
    docs = render(work, {"tls": {"secretName": "t", "serverName": "rdv.ml"}},
                  name="a-very-long-release-name-for-a-training-job-x")
    # 40 characters of the release name, less a trailing "-".
    prefix = "a-very-long-release-name-for-a-training"
    c = container(k8s_sim.find(docs, "Job", prefix + "-worker"))
    assert env_of(c)["HVD_RENDEZVOUS_TLS_NAME"]["value"] == "rdv.ml"
    assert c["args"][2] == prefix + "-launcher:29500"
    for d in docs:
        assert d["metadata"]["name"].startswith(prefix + "-")
    # Worker pod host names <prefix>-worker-<index> stay within 63.
    assert len(prefix + "-worker-9999") <= 63


def test_the_docs_example_values(work):
    """deploy/examples: what docs/orchestrators/kubernetes.md shows."""
    examples = os.path.join(ROOT, "deploy", "examples")
    with open(os.path.join(examples, "train.yaml")) as f:
        train = yaml.safe_load(f)
    with open(os.path.join(examples, "elastic.yaml")) as f:
        elastic = yaml.safe_load(f)
    docs = render(work, train)
    check_common(docs)
    launcher = container(k8s_sim.find(docs, "Job", "train-launcher"))
    flags, command = split_args(launcher)
    assert flag(flags, "-np") == "32"
    assert flag(flags, "--tls-cert") == "/etc/hvd/tls/tls.crt"
    assert command[1] == "examples/synthetic_benchmark.py"
    assert os.path.exists(os.path.join(ROOT, command[1]))
    worker = container(k8s_sim.find(docs, "Job", "train-worker"))
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert worker["image"] == "registry.example.com/ml/hvd:0.1.0"
    docs = render(work, train, elastic)
    check_common(docs)
    sts = k8s_sim.find(docs, "StatefulSet", "train-worker")
    assert sts["spec"]["replicas"] == 4
    flags, _ = split_args(container(k8s_sim.find(docs, "Job",
                                                 "train-launcher")))
    assert (flag(flags, "-np"), flag(flags, "--min-np"),
            flag(flags, "--max-np")) == ("32", "16", "64")
    assert "--tls-cert" not in flags


# -- elastic ------------------------------------------------------------------

def test_elastic_renders_a_statefulset_over_ssh_and_the_discovery(work):
    values = {"worker": {"replicas": 3, "slots": 2},
              "elastic": {"enabled": True, "minNp": 2, "maxNp": 8,
                          "timeout": 300, "resetLimit": 5,
                          "cooldownRange": [10, 120],
                          "sshSecret": "train-ssh", "sshPort": 2222}}
    docs = render(work, values)
    check_common(docs)
    # No token Secret (hvdrun makes its own over ssh), no launcher Service.
    assert kinds(docs) == [
        ("ConfigMap", "train-scripts"), ("Job", "train-launcher"),
        ("Service", "train-workers"), ("StatefulSet", "train-worker")]
    sts = k8s_sim.find(docs, "StatefulSet", "train-worker")
    svc = k8s_sim.find(docs, "Service", "train-workers")
    launcher = k8s_sim.find(docs, "Job", "train-launcher")
    assert svc["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == "train-workers"
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    template = sts["spec"]["template"]
    match = sts["spec"]["selector"]["matchLabels"]
    assert all(template["metadata"]["labels"][k] == v
               for k, v in match.items())
    assert selects(svc, template)
    assert svc["spec"]["ports"] == [{"name": "ssh", "port": 2222,
                                     "targetPort": "ssh"}]
    c = container(sts)
    assert c["command"] == ["/etc/hvd/scripts/start-sshd.sh"]
    assert env_of(c)["HVD_K8S_SSH_PORT"]["value"] == "2222"
    assert c["ports"] == [{"name": "ssh", "containerPort": 2222}]
    assert c["readinessProbe"]["tcpSocket"]["port"] == "ssh"
    ssh = [v for v in template["spec"]["volumes"] if v["name"] == "ssh"][0]
    assert ssh["secret"]["secretName"] == "train-ssh"
    assert ssh["secret"]["defaultMode"] == 0o400
    assert [i["key"] for i in ssh["secret"]["items"]] == [
        "host_ed25519_key", "authorized_keys"]

    c = container(launcher)
    flags, command = split_args(c)
    assert "--rendezvous-only" not in flags
    assert flag(flags, "-np") == "6"
    assert flag(flags, "--min-np") == "2"
    assert flag(flags, "--max-np") == "8"
    assert flag(flags, "--elastic-timeout") == "300"
    assert flag(flags, "--reset-limit") == "5"
    assert flag(flags, "--blacklist-cooldown-range", 2) == ["10", "120"]
    assert flag(flags, "--slots-per-host") == "2"
    assert flag(flags, "--host-discovery-script") == \
        "/etc/hvd/scripts/discover-hosts.sh"
    assert flag(flags, "--ssh-port") == "2222"
    assert flag(flags, "--ssh-identity-file") == "/etc/hvd/ssh/id_ed25519"
    assert flag(flags, "--ssh-config-file") == "/etc/hvd/scripts/ssh_config"
    env = env_of(c)
    assert env["HVD_K8S_WORKER_SERVICE"]["value"] == "train-workers"
    assert env["HVD_K8S_SLOTS"]["value"] == "2"
    assert "HVD_JOB_TOKEN" not in env
    ssh = [v for v in launcher["spec"]["template"]["spec"]["volumes"]
           if v["name"] == "ssh"][0]
    assert [i["key"] for i in ssh["secret"]["items"]] == [
        "id_ed25519", "known_hosts"]
    data = k8s_sim.find(docs, "ConfigMap", "train-scripts")["data"]
    assert sorted(data) == ["discover-hosts.sh", "resolve-rendezvous.sh",
                            "ssh_config", "sshd_config", "start-sshd.sh"]


def test_elastic_defaults(work):
    docs = render(work, {"elastic": {"enabled": True, "sshSecret": "s"}})
    flags, _ = split_args(container(k8s_sim.find(docs, "Job",
                                                 "train-launcher")))
    assert flag(flags, "-np") == "2"
    for absent in ("--min-np", "--max-np", "--elastic-timeout",
                   "--reset-limit", "--start-timeout"):
        assert absent not in flags
    # A StatefulSet's pod comes back under its name: not out for good.
    assert flag(flags, "--blacklist-cooldown-range", 2) == ["10", "120"]
    assert flag(flags, "--ssh-port") == "22"
    no_cooldown = render(work, {"elastic": {"enabled": True, "sshSecret": "s",
                                            "cooldownRange": []}})
    flags, _ = split_args(container(k8s_sim.find(no_cooldown, "Job",
                                                 "train-launcher")))
    assert "--blacklist-cooldown-range" not in flags


def test_hvdrun_accepts_the_elastic_flags_the_chart_renders(work):
    """hvdrun's own parser on the rendered elastic command line (with the
    discovery script and key where the pod would have them)."""
    values = {"elastic": {"enabled": True, "minNp": 1, "maxNp": 4,
                          "timeout": 30, "resetLimit": 3,
                          "cooldownRange": [5, 60], "sshSecret": "s"}}
    c = container(k8s_sim.find(render(work, values), "Job", "train-launcher"))
    script = os.path.join(work, "discover-hosts.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexit 3\n")  # fails at once: nothing starts
    os.chmod(script, 0o755)
    args = [script if a == "/etc/hvd/scripts/discover-hosts.sh" else a
            for a in c["args"]]
    hvdrun = os.path.realpath(os.path.join(ROOT, "launcher", "hvdrun"))
    if not os.path.exists(hvdrun):
        hvdrun = os.path.join(ROOT, "bazel-bin", "launcher", "hvdrun")
    r = subprocess.run([hvdrun] + args, capture_output=True, text=True,
                       timeout=60)
    # Exit 1: the first discovery failed (exit 2 would be a flag refused).
    assert r.returncode == 1, r.stderr
    assert "discover" in r.stderr, r.stderr


def test_bad_values_fail_with_a_message(work):
    assert "elastic.enabled needs elastic.sshSecret" in render_error(
        work, {"elastic": {"enabled": True}})
    assert "worker.replicas must be at least 1" in render_error(
        work, {"worker": {"replicas": 0}})
    assert "worker.slots must be at least 1" in render_error(
        work, {"worker": {"slots": 0}})
    assert "command: what every worker runs" in render_error(
        work, {"command": None})


def test_every_value_the_templates_read_is_in_values_yaml():
    with open(os.path.join(CHART, "values.yaml")) as f:
        defaults = yaml.safe_load(f)
    templates = os.path.join(CHART, "templates")
    for name in os.listdir(templates):
        with open(os.path.join(templates, name)) as f:
            text = f.read()
        refs = re.findall(r"\.Values\.([A-Za-z0-9_.]+)", text)
        refs += ["elastic." + r for r in re.findall(r"\$e\.([A-Za-z0-9_]+)",
                                                    text)]
        for ref in refs:
            node = defaults
            for part in ref.split("."):
                assert isinstance(node, dict) and part in node, \
                    "%s: .Values.%s is not in values.yaml" % (name, ref)
                node = node[part]


def test_kubectl_kustomize_accepts_the_output(work):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl on PATH")
    for values in ({}, {"elastic": {"enabled": True, "sshSecret": "s"}}):
        docs = render(work, values)
        d = os.path.join(work, "kustomize")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with open(os.path.join(d, "all.yaml"), "w") as f:
            yaml.safe_dump_all(docs, f)
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            f.write("resources:\n- all.yaml\nnamespace: ml\n")
        r = subprocess.run([kubectl, "kustomize", d], capture_output=True,
                           text=True, timeout=120,
                           env=dict(os.environ, KUBECONFIG="/dev/null",
                                    HOME=work))
        assert r.returncode == 0, r.stderr
        out = list(yaml.safe_load_all(r.stdout))
        assert kinds(out) == kinds(docs)
        assert all(o["metadata"]["namespace"] == "ml" for o in out)


# -- the pods' scripts, where no cluster is needed ----------------------------

def run_script(name, *args, env=None):
    return subprocess.run(["bash", os.path.join(FILES, name)] + list(args),
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))


def test_resolve_rendezvous_resolves_only_the_rendezvous():
    r = run_script("resolve-rendezvous.sh", "echo", "--slots", "2",
                   "--rendezvous", "localhost:29500,10.1.2.3:7",
                   "--", "cmd", "--rendezvous", "localhost:1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [
        "--slots", "2", "--rendezvous", "127.0.0.1:29500,10.1.2.3:7",
        "--", "cmd", "--rendezvous", "localhost:1"]
    r = run_script("resolve-rendezvous.sh", "echo",
                   "--rendezvous=localhost:5")
    assert r.stdout.split() == ["--rendezvous=127.0.0.1:5"]


def test_resolve_rendezvous_gives_up_naming_the_launcher():
    r = run_script("resolve-rendezvous.sh", "echo", "--rendezvous",
                   "no-such-launcher.invalid:29500",
                   env={"HVD_K8S_RESOLVE_TIMEOUT": "2"})
    assert r.returncode == 1
    assert r.stderr.startswith(
        "resolve-rendezvous.sh: the launcher's name no-such-launcher.invalid "
        "does not resolve after 2 s"), r.stderr
    assert r.stdout == ""


def test_discovery_prints_nothing_while_no_worker_pod_is_ready():
    r = run_script("discover-hosts.sh",
                   env={"HVD_K8S_WORKER_SERVICE": "no-such-service.invalid"})
    assert (r.returncode, r.stdout) == (0, ""), r.stderr
    r = run_script("discover-hosts.sh",
                   env={"HVD_K8S_WORKER_SERVICE": "localhost",
                        "HVD_K8S_SLOTS": "4"})
    assert (r.returncode, r.stdout) == (0, "localhost:4\n"), r.stderr


# -- the image ----------------------------------------------------------------

DOCKERFILE_INSTRUCTIONS = {
    "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY",
    "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD",
    "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def test_dockerfile_is_known_instructions_from_debian_12_with_setup():
    with open(os.path.join(ROOT, "deploy", "Dockerfile")) as f:
        text = f.read()
    joined = re.sub(r"\\\n", " ", text)  # continuation lines
    instructions = [line.split(None, 1) for line in joined.splitlines()
                    if line.strip() and not line.lstrip().startswith("#")]
    for ins in instructions:
        assert ins[0].upper() in DOCKERFILE_INSTRUCTIONS, ins
    names = [i[0].upper() for i in instructions]
    assert [i for i in instructions if i[0].upper() == "FROM"] == \
        [["FROM", "debian:12"]]
    assert names.index("FROM") < names.index("COPY") < names.index("RUN")
    runs = " ".join(i[1] for i in instructions if i[0].upper() == "RUN")
    assert "bash tools/setup.sh" in runs
    assert [i[1] for i in instructions if i[0].upper() == "COPY"] == \
        [". /opt/hvd"]
    assert ["WORKDIR", "/opt/hvd"] in instructions


if __name__ == "__main__":
    args = [__file__, "-v", "-p", "no:cacheprovider"] + sys.argv[1:]
    if os.environ.get("XML_OUTPUT_FILE"):  # under bazel test
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))

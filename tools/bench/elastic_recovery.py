#!/usr/bin/python3
"""Elastic recovery and scale-up benchmark: resnet18 trained data-parallel
(tools/bench/elastic_resnet.py) by an elastic hvdrun job over two ssh hosts
made by tests/multihost/netns_hosts.sh (network namespaces with their own
sshd; needs root). hvdrun runs in the harness's client host h0.

Each run is one job, with a discovery script printing a file's lines:
  1. it starts on h1 alone (-np 1 --min-np 1) and trains 10 steps;
  2. scale-up: h2 is added to the file (written, then renamed over it);
     measured from then to the first completed step of h2's new worker.
     That worker also logs how long its `import torch` + `import hvd.torch`
     took (time.time() at the top of the script, before and after);
  3. after 10 steps at size 2, recovery: h2's worker is SIGKILLed; measured
     from the kill to the survivor's next completed step (at size 1);
  4. the job is told to stop a few steps later and must exit 0.
Every "host" is on this machine, so one clock serves all. A completed step
is one whose commit() returned. The median step time is printed too: both
figures hold one step (recovery redoes the step the kill interrupted), and
scale-up up to 1 s of hvdrun's discovery poll (it runs the script every
second).

  /usr/bin/python3 tools/bench/elastic_recovery.py [--runs 5] [--no-build]
      [--json FILE]

Prints each run and the medians. Exit code 0 when every run succeeded.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import launch_time  # noqa: E402  (bazel_bin, read_env, REPO, HARNESS)

REPO = launch_time.REPO
TARGETS = ["//launcher:hvdrun", "//agent:hvd-agent", "//python:hvd"]
SCRIPT = os.path.join(HERE, "elastic_resnet.py")
STEADY_STEPS = 10  # steps trained before each event
WAIT_S = 180  # the longest any phase may take


class RunFailed(Exception):
    pass


class Job:
    """One elastic hvdrun job of elastic_resnet.py and its step log."""

    def __init__(self, env, paths, tmp):
        self.tmp = tmp
        self.log_path = os.path.join(tmp, "steps.log")
        self.stop_path = os.path.join(tmp, "stop")
        self.hosts_path = os.path.join(tmp, "hosts")
        self.records = []
        self._offset = 0
        self._partial = b""
        discover = os.path.join(tmp, "discover.sh")
        with open(discover, "w") as f:
            f.write("#!/bin/sh\ncat %s\n" % self.hosts_path)
        os.chmod(discover, 0o755)
        self.set_hosts(["h1:1"])
        job_env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("HVD_", "HOROVOD_"))}
        job_env.update(BENCH_LOG=self.log_path, BENCH_STOP=self.stop_path,
                       HVD_LIBRARY=paths["lib"],
                       PYTHONPATH=os.path.join(REPO, "python"),
                       HVD_START_TIMEOUT="60")
        cmd = ["ip", "netns", "exec", env["HVD_MH_CLIENT_NETNS"],
               paths["hvdrun"], "--agent-path", paths["agent"],
               "--ssh-config-file", env["HVD_MH_SSH_CONFIG"],
               "-i", env["HVD_MH_SSH_KEY"],
               "-np", "1", "--min-np", "1",
               "--host-discovery-script", discover]
        for var in ("HVD_LIBRARY", "PYTHONPATH", "BENCH_LOG", "BENCH_STOP"):
            cmd += ["-x", var]
        cmd += ["/usr/bin/python3", SCRIPT]
        self.out = open(os.path.join(tmp, "hvdrun.out"), "w")
        self.proc = subprocess.Popen(cmd, env=job_env, cwd=tmp,
                                     stdout=self.out,
                                     stderr=subprocess.STDOUT)

    def set_hosts(self, hosts):
        """Rewrites the discovery file at once; returns when it was seen."""
        with open(self.hosts_path + ".new", "w") as f:
            f.write("".join(h + "\n" for h in hosts))
        os.replace(self.hosts_path + ".new", self.hosts_path)
        return time.time()

    def read(self):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        self.records += [json.loads(line) for line in lines if line]

    def steps(self, worker=None, size=None, after=0.0):
        return [r for r in self.records if r["event"] == "step" and
                (worker is None or r["worker"] == worker) and
                (size is None or r["size"] == size) and r["t"] > after]

    def first(self, event, worker, after=0.0):
        return next(r for r in self.records if r["event"] == event and
                    r["worker"] == worker and
                    r.get("t", r.get("t0")) > after)

    def wait(self, what, found):
        """Polls the log until found() returns something, and returns it."""
        deadline = time.time() + WAIT_S
        while time.time() < deadline:
            self.read()
            result = found()
            if result:
                return result
            if self.proc.poll() is not None:
                raise RunFailed("hvdrun exited %d waiting for %s" %
                                (self.proc.returncode, what))
            time.sleep(0.01)
        raise RunFailed("no %s after %d s" % (what, WAIT_S))

    def stop(self):
        """Stops the job a few steps on; raises unless it exits 0."""
        self.read()
        last = max(r["step"] for r in self.steps())
        with open(self.stop_path + ".new", "w") as f:
            f.write(str(last + 3))
        os.replace(self.stop_path + ".new", self.stop_path)
        try:
            code = self.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            raise RunFailed("the job did not stop at step %d" % (last + 3))
        if code != 0:
            raise RunFailed("hvdrun exited %d" % code)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()

    def output(self):
        with open(os.path.join(self.tmp, "hvdrun.out")) as f:
            return f.read()


def ns_processes(env, host, needle):
    """Pids of processes in host's namespace whose command line holds
    needle."""
    pids = subprocess.run(["ip", "netns", "pids", env["HVD_MH_NETNS_" + host]],
                          capture_output=True, text=True).stdout.split()
    found = []
    for pid in pids:
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if needle.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def leftovers(env, within=10.0):
    """Job processes still in h1/h2 after `within` seconds (killed, and
    returned, so the run can report them)."""
    deadline = time.time() + within
    while True:
        left = [(h, pid) for h in ("h1", "h2")
                for needle in ("hvd-agent", os.path.basename(SCRIPT))
                for pid in ns_processes(env, h, needle)]
        if not left or time.time() > deadline:
            break
        time.sleep(0.1)
    for _, pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def median_step(steps):
    return statistics.median(r["step_s"] for r in steps)


def one_run(env, paths):
    with tempfile.TemporaryDirectory(prefix="elastic_recovery.") as tmp:
        job = Job(env, paths, tmp)
        try:
            result = measure(env, job)
            job.stop()
        except RunFailed as e:
            job.close()
            leftovers(env, within=0)
            sys.stderr.write("run failed: %s\n--- hvdrun output:\n%s\n" %
                             (e, job.output()))
            return None
        finally:
            job.close()
        left = leftovers(env)
        if left:
            sys.stderr.write("run failed: processes left after the job "
                             "(killed): %s\n" % left)
            return None
        return result


def measure(env, job):
    # 1. h1 alone.
    first = job.wait("a step at size 1", lambda: job.steps(size=1))[0]
    w0 = first["worker"]
    alone = job.wait("%d steps at size 1" % STEADY_STEPS,
                     lambda: len(job.steps(w0, 1)) >= STEADY_STEPS and
                     job.steps(w0, 1))

    # 2. Scale-up.
    added = job.set_hosts(["h1:1", "h2:1"])
    new_step = job.wait("a step of a new worker", lambda: [
        r for r in job.steps(after=added) if r["worker"] != w0])[0]
    w1 = new_step["worker"]
    start = job.first("start", w1)
    entered = job.first("enter", w1)
    pair = job.wait("%d steps at size 2" % STEADY_STEPS,
                    lambda: len(job.steps(w1, 2)) >= STEADY_STEPS and
                    job.steps(w1, 2))

    # 3. Recovery.
    pids = ns_processes(env, "h2", os.path.basename(SCRIPT))
    if pids != [start["pid"]]:
        raise RunFailed("worker %s (pid %d) is not h2's only worker %s" %
                        (w1, start["pid"], pids))
    killed = time.time()
    os.kill(start["pid"], signal.SIGKILL)
    survivor = job.wait("a step at size 1 after the kill",
                        lambda: job.steps(w0, 1, after=killed))[0]
    resumed = job.first("enter", w0, after=killed)

    return {
        "recovery_s": survivor["t"] - killed,
        "recovery_resumed_s": resumed["t"] - killed,
        "scaleup_s": new_step["t"] - added,
        "import_s": start["imported"] - start["t0"],
        # The new worker's path, from the host's appearance on.
        "new_worker": {
            "process_started_s": start["proc_start"] - added,
            "script_started_s": start["t0"] - added,
            "import_torch_hvd_s": start["imported"] - start["t0"],
            "import_torchvision_s": start["torchvision"] - start["imported"],
            "init_s": start["initialized"] - start["torchvision"],
            "build_s": start["built"] - start["initialized"],
            "sync_s": entered["t"] - start["built"],
            "first_step_s": new_step["t"] - entered["t"],
        },
        "step_s_size1": median_step(alone),
        "step_s_size2": median_step(pair),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-build", action="store_true",
                    help="use what bazel-bin holds")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("elastic_recovery.py: needs root (network namespaces)")

    if not args.no_build:
        subprocess.run(["bazel", "build"] + TARGETS, cwd=REPO, check=True)
    bin_dir = launch_time.bazel_bin()
    paths = {
        "hvdrun": os.path.join(bin_dir, "launcher", "hvdrun"),
        "agent": os.path.join(bin_dir, "agent", "hvd-agent"),
        "lib": os.path.join(bin_dir, "core", "libhvd.so"),
    }
    for path in paths.values():
        if not os.path.isfile(path):
            sys.exit("elastic_recovery.py: missing %s (build it first)" %
                     path)

    run_dir = subprocess.run([launch_time.HARNESS, "up", "--hosts", "2"],
                             check=True, capture_output=True,
                             text=True).stdout.strip()
    # Torn down whatever happens, Ctrl-C included.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = []
    try:
        env = launch_time.read_env(run_dir)
        for i in range(args.runs):
            r = one_run(env, paths)
            if r is None:
                sys.exit(1)
            results.append(r)
            print("run %d: recovery %.3f s; scale-up %.3f s, of which "
                  "import torch + hvd.torch %.3f s; step %.3f s at size 1, "
                  "%.3f s at size 2" %
                  (i + 1, r["recovery_s"], r["scaleup_s"], r["import_s"],
                   r["step_s_size1"], r["step_s_size2"]), flush=True)
    finally:
        subprocess.run([launch_time.HARNESS, "down", run_dir], check=False)

    def med(key, of=lambda r, key: r[key]):
        return statistics.median(of(r, key) for r in results)

    medians = {
        "recovery_s": med("recovery_s"),
        "recovery_resumed_s": med("recovery_resumed_s"),
        "scaleup_s": med("scaleup_s"),
        "import_s": med("import_s"),
        "scaleup_beyond_import_s": statistics.median(
            r["scaleup_s"] - r["import_s"] for r in results),
        "step_s_size1": med("step_s_size1"),
        "step_s_size2": med("step_s_size2"),
    }
    breakdown = {key: med(key, lambda r, key: r["new_worker"][key])
                 for key in results[0]["new_worker"]}
    rows = [
        ("recovery: SIGKILL -> survivor's next step", medians["recovery_s"]),
        ("  SIGKILL -> survivor back in training (new round)",
         medians["recovery_resumed_s"]),
        ("scale-up: h2 listed -> its worker's first step",
         medians["scaleup_s"]),
        ("  import torch + hvd.torch in the new worker", medians["import_s"]),
        ("  scale-up beyond the import", medians["scaleup_beyond_import_s"]),
        ("  in steps: listed -> worker process started",
         breakdown["process_started_s"]),
        ("            listed -> script's first line",
         breakdown["script_started_s"]),
        ("            import torch + hvd.torch",
         breakdown["import_torch_hvd_s"]),
        ("            import torchvision", breakdown["import_torchvision_s"]),
        ("            hvd.init() (joins the next round)", breakdown["init_s"]),
        ("            model and optimizer made", breakdown["build_s"]),
        ("            sync (rank 0's state broadcast)", breakdown["sync_s"]),
        ("            first step (with commit)", breakdown["first_step_s"]),
        ("step time at size 1", medians["step_s_size1"]),
        ("step time at size 2", medians["step_s_size2"]),
    ]
    print("median of %d runs (resnet18, batch 8 of 3x64x64, 1 slot on each "
          "of h1, h2):" % len(results))
    for name, value in rows:
        print("  %-50s %7.3f s" % (name, value))
    print("  (both include one step; scale-up includes up to 1 s of "
          "hvdrun's discovery poll, run every second)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": results, "medians": medians,
                       "new_worker_medians": breakdown}, f, indent=2)


if __name__ == "__main__":
    main()

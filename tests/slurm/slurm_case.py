"""What the tests on the Slurm test cluster (slurm_cluster.sh run) share.

They run on the client host h0 of a 2-node cluster (h1, h2; 4 CPUs each),
where sbatch, salloc, srun and squeue reach slurmctld. SlurmCase gives each
case a directory and checks, after it, that the cluster is empty: no job or
step in squeue, no hvd-agent, worker or hvdrun process anywhere.
"""
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""),
                        os.environ.get("TEST_WORKSPACE", "__main__"))


def runfile(path):
    p = os.path.join(RUNFILES, path) if os.environ.get("TEST_SRCDIR") else path
    return os.path.realpath(p)


HVDRUN = runfile("launcher/hvdrun")
AGENT = runfile("agent/hvd-agent")
DRIVER = runfile("tests/multihost/driver")
PYTHON_DIR = runfile("python")
LIBHVD = runfile("core/libhvd.so")
EXAMPLE = runfile("examples/function_approximation.py")
# A job's processes are found by these paths in their command lines.
JOB_BINARIES = (HVDRUN, AGENT, DRIVER, EXAMPLE)

ALLOC = ["-N2", "--ntasks-per-node=2"]


def sh(*args, timeout=120, **kw):
    return subprocess.run(list(args), capture_output=True, text=True,
                          timeout=timeout, **kw)


def job_processes():
    """pid -> command line of every live process running a job binary."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open("/proc/%s/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(b in cmd for b in JOB_BINARIES):
            found[int(pid)] = cmd
    return found


def squeue():
    """Jobs and steps Slurm still has (pending, running or completing)."""
    jobs = sh("squeue", "-h", "-o", "%i %T").stdout.split("\n")
    steps = sh("squeue", "-h", "-s", "-o", "%i").stdout.split("\n")
    return [l for l in jobs + steps if l.strip()]


class SlurmCase(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="slurm-case-",
                                    dir=os.environ.get("TEST_TMPDIR"))
        self.env = dict(os.environ)
        self.env.update(PYTHONPATH=PYTHON_DIR, HVD_LIBRARY=LIBHVD,
                        PYTHONDONTWRITEBYTECODE="1")

    def tearDown(self):
        self.assertNothingLeft()

    def assertNothingLeft(self, within=20.0):
        deadline = time.time() + within
        while time.time() < deadline:
            left, procs = squeue(), job_processes()
            if not left and not procs:
                return
            time.sleep(0.2)
        # Clear the cluster for the next case, then fail this one.
        sh("scancel", "--full", *[l.split()[0] for l in left if " " in l])
        for pid in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.fail("left behind after %.0f s: squeue %r, processes %r" %
                  (within, left, procs))

    def path(self, name):
        return os.path.join(self.dir, name)

    def batch_script(self, *command):
        script = self.path("job.sh")
        with open(script, "w") as f:
            f.write("#!/bin/bash\nexec %s\n" % " ".join(command))
        os.chmod(script, 0o755)
        return script

    def sbatch(self, script, wait=True):
        args = ["sbatch", "--parsable", *ALLOC, "-o", self.path("out"),
                "-e", self.path("err"), "-D", self.dir]
        if wait:
            args.append("--wait")
        r = sh(*args, script, env=self.env, timeout=180)
        return r

    def read(self, name):
        with open(self.path(name)) as f:
            return f.read()

    def ranks(self, out, pattern):
        """rank -> the first match of `pattern` on that rank's stdout.

        Lines are hvdrun's ("[3]<stdout>:...") or srun --label's ("3: ...").
        """
        got = {}
        for line in out.splitlines():
            prefixed = (re.match(r"\[(\d+)\]<stdout>:(.*)", line) or
                        re.match(r" *(\d+): (.*)", line))
            if not prefixed:
                continue
            m = re.match(pattern, prefixed.group(2))
            if m and int(prefixed.group(1)) not in got:
                got[int(prefixed.group(1))] = m
        return got

    def hvdrun(self, *args):
        return [HVDRUN, "--agent-path", AGENT, *args]

    def wait_for(self, cond, what, timeout=60.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond():
                return
            time.sleep(0.1)
        self.fail("timed out waiting for " + what)

    def job_end(self, job, timeout=60.0):
        """Waits for the job to leave squeue; its state and exit code."""
        self.wait_for(lambda: not sh("squeue", "-h", "-j", job).stdout.strip(),
                      "job %s to end" % job, timeout)
        info = sh("scontrol", "show", "job", job).stdout
        state = re.search(r"JobState=(\S+)", info)
        code = re.search(r"ExitCode=(\S+)", info)
        return (state.group(1) if state else "?", code.group(1) if code else "?")

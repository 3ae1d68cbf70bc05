"""hvdrun inside a Slurm allocation, on a real cluster (slurm_cluster.sh run).

Runs on the client host h0 of a 2-node cluster (h1, h2; 4 CPUs each), where
sbatch, salloc and squeue reach slurmctld. Each case submits real jobs whose
command is hvdrun with no -H: the hosts and slots come from the allocation
and the agents start with srun. After each case the cluster must be empty:
no job or step in squeue, no hvd-agent, worker or hvdrun process anywhere.
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


class HvdrunInAllocationTest(unittest.TestCase):

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
        """rank -> the first match of `pattern` on that rank's stdout."""
        got = {}
        for line in out.splitlines():
            prefixed = re.match(r"\[(\d+)\]<stdout>:(.*)", line)
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

    # ---- jobs that run ------------------------------------------------------

    def test_sbatch_takes_every_task_slot(self):
        r = self.sbatch(self.batch_script(
            *self.hvdrun(DRIVER, "--allreduce")))
        out, err = self.read("out"), self.read("err")
        self.assertEqual(r.returncode, 0, r.stderr + out + err)
        self.assertEqual(err, "")
        ids = self.ranks(out, r"identity rank=(\d+) size=(\d+) "
                         r"local_rank=(\d+) .* hostname=(\S+)")
        self.assertEqual(
            {k: (m.group(2), m.group(3), m.group(4)) for k, m in ids.items()},
            {0: ("4", "0", "h1"), 1: ("4", "1", "h1"),
             2: ("4", "0", "h2"), 3: ("4", "1", "h2")})
        self.assertEqual(len(self.ranks(out, r"allreduce sum=6 expected=6 ok")),
                         4, out)

    def test_workers_see_their_own_nodes_slurm_step(self):
        # Each node's agent is a Slurm step of its own (srun), and its
        # workers see that node's Slurm variables, not hvdrun's node's.
        r = self.sbatch(self.batch_script(*self.hvdrun(
            "bash", "-c",
            "'echo slurm $SLURMD_NODENAME $SLURM_STEP_ID $SLURM_JOB_ID'")))
        out = self.read("out")
        self.assertEqual(r.returncode, 0, r.stderr + out + self.read("err"))
        job = r.stdout.strip().split(";")[0]
        got = self.ranks(out, r"slurm (\S+) (\S+) (\S+)")
        self.assertEqual(sorted(got), [0, 1, 2, 3], out)
        for rank, m in got.items():
            self.assertEqual(m.group(1), "h1" if rank < 2 else "h2", out)
            self.assertRegex(m.group(2), r"^\d+$", out)  # a step, not batch
            self.assertEqual(m.group(3), job, out)
        self.assertNotEqual(got[0].group(2), got[2].group(2),
                            "one step per node")

    def test_salloc_with_np_below_the_slots(self):
        r = sh("salloc", "-Q", *ALLOC,
               *self.hvdrun("-np", "3", DRIVER, "--allreduce"),
               env=self.env, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        ids = self.ranks(r.stdout, r"identity rank=\d+ size=3 .* hostname=(\S+)")
        self.assertEqual({k: m.group(1) for k, m in ids.items()},
                         {0: "h1", 1: "h1", 2: "h2"})
        self.assertEqual(
            len(self.ranks(r.stdout, r"allreduce sum=3 expected=3 ok")), 3)

    def test_hvdrun_started_by_srun_inside_the_allocation(self):
        # In a job step SLURM_TASKS_PER_NODE is the step's (1): the job's
        # CPUs per node give the slots instead.
        r = sh("salloc", "-Q", *ALLOC, "srun", "-N1", "-n1", "--overlap",
               *self.hvdrun(DRIVER, "--allreduce"), env=self.env, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(
            len(self.ranks(r.stdout, r"allreduce sum=6 expected=6 ok")), 4,
            r.stdout)

    def test_python_example(self):
        if os.environ.get("HVD_TEST_TSAN_PRELOAD"):
            self.skipTest("Python workers over a TSan-built libhvd.so crash at "
                          "start-up under Bazel (README); the C++ cases run")
        # Under --config=asan the ASan runtime must be Python's first library
        # (as python/tests/run_python.sh does); for the workers only, so that
        # Slurm's own commands run without it.
        asan = os.environ.get("HVD_TEST_ASAN_PRELOAD")
        preload = ["-x", "'LD_PRELOAD=%s'" % asan, "-x",
                   "ASAN_OPTIONS=detect_leaks=0"] if asan else []
        r = self.sbatch(self.batch_script(*self.hvdrun(
            *preload, "/usr/bin/python3", EXAMPLE, "--epochs", "2",
            "--points", "256")))
        out = self.read("out")
        self.assertEqual(r.returncode, 0, r.stderr + out + self.read("err"))
        self.assertIn("[0]<stdout>:data-parallel on 4 rank(s)", out)
        self.assertIn("final error on a 101-point grid", out)

    # ---- usage errors -------------------------------------------------------

    def test_np_beyond_the_allocation_is_a_usage_error(self):
        # A wrapper that would leave a mark if any agent were started.
        agent = self.path("agent.sh")
        with open(agent, "w") as f:
            f.write("#!/bin/sh\ntouch %s\nexec %s \"$@\"\n" %
                    (self.path("agent-started"), AGENT))
        os.chmod(agent, 0o755)
        r = sh("salloc", "-Q", *ALLOC, HVDRUN, "--agent-path", agent,
               "-np", "5", "touch", self.path("worker-started"),
               env=self.env, cwd=self.dir)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(
            lines[0],
            r"^hvdrun: -np 5 is more than the 4 task slots of Slurm job \d+ "
            r"\(SLURM_JOB_NODELIST=h\[1-2\], SLURM_TASKS_PER_NODE=2\(x2\)\) "
            r"\(see hvdrun --help\)$")
        self.assertFalse(os.path.exists(self.path("agent-started")))
        self.assertFalse(os.path.exists(self.path("worker-started")))

    # ---- failures -----------------------------------------------------------

    def start_loop_job(self):
        """Submits a long allreduce loop; returns (job id, rank -> pid)."""
        started = self.path("started")
        os.mkdir(started)
        r = self.sbatch(self.batch_script(*self.hvdrun(
            DRIVER, "--allreduce", "--loop", "1000000", "--bytes", "1024",
            "--started", started)), wait=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = r.stdout.strip().split(";")[0]
        self.wait_for(lambda: len(os.listdir(started)) == 4, "4 ranks looping")
        pids = {k: int(m.group(1)) for k, m in
                self.ranks(self.read("out"), r"identity .* pid=(\d+)").items()}
        self.assertEqual(sorted(pids), [0, 1, 2, 3])
        for pid in pids.values():  # before anything is killed by pid
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                self.assertIn(DRIVER.encode(), f.read())
        return job, pids

    def job_end(self, job, timeout=60.0):
        """Waits for the job to leave squeue; its state and exit code."""
        self.wait_for(lambda: not sh("squeue", "-h", "-j", job).stdout.strip(),
                      "job %s to end" % job, timeout)
        info = sh("scontrol", "show", "job", job).stdout
        state = re.search(r"JobState=(\S+)", info)
        code = re.search(r"ExitCode=(\S+)", info)
        return (state.group(1) if state else "?", code.group(1) if code else "?")

    def test_killed_worker_ends_the_job_naming_rank_node_and_signal(self):
        job, pids = self.start_loop_job()
        os.kill(pids[2], signal.SIGKILL)
        state, code = self.job_end(job)
        err = self.read("err")
        self.assertIn("hvdrun: rank 2 (host h2) killed by signal 9 (Killed)\n",
                      err)
        self.assertEqual((state, code), ("FAILED", "137:0"), err)

    def test_killed_agent_ends_the_job_naming_the_node(self):
        job, pids = self.start_loop_job()
        # The agent of h2: the parent of rank 2, a task of a Slurm step.
        with open("/proc/%d/stat" % pids[2]) as f:
            agent = int(f.read().rsplit(")", 1)[1].split()[1])
        with open("/proc/%d/cmdline" % agent, "rb") as f:
            self.assertIn(b"--launcher-stdin", f.read())
        os.kill(agent, signal.SIGKILL)
        state, code = self.job_end(job)
        err = self.read("err")
        self.assertIn("hvdrun: host h2: lost the connection to hvd-agent\n",
                      err)
        self.assertEqual((state, code), ("FAILED", "1:0"), err)

    def test_scancel_ends_everything(self):
        job, _ = self.start_loop_job()
        r = sh("scancel", job)
        self.assertEqual(r.returncode, 0, r.stderr)
        state, _ = self.job_end(job)
        self.assertEqual(state, "CANCELLED")


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""hvdrun inside a Slurm allocation, on a real cluster (slurm_cluster.sh run).

Each case submits real jobs whose command is hvdrun with no -H: the hosts
and slots come from the allocation and the agents start with srun
(slurm_case.py says where it runs and what must be left afterwards).
"""
import os
import signal
import unittest

from slurm_case import ALLOC, AGENT, DRIVER, EXAMPLE, HVDRUN, SlurmCase, sh


class HvdrunInAllocationTest(SlurmCase):

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

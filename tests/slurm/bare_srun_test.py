"""srun starting the workers itself, no hvdrun, on a real Slurm cluster.

Each task takes its rank, size, local rank and node from Slurm's variables;
rank 0 serves the rendezvous on the step's first node, at the port derived
from the job and step ids; every task derives the job token from the
user's ~/.hvd/secret (HOME is the case's directory, shared by the nodes as
a home on a shared file system would be). slurm_case.py says where this
runs and what must be left afterwards.
"""
import os
import re
import signal
import unittest

from slurm_case import DRIVER, EXAMPLE, SlurmCase, job_processes


class BareSrunTest(SlurmCase):

    def setUp(self):
        super().setUp()
        self.env["HOME"] = self.dir

    def srun_script(self, *command, srun_flags=()):
        """A batch script whose one step is srun over every task slot."""
        return self.batch_script("srun", "--label", *srun_flags, *command)

    # ---- jobs that run ------------------------------------------------------

    def test_srun_gives_each_task_its_rank_and_node(self):
        r = self.sbatch(self.srun_script(DRIVER, "--allreduce"))
        out, err = self.read("out"), self.read("err")
        self.assertEqual(r.returncode, 0, r.stderr + out + err)
        self.assertEqual(err, "")
        got = self.ranks(out, r"topology rank=(\d+) size=(\d+) "
                         r"local_rank=(\d+) local_size=(\d+) cross_rank=(\d+)")
        self.assertEqual(
            {k: m.groups() for k, m in got.items()},
            {0: ("0", "4", "0", "2", "0"), 1: ("1", "4", "1", "2", "0"),
             2: ("2", "4", "0", "2", "1"), 3: ("3", "4", "1", "2", "1")}, out)
        self.assertEqual(len(self.ranks(out, r"allreduce sum=6 expected=6 ok")),
                         4, out)
        # The token came from the one secret every task shares.
        self.assertEqual(os.stat(self.path(".hvd/secret")).st_mode & 0o777,
                         0o600)

    def test_python_example(self):
        if os.environ.get("HVD_TEST_TSAN_PRELOAD"):
            self.skipTest("Python workers over a TSan-built libhvd.so crash at "
                          "start-up under Bazel (README)")
        r = self.sbatch(self.srun_script(
            "/usr/bin/python3", EXAMPLE, "--epochs", "2", "--points", "256"))
        out = self.read("out")
        self.assertEqual(r.returncode, 0, r.stderr + out + self.read("err"))
        self.assertIn("0: data-parallel on 4 rank(s)", out)
        self.assertIn("final error on a 101-point grid", out)

    # ---- failures -----------------------------------------------------------

    def test_a_killed_task_ends_every_task(self):
        started = self.path("started")
        os.mkdir(started)
        r = self.sbatch(self.srun_script(
            DRIVER, "--allreduce", "--loop", "1000000", "--bytes", "1024",
            "--started", started), wait=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = r.stdout.strip().split(";")[0]
        self.wait_for(lambda: len(os.listdir(started)) == 4, "4 ranks looping")
        pids = self.task_pids()
        os.kill(pids[2], signal.SIGKILL)
        state, code = self.job_end(job)
        out, err = self.read("out"), self.read("err")
        # Slurm names the task, its node and the signal; the other ranks
        # name the rank lost and end by themselves (srun is not given
        # --kill-on-bad-exit). Ranks on other nodes name its node's address;
        # rank 3, on its node, may learn of it through shared memory first,
        # and a rank on the other node may hear that from rank 3 (its
        # partner in the cached-step exchange) before its own connection
        # to rank 2 fails: "rank 3 (...) stopped: rank 3: rank 2 (pid N on
        # this host) exited ...".
        self.assertIn("srun: error: h2: task 2: Killed", err)
        remote = "connection to rank 2 (%s:" % os.environ["HVD_MH_ADDR_h2"]
        local = re.compile(r"rank 2 \(pid \d+ on this host\) exited")
        for rank in (0, 1, 3):
            line = self.ranks(out, r"loop failed at \d+: (.*)").get(rank)
            self.assertIsNotNone(line, "rank %d did not fail:\n%s%s" %
                                 (rank, out, err))
            said = line.group(1)
            if local.search(said) and (rank == 3 or
                                       "stopped: rank 3: rank 2 (" in said):
                continue
            self.assertIn(remote, said, out)
        self.assertEqual(state, "FAILED", err)

    def test_a_task_that_never_starts_is_named_with_its_node(self):
        # Rank 3 never calls init; the others give up after the start
        # timeout, and srun --kill-on-bad-exit then ends it.
        script = self.path("task.sh")
        with open(script, "w") as f:
            f.write('#!/bin/sh\n[ "$SLURM_PROCID" = 3 ] && exec sleep 300\n'
                    'exec %s --allreduce\n' % DRIVER)
        os.chmod(script, 0o755)
        self.env["HVD_START_TIMEOUT"] = "5"
        r = self.sbatch(self.srun_script(script,
                                         srun_flags=["--kill-on-bad-exit=1"]))
        out, err = self.read("out"), self.read("err")
        self.assertNotEqual(r.returncode, 0, out + err)
        failed = self.ranks(out, r"init failed: (.*)")
        self.assertIn(0, failed, out + err)
        self.assertIn("ranks that never reached the rendezvous: 3 on h2 "
                      "(arrived: ", failed[0].group(1))

    def task_pids(self):
        """rank -> pid of the driver tasks running now (Slurm's variables
        in each process's environment say which rank it is)."""
        pids = {}
        for pid, cmd in job_processes().items():
            if DRIVER not in cmd:
                continue
            try:
                with open("/proc/%d/environ" % pid, "rb") as f:
                    env = dict(v.split(b"=", 1) for v in f.read().split(b"\0")
                               if b"=" in v)
            except OSError:
                continue
            if b"SLURM_PROCID" in env:
                pids[int(env[b"SLURM_PROCID"])] = pid
        self.assertEqual(sorted(pids), [0, 1, 2, 3], pids)
        return pids


if __name__ == "__main__":
    unittest.main(verbosity=2)

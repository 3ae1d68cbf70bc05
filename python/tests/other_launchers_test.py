"""Scripts started by other launchers than hvdrun, unchanged: Open MPI's
`mpirun -np 4` (rank 0's rendezvous found through PMIx), and torchrun's
variables set by hand as torchrun sets them. Each rank checks an allreduce,
shuts down and inits again (INITS times in all; under mpirun rank 0 serves
each init's rendezvous on the port the first PMIx exchange gave), and
prints its place.

Run by run_python.sh (Debian's python3, the package from the build).
"""

import os
import socket
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
RUN_PYTHON = os.path.join(HERE, "run_python.sh")

# Four inits: when each init exchanged over PMIx again, about one job in
# seventy lost rank 0's record in a later init (a rank's PMIx_Get failed
# NOT-FOUND or waited for good), two inits showing it in one job of 75.
INITS = 4

SCRIPT = r"""
import numpy as np
import hvd.numpy as hvd
for attempt in range(INITS):
    hvd.init()
    got = hvd.allreduce(np.array([hvd.rank() + 1.0]), op=hvd.Sum)[0]
    want = hvd.size() * (hvd.size() + 1) / 2
    assert got == want, (got, want)
    print("rank %d of %d local %d of %d init %d ok" % (
        hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), attempt),
        flush=True)
    hvd.shutdown()
""".replace("INITS", str(INITS))


@pytest.fixture
def workdir():
    # Bazel's per-test directory, not pytest's shared /tmp/pytest-of-<user>:
    # a pytest session starting meanwhile in another test deletes all but
    # the newest three of those, which once took HOME (and ~/.hvd/secret)
    # from under a rank between its two inits.
    return tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))


def env(tmp):
    # No HVD_* but the test harness's own (run_python.sh preloads a
    # sanitizer runtime into the ranks from HVD_TEST_*), and no preload in
    # mpirun itself.
    e = {k: v for k, v in os.environ.items()
         if k.startswith("HVD_TEST_") or
         not k.startswith(("HVD_", "HOROVOD_", "OMPI_", "SLURM_", "LD_PRELOAD"))}
    e.update(PYTHONPATH=PYTHON_DIR, HOME=str(tmp), HVD_IFACE="127.0.0.1")
    return e


def write_script(tmp):
    path = os.path.join(str(tmp), "job.py")
    with open(path, "w") as f:
        f.write(SCRIPT)
    return path


def lines(out):
    return sorted(l for l in out.splitlines() if l.startswith("rank "))


@pytest.mark.skipif(not os.path.exists("/usr/bin/mpirun"),
                    reason="needs Open MPI (openmpi-bin)")
def test_mpirun_np_4_runs_an_unchanged_script(workdir):
    p = subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4",
         "-x", "PYTHONPATH", "-x", "HOME", "-x", "HVD_IFACE"] +
        [a for k in os.environ if k.startswith("HVD_TEST_")
         for a in ("-x", k)] + [
         RUN_PYTHON, write_script(workdir)],
        env=env(workdir), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert lines(p.stdout) == sorted(
        "rank %d of 4 local %d of 4 init %d ok" % (r, r, a)
        for r in range(4) for a in range(INITS)), p.stdout + p.stderr


LATE_SCRIPT = r"""
import os, sys, time
import hvd.numpy as hvd
if os.environ["OMPI_COMM_WORLD_RANK"] == "1":
    time.sleep(30)
start = time.monotonic()
try:
    hvd.init()
except Exception as e:
    print("failed after %.1f s: %s" % (time.monotonic() - start, e),
          flush=True)
    sys.exit(1)
"""


@pytest.mark.skipif(not os.path.exists("/usr/bin/mpirun"),
                    reason="needs Open MPI (openmpi-bin)")
def test_mpirun_rank_that_never_inits_fails_the_others_within_the_start_timeout(
        workdir):
    path = os.path.join(str(workdir), "late.py")
    with open(path, "w") as f:
        f.write(LATE_SCRIPT)
    e = env(workdir)
    e["HVD_START_TIMEOUT"] = "3"
    p = subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
         "-x", "PYTHONPATH", "-x", "HOME", "-x", "HVD_IFACE",
         "-x", "HVD_START_TIMEOUT"] +
        [a for k in os.environ if k.startswith("HVD_TEST_")
         for a in ("-x", k)] + [RUN_PYTHON, path],
        env=e, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0, p.stdout + p.stderr
    failed = [l for l in p.stdout.splitlines() if l.startswith("failed after")]
    assert len(failed) == 1, p.stdout + p.stderr
    assert "rank 0: PMIx_Fence timed out (HVD_START_TIMEOUT)" in failed[0]
    assert float(failed[0].split()[2]) < 25, failed[0]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchruns_variables_make_a_job(workdir):
    script = write_script(workdir)
    port = free_port() - 1  # rank 0 serves at MASTER_PORT + 1
    procs = []
    for rank in range(3):
        e = env(workdir)
        e.update(RANK=str(rank), WORLD_SIZE="3", LOCAL_RANK=str(rank),
                 LOCAL_WORLD_SIZE="3", MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port))
        procs.append(subprocess.Popen([RUN_PYTHON, script], env=e,
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=120) for p in procs]
    everything = "".join("---- rank %d (exit %d)\n%s%s" % (r, p.returncode, o, e)
                         for r, (p, (o, e)) in enumerate(zip(procs, outs)))
    assert all(p.returncode == 0 for p in procs), everything
    assert lines("".join(o for o, _ in outs)) == sorted(
        "rank %d of 3 local %d of 3 init %d ok" % (r, r, a)
        for r in range(3) for a in range(INITS))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"] + sys.argv[1:]))

"""hvdrun --check-build: what this build and machine offer, as horovodrun
--check-build prints it, found by importing the frameworks and asking the
library (so it cannot disagree with what hvd.* reports)."""

import os
import subprocess
import sys

import pytest

from hvdrun_driver import PYTHON_DIR, find

sys.path.insert(0, PYTHON_DIR)
os.environ["HVD_LIBRARY"] = find("core/libhvd.so")

import hvd.numpy as hvd  # noqa: E402  (after HVD_LIBRARY is set)


def _check_build(*flags, env=None):
    return subprocess.run([find("launcher/hvdrun")] + list(flags),
                          env=env or os.environ, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def report():
    r = _check_build("--check-build")
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_it_names_the_version_and_the_frameworks_found(report):
    assert report[0] == "hvd v%s:" % hvd.version()
    # One version: the library's (core/common/version.h) is the package's.
    import hvd as package
    assert hvd.version() == package.__version__
    import numpy
    import torch
    assert "    [X] PyTorch (%s)" % torch.__version__ in report
    assert "    [X] NumPy (%s)" % numpy.__version__ in report
    assert "    [ ] MXNet (hvd has no binding for it)" in report


def test_it_lists_the_transports_and_the_gpu_backend_as_the_library_does(
        report):
    assert "    [X] TCP (between hosts)" in report
    assert "    [X] Shared memory (within a host)" in report
    rdma = [line for line in report if "RDMA (libfabric" in line]
    assert len(rdma) == 1
    # Debian's libfabric has its tcp provider on every machine.
    assert rdma[0].startswith("    [X] RDMA") and "tcp" in rdma[0], rdma
    nccl = [line for line in report if line.startswith("    [") and
            "NCCL (" in line]
    assert len(nccl) == 1
    assert nccl[0].startswith("    [X]" if hvd.nccl_built() else "    [ ]")
    if hvd.nccl_built():
        assert "device(s)" in nccl[0]
    assert "    [ ] MPI" in report and "    [ ] Gloo" in report


def test_it_lists_both_rendezvous_modes(report):
    assert any(line.startswith("    [X] launcher:") for line in report)
    assert any(line.startswith("    [X] orchestrator:") for line in report)


def test_short_flag_and_no_np_needed_as_in_horovodrun():
    r = _check_build("-cb")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("hvd v")


def test_a_library_that_cannot_load_is_one_line_and_exit_1():
    env = dict(os.environ, HVD_LIBRARY="/nonexistent/libhvd.so")
    r = _check_build("--check-build", env=env)
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.startswith("hvdrun --check-build: hvd: cannot load")
    assert r.stderr.count("\n") == 1, r.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))

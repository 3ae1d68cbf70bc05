"""hvd without hvdrun: a plain `python3 script.py` is a job of size 1.

Also the package's own plumbing: library lookup, errors before init, the
horovod name, timeline, shutdown. Runs as a plain py_test (no hvdrun).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

# A job of size 1: no job environment, whatever the caller had.
for _key in list(os.environ):
    if _key.startswith(("HVD_", "HOROVOD_")) and _key != "HVD_LIBRARY":
        del os.environ[_key]

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import hvd.numpy as hnp  # noqa: E402
import hvd.torch as hvd  # noqa: E402
from hvd import _lib  # noqa: E402


def run_python(code, **env):
    """Runs `code` in a fresh interpreter; returns (exit code, output)."""
    full_env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), **env)
    proc = subprocess.run([sys.executable, "-c", code], env=full_env,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


# Order matters: these run before init.

def test_loading_the_library_leaves_pythons_signal_handlers_alone():
    # libfabric's libinfinipath takes SIGINT (Ctrl-C) and SIGTERM as it
    # loads; the library loads libfabric only for the RDMA transport, and
    # keeps the handlers then.
    import signal
    _lib.lib()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    code = ("import signal, hvd._lib as l; l.lib(); "
            "signal.raise_signal(signal.SIGINT)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, env=dict(os.environ), timeout=60)
    assert "KeyboardInterrupt" in p.stderr, p.stderr
    assert not [f for f in os.listdir(".") if f.endswith(".btr")]


def libfabric_is_mapped():
    with open("/proc/self/maps") as f:
        return "/libfabric.so.1" in f.read()


def test_loading_the_library_does_not_load_libfabric():
    # Its providers' libraries cost about 0.2 s at load; only the RDMA
    # transport needs them.
    _lib.lib()
    assert not libfabric_is_mapped()


def test_topology_before_init_raises_value_error():
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.rank()
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.size()


def test_collective_before_init_raises_not_initialized():
    with pytest.raises(hvd.HvdNotInitializedError, match="not initialized"):
        hvd.allreduce(torch.ones(2))


def test_process_set_before_init_raises_not_initialized():
    with pytest.raises(hvd.HvdNotInitializedError,
                       match=r"add_process_set\(\[0\]\) failed: .*not "
                             r"initialized"):
        hvd.add_process_set([0])


def test_init_makes_a_job_of_size_one():
    hvd.init()
    hvd.init()  # twice is fine
    assert hvd.is_initialized()
    assert (hvd.rank(), hvd.size()) == (0, 1)
    assert (hvd.local_rank(), hvd.local_size()) == (0, 1)
    assert (hvd.cross_rank(), hvd.cross_size()) == (0, 1)
    assert hvd.is_homogeneous()
    assert hvd.global_process_set.ranks == [0]
    assert not libfabric_is_mapped()  # no RDMA in a job of one
    assert hvd.global_process_set.size() == 1


def test_build_facts_are_booleans():
    for fn in (hvd.mpi_built, hvd.gloo_built, hvd.cuda_built,
               hvd.mpi_enabled, hvd.gloo_enabled, hvd.ddl_built,
               hvd.ccl_built, hvd.rocm_built, hvd.mpi_threads_supported):
        assert fn() in (True, False)
    assert not hvd.mpi_built() and not hvd.gloo_built()
    assert hvd.version()


def test_nccl_built_is_the_version_code_or_zero():
    # Horovod's nccl_built() is NCCL_VERSION_CODE (an int), 0 without NCCL.
    code = hvd.nccl_built()
    assert type(code) is int
    assert (code >= 20000) if hvd.cuda_built() else (code == 0)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16,
                                   torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float32,
                                   torch.float64])
def test_every_collective_is_the_identity_at_size_one(dtype):
    x = (torch.arange(12).reshape(4, 3) % 5).to(dtype)
    for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product):
        assert torch.equal(hvd.allreduce(x, op=op), x), op
    assert torch.equal(hvd.allgather(x), x)
    assert torch.equal(hvd.broadcast(x, root_rank=0), x)
    assert torch.equal(hvd.alltoall(x), x)
    out, received = hvd.alltoall(x, splits=[4])
    assert torch.equal(out, x) and received.tolist() == [4]
    assert torch.equal(hvd.reducescatter(x, op=hvd.Sum), x)
    assert all(torch.equal(a, x) for a in hvd.grouped_allreduce([x, x]))
    assert all(torch.equal(a, x) for a in hvd.grouped_allgather([x, x]))
    assert all(torch.equal(a, x) for a in hvd.grouped_reducescatter(
        [x], op=hvd.Sum))


def test_bool_tensors_cross_as_bool():
    flags = torch.tensor([True, False, True])
    assert hvd.allreduce(flags, op=hvd.Max).dtype == torch.bool
    assert hvd.allgather(flags).tolist() == [True, False, True]
    assert hvd.broadcast(flags, 0).tolist() == [True, False, True]
    with pytest.raises(hvd.HvdInvalidArgumentError, match="Average"):
        hvd.allreduce(flags)  # default op Average needs floating point


def test_scale_factors_apply_at_size_one():
    x = torch.ones(3)
    assert torch.allclose(hvd.allreduce(x, op=hvd.Sum, prescale_factor=3.0,
                                        postscale_factor=0.5),
                          torch.full((3,), 1.5))


def test_async_in_place_and_poll():
    x = torch.ones(5)
    handle = hvd.allreduce_async_(x, op=hvd.Sum, name="single.inplace")
    assert hvd.synchronize(handle) is x
    handle = hvd.broadcast_async(x, 0)
    while not hvd.poll(handle):
        pass
    assert torch.equal(hvd.synchronize(handle), x)


def test_barrier_and_join():
    hvd.barrier()
    assert hvd.join() == 0


def test_errors_name_the_problem():
    with pytest.raises(hvd.HvdNotSupportedError, match="Adasum"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    with pytest.raises(hvd.HvdInvalidArgumentError,
                       match="at least 1 dimension"):
        hvd.allgather(torch.tensor(1.0))
    with pytest.raises(hvd.HvdInvalidArgumentError, match="root rank"):
        hvd.broadcast(torch.ones(1), root_rank=1)
    with pytest.raises(hvd.HvdInvalidArgumentError, match="Sum and Average"):
        hvd.reducescatter(torch.ones(2), op=hvd.Max)
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(torch.ones(1), average=True, op=hvd.Sum)


def test_failed_calls_raise_the_class_of_their_status():
    with pytest.raises(hvd.HvdInvalidArgumentError,
                       match=r"add_process_set\(\[5\]\) failed: process set "
                             r"ranks \[5\] must be distinct ranks in \[0, 1\)"):
        hvd.add_process_set([5])
    with pytest.raises(hvd.HvdInvalidArgumentError,
                       match="a process set with ranks \\[0\\] already exists"):
        hvd.add_process_set([0])
    with pytest.raises(hvd.HvdInvalidArgumentError,
                       match="cannot write timeline '/nonexistent/t.json'"):
        hvd.start_timeline("/nonexistent/t.json")


def test_a_stall_shutdown_has_its_own_exception():
    from hvd import exceptions
    stall = exceptions.from_status(
        10, "hvd has been shut down: stall shutdown: tensor 'g' (allreduce, "
            "process set 0) has waited 2s for ranks 1")
    assert type(stall) is hvd.HvdStallError
    assert isinstance(stall, hvd.HvdAbortedError)
    assert isinstance(stall, hvd.HvdInternalError)
    lost = exceptions.from_status(10, "rank 1 (127.0.0.1:5000) stopped")
    assert type(lost) is hvd.HvdAbortedError
    shut = exceptions.from_status(9, "hvd has been shut down")
    assert type(shut) is hvd.HvdNotInitializedError


def test_objects_round_trip():
    assert hvd.broadcast_object({"a": [1, 2]}) == {"a": [1, 2]}
    assert hvd.allgather_object("x") == ["x"]


def test_distributed_optimizer_at_size_one_is_the_plain_optimizer():
    def train(wrap):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                                    torch.nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        if wrap:
            opt = hvd.DistributedOptimizer(
                opt, named_parameters=model.named_parameters())
        for step in range(4):
            x = torch.randn(8, 3, generator=torch.Generator().manual_seed(step))
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
        return [p.detach() for p in model.parameters()]
    for a, b in zip(train(True), train(False)):
        assert torch.allclose(a, b, atol=1e-6)


def test_numpy_binding_at_size_one():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(hnp.allreduce(a, op=hnp.Sum), a)
    assert np.array_equal(hnp.allgather(a), a)
    assert hnp.allreduce(np.array([3, 5]), op=hnp.Average).tolist() == [3, 5]
    assert hnp.broadcast(np.array([True]), 0).dtype == np.bool_


def test_horovod_torch_is_hvd_torch():
    import horovod.torch as horovod_hvd
    from horovod.common.exceptions import HorovodInternalError
    from horovod.torch.mpi_ops import allreduce
    assert horovod_hvd.allreduce is hvd.allreduce is allreduce
    assert horovod_hvd.DistributedOptimizer is hvd.DistributedOptimizer
    assert HorovodInternalError is hvd.HvdInternalError
    assert issubclass(hvd.HvdInternalError, RuntimeError)


def test_timeline_records_operations(tmp_path):
    path = tmp_path / "timeline.json"
    hvd.start_timeline(str(path))
    hvd.allreduce(torch.ones(4), name="timeline.probe")
    hvd.stop_timeline()
    text = path.read_text()
    assert "timeline.probe" in text
    events = json.loads(text if text.rstrip().endswith("]")
                        else text.rstrip().rstrip(",") + "]")
    assert isinstance(events, list) and events


def test_library_lookup_honours_hvd_library():
    code, out = run_python("import hvd.torch as h; h.init()",
                           HVD_LIBRARY="/nonexistent/libhvd.so")
    assert code != 0
    assert "/nonexistent/libhvd.so (not found)" in out
    saved = os.environ.pop("HVD_LIBRARY", None)
    try:
        paths = _lib.candidate_paths()
    finally:
        if saved is not None:
            os.environ["HVD_LIBRARY"] = saved
    assert paths[0].endswith(os.path.join("hvd", "libhvd.so"))
    assert any(p.endswith(os.path.join("bazel-bin", "core", "libhvd.so"))
               for p in paths)


def test_shutdown_ends_the_job():
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.rank()


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):  # under bazel test: per-case report
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))

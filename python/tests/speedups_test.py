"""The bindings' C module (hvd._speedups, through hvd._fastpath) on every
rank of an hvdrun job: it is there, it gives bit for bit what the
pure-Python path gives, it leaves every case it does not take to that path,
and its errors and interruptions behave as that path's do."""

import signal
import time

import numpy as np
import pytest
import torch

import hvd.numpy as hnp
import hvd.torch as ht
from hvd import _engine, _fastpath
from hvd.torch import _adapter as ht_adapter

hnp.init()
RANK = hnp.rank()
SIZE = hnp.size()

NUMPY_DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64,
                np.float16, np.float32, np.float64]
TORCH_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32,
                torch.int64, torch.float16, torch.bfloat16, torch.float32,
                torch.float64]
OPS = [hnp.Sum, hnp.Average, hnp.Min, hnp.Max, hnp.Product]


def both_paths(call):
    """call() with the C module on, then off: (fast, pure), each checked
    to have taken the path it was meant to."""
    submitted = []
    real = _fastpath.speedups

    class Counting:
        def __getattr__(self, name):
            fn = getattr(real, name)

            def counted(*args):
                result = fn(*args)
                submitted.append(result is not NotImplemented)
                return result
            return counted
    _fastpath.speedups = Counting()
    try:
        fast = call()
    finally:
        _fastpath.set_enabled(True)
    took = any(submitted)
    was = _fastpath.set_enabled(False)
    try:
        pure = call()
    finally:
        _fastpath.set_enabled(was)
    return fast, pure, took


def numpy_value(dtype, shape=(3, 5)):
    return ((np.arange(np.prod(shape)).reshape(shape) % 3) + RANK + 1) \
        .astype(dtype)


def test_the_module_is_built_and_loaded():
    assert _fastpath.available()
    assert _fastpath.speedups is not None


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_numpy_results_are_those_of_the_python_path(dtype, op):
    a = numpy_value(dtype)
    fast, pure, took = both_paths(lambda: hnp.allreduce(a, op=op))
    integer_average = op == hnp.Average and np.dtype(dtype).kind in "iu"
    assert took == (not integer_average)
    assert fast.dtype == pure.dtype and fast.shape == pure.shape
    assert fast.tobytes() == pure.tobytes()
    assert np.array_equal(a, numpy_value(dtype))  # out of place


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_torch_results_are_those_of_the_python_path(dtype, op):
    t = torch.arange(15).reshape(3, 5).remainder(3).add(RANK + 1).to(dtype)
    fast, pure, took = both_paths(lambda: ht.allreduce(t, op=op))
    assert took == (op != ht.Average or dtype.is_floating_point)
    assert torch.equal(fast, pure) and fast.dtype == dtype
    fast_, pure_, _ = both_paths(lambda: ht.allreduce_(t.clone(), op=op))
    assert torch.equal(fast_, pure_) and torch.equal(fast_, fast)


def test_scaling_factors_match_the_python_path():
    a = numpy_value(np.float32) / 7
    fast, pure, took = both_paths(lambda: hnp.allreduce(
        a, op=hnp.Average, prescale_factor=0.3, postscale_factor=1.7))
    assert took and fast.tobytes() == pure.tobytes()
    t = torch.from_numpy(a).to(torch.float16)
    fast, pure, took = both_paths(lambda: ht.allreduce_(
        t.clone(), op=ht.Sum, prescale_factor=0.5, postscale_factor=3.0))
    assert took and torch.equal(fast, pure)


def test_async_in_place_handles_synchronize_to_the_tensor():
    grads = [torch.full((n,), float(RANK + n)) for n in (1, 7, 300)]
    handles = [ht.allreduce_async_(g, op=ht.Sum, name="g%d" % i)
               for i, g in enumerate(grads)]
    for n, g, h in zip((1, 7, 300), grads, handles):
        assert ht.synchronize(h) is g
        assert g.tolist() == [float(sum(r + n for r in range(SIZE)))] * n


def counted_waits():
    """Wraps _engine.result_waiter: the list of handles it was given."""
    handles = []
    real = _engine.result_waiter

    def counting(handle):
        handles.append(handle)
        return real(handle)
    _engine.result_waiter = counting
    return handles, real


def test_in_place_handles_are_waited_for_in_c_and_fail_as_in_python():
    ht.allreduce_(torch.ones(1), name="binds_the_module")
    handles, real = counted_waits()
    try:
        t = torch.full((3,), float(RANK))
        h = ht.allreduce_async_(t, op=ht.Sum, name="waited_in_c")
        assert ht.synchronize(h) is t
        assert handles == [h]
        assert t.tolist() == [float(sum(range(SIZE)))] * 3
        bad = torch.ones(4 if RANK == 0 else 5)
        h = ht.allreduce_async_(bad, op=ht.Sum, name="mismatched_in_c")
        with pytest.raises(hnp.HvdError) as info:
            ht.synchronize(h)
        assert "mismatched_in_c" in str(info.value)
        assert handles[-1] == h and h not in _engine._pending
    finally:
        _engine.result_waiter = real
    # The pure-Python path raises the same for the same failure.
    was = _fastpath.set_enabled(False)
    try:
        assert _engine.result_waiter is None
        with pytest.raises(hnp.HvdError) as pure:
            ht.synchronize(ht.allreduce_async_(
                torch.ones(4 if RANK == 0 else 5), op=ht.Sum,
                name="mismatched_in_python"))
    finally:
        _fastpath.set_enabled(was)
    assert type(pure.value) is type(info.value)
    assert _engine.result_waiter is real


def test_a_zero_dimensional_array_is_taken():
    a = np.array(RANK + 2.0)
    fast, pure, took = both_paths(lambda: hnp.allreduce(a, op=hnp.Sum))
    assert took and fast.shape == () and fast.tobytes() == pure.tobytes()


@pytest.mark.parametrize("case", [
    "transposed", "scalar", "empty", "bool", "list",
])
def test_numpy_cases_the_module_leaves_to_python(case):
    make = {
        "transposed": lambda: numpy_value(np.float32).T,
        "scalar": lambda: np.float64(RANK + 2),
        "empty": lambda: np.zeros((0, 3), np.float32),
        "bool": lambda: np.array([RANK == 0, True, False]),
        "list": lambda: [1.0, float(RANK)],
    }[case]
    fast, pure, took = both_paths(lambda: hnp.allreduce(make(), op=hnp.Max))
    assert not took
    assert np.asarray(fast).tobytes() == np.asarray(pure).tobytes()


def test_numpy_errors_of_the_python_path_stay_its_own():
    with pytest.raises(ValueError, match="not supported"):
        hnp.allreduce(numpy_value(">f4"))  # not this machine's byte order
    frozen = np.ones(2)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        hnp.allreduce_(frozen)


@pytest.mark.parametrize("case", [
    "transposed", "bool", "empty", "parameter",
])
def test_torch_cases_the_module_leaves_to_python(case):
    make = {
        "transposed": lambda: torch.arange(6.0).reshape(2, 3).t() + RANK,
        "bool": lambda: torch.tensor([RANK == 0, True]),
        "empty": lambda: torch.zeros(0),
        "parameter": lambda: torch.nn.Parameter(torch.ones(3) * RANK),
    }[case]

    def call():
        with torch.no_grad():
            return ht.allreduce_(make(), op=ht.Max).clone()
    fast, pure, took = both_paths(call)
    assert not took
    assert torch.equal(fast, pure)


class _StandInGpuTensor:
    """Read by the C module as it reads a torch.Tensor (attributes), but on
    GPU 0: this machine has none, so the core refuses it at enqueue."""
    is_cuda = True
    is_sparse = False
    dtype = torch.float32
    shape = (4,)

    def __init__(self):
        self.memory = np.zeros(4, np.float32)

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return self.memory.ctypes.data

    def get_device(self):
        return 0


def test_a_gpu_tensor_is_submitted_with_its_devices_current_stream():
    asked = []

    def stream_of(device):
        asked.append(device)
        return 0x1000

    _fastpath.register_tensor_type(_StandInGpuTensor,
                                   {torch.float32: (2, 32)}, None, stream_of)
    try:
        handle = _fastpath.submit_in_place(_StandInGpuTensor(), "stand-in",
                                           ht.Sum, 1.0, 1.0,
                                           ht.global_process_set)
        with pytest.raises(ht.HvdError) as info:
            ht.synchronize(handle)
    finally:
        _fastpath.register_tensor_type(torch.Tensor,
                                       ht_adapter._FAST_DTYPES,
                                       torch.empty_like,
                                       ht_adapter._current_stream)
    assert asked == [0]  # taken by the module, not left to Python
    assert "GPU" in str(info.value) or "CUDA" in str(info.value)


def test_without_a_stream_function_a_gpu_tensor_is_left_to_python():
    _fastpath.register_tensor_type(_StandInGpuTensor,
                                   {torch.float32: (2, 32)}, None)
    try:
        taken = _fastpath.submit_in_place(_StandInGpuTensor(), "stand-in",
                                          ht.Sum, 1.0, 1.0,
                                          ht.global_process_set)
    finally:
        _fastpath.register_tensor_type(torch.Tensor,
                                       ht_adapter._FAST_DTYPES,
                                       torch.empty_like,
                                       ht_adapter._current_stream)
    assert taken is NotImplemented


def refused_while_rank_0_holds(name, held, refused):
    """Rank 0 submits `held` under `name` and, while that is in flight (the
    other ranks have not submitted it yet), calls refused(), which must
    raise "still in flight" at once; then every rank completes the held
    allreduce (a Sum into `held`)."""
    if RANK == 0:
        pending = ht.allreduce_async_(held, op=ht.Sum, name=name)
        with pytest.raises(ValueError, match="still in flight"):
            refused()
        hnp.allreduce(np.ones(1), name="after_refusal")
        ht.synchronize(pending)
    else:
        hnp.allreduce(np.ones(1), name="after_refusal")
        ht.allreduce_(held, op=ht.Sum, name=name)


def test_a_name_still_in_flight_is_refused_at_once():
    t = torch.ones(4)
    refused_while_rank_0_holds(
        "twice", t, lambda: ht.allreduce_(torch.ones(4), op=ht.Sum,
                                          name="twice"))
    assert t.tolist() == [float(SIZE)] * 4


def test_a_mismatch_fails_on_every_rank_and_the_job_goes_on():
    shape = (4,) if RANK == 0 else (5,)
    with pytest.raises(hnp.HvdError) as info:
        hnp.allreduce(np.ones(shape, np.float32), name="mismatched")
    assert "mismatched" in str(info.value)
    assert hnp.allreduce(np.ones(2), op=hnp.Sum).tolist() == [SIZE] * 2


def test_an_interrupted_wait_keeps_the_operation_and_its_tensors():
    """Ctrl-C during the wait: KeyboardInterrupt in the caller, and the
    operation, still running, keeps its tensors alive in the pending table
    until its handle is synchronized."""
    a = np.full(3, float(RANK + 1), np.float32)
    if RANK == 0:
        def interrupt(signum, frame):
            raise KeyboardInterrupt
        old = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            with pytest.raises(KeyboardInterrupt):
                hnp.allreduce(a, op=hnp.Sum, name="interrupted")
        finally:
            signal.signal(signal.SIGALRM, old)
        kept = [h for h, (keep, _) in _engine._pending.items()
                if keep[0] is a]
        assert len(kept) == 1
        hnp.allreduce(np.ones(1), name="released")
        out = hnp.synchronize(kept[0])
        assert out.tolist() == [float(sum(range(1, SIZE + 1)))] * 3
    else:
        # Well after rank 0's first wait slice (WAIT_SLICE_SECONDS) ends, so
        # that the signal is seen while the operation cannot complete.
        time.sleep(3 * _engine.WAIT_SLICE_SECONDS)
        hnp.allreduce(a, op=hnp.Sum, name="interrupted")
        hnp.allreduce(np.ones(1), name="released")


def test_an_interrupted_wait_in_c_keeps_the_handle_waitable():
    """Ctrl-C while synchronize waits in the C module: KeyboardInterrupt,
    and the handle, unreleased, goes back to the pending table with its
    tensor until it is synchronized again."""
    t = torch.full((3,), float(RANK + 1))
    if RANK == 0:
        def interrupt(signum, frame):
            raise KeyboardInterrupt
        h = ht.allreduce_async_(t, op=ht.Sum, name="interrupted_in_c")
        assert _engine._pending[h][1] is None  # the C wait's entry: no finish
        old = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            with pytest.raises(KeyboardInterrupt):
                ht.synchronize(h)
        finally:
            signal.signal(signal.SIGALRM, old)
        assert _engine._pending[h][0] is t  # what it keeps alive
        assert ht.synchronize(h) is t
    else:
        time.sleep(3 * _engine.WAIT_SLICE_SECONDS)
        ht.allreduce_(t, op=ht.Sum, name="interrupted_in_c")
    assert t.tolist() == [float(sum(range(1, SIZE + 1)))] * 3


# ---------------------------------------------- the optimizer's C hook --

def hooked_optimizer(params, **kwargs):
    """A DistributedOptimizer over `params` (named w0, w1, ...), and the
    list of gradient names its Python path submits (the C hook submits
    without it)."""
    opt = ht.DistributedOptimizer(
        torch.optim.SGD(params, lr=0.5),
        named_parameters=[("w%d" % i, p) for i, p in enumerate(params)],
        **kwargs)
    python_submits = []
    submit = opt._allreduce_grad_async

    def counted(gradient):
        python_submits.append(gradient.name)
        return submit(gradient)
    opt._allreduce_grad_async = counted
    return opt, python_submits


def test_the_optimizer_hooks_submit_in_c_from_the_second_step():
    """The first step's hooks take the Python path, which makes each
    gradient's options; from the second step on the C hook submits, and
    training gives the Python path's parameters bit for bit."""
    def train(c_module):
        was = _fastpath.set_enabled(c_module)
        try:
            w = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))
            b = torch.nn.Parameter(torch.ones(5))
            opt, python_submits = hooked_optimizer([w, b])
            counts = []
            for step in range(3):
                opt.zero_grad()
                ((w * (RANK + 1 + step)).sum() + (b ** 2).sum() / 3
                 ).backward()
                opt.step()
                counts.append(len(python_submits))
                python_submits.clear()
            return [w.detach().clone(), b.detach().clone()], counts
        finally:
            _fastpath.set_enabled(was)
    fast, fast_counts = train(True)
    pure, pure_counts = train(False)
    assert fast_counts == [2, 0, 0]
    assert pure_counts == [2, 2, 2]
    for f, p in zip(fast, pure):
        assert torch.equal(f, p)


def test_the_c_hook_leaves_earlier_passes_and_odd_gradients_to_python():
    """With backward_passes_per_step 2 the first pass of each step is the
    Python hook's (it counts), the second the C hook's; a non-contiguous
    gradient goes to the Python path, which reduces it as well; a gradient
    that requires grad raises the Python hook's error."""
    w = torch.nn.Parameter(torch.ones(2, 3))
    opt, python_submits = hooked_optimizer([w], backward_passes_per_step=2)
    mean = sum(range(1, SIZE + 1)) / SIZE
    for step in range(2):
        opt.zero_grad()
        for _ in range(2):
            (w * (RANK + 1)).sum().backward()
        opt.synchronize()
        assert w.grad.tolist() == [[2 * mean] * 3] * 2
        assert python_submits == ["grad.w0"]  # the first step's only
    opt.backward_passes_per_step = 1
    opt._gradients[0].delay = 1
    w.grad = torch.zeros(3, 2).t()  # accumulated into in place: strided
    (w * (RANK + 1)).sum().backward()
    assert not w.grad.is_contiguous()
    opt.synchronize()
    assert w.grad.tolist() == [[mean] * 3] * 2
    assert len(python_submits) == 2
    opt.zero_grad()
    w.grad = None
    with pytest.raises(AssertionError, match="create_graph"):
        (w ** 2 * (RANK + 1)).sum().backward(create_graph=True)
    w.grad = None
    opt.synchronize()


def test_a_submission_the_library_refuses_raises_from_backward():
    """A gradient's name still in flight: the C hook's submission is
    refused, and backward raises the Python path's error for it; once
    synchronize() has reduced what that step did not, the next step goes
    on."""
    w = torch.nn.Parameter(torch.ones(3))
    opt, _ = hooked_optimizer([w])
    (w * (RANK + 1)).sum().backward()
    opt.step()  # the Python path: the options are made
    held = torch.ones(2)
    opt.zero_grad()
    refused_while_rank_0_holds("grad.w0", held,
                               lambda: (w * (RANK + 1)).sum().backward())
    assert held.tolist() == [float(SIZE)] * 2
    assert not opt._handles
    opt.synchronize()  # reduces what the refused step did not
    opt.zero_grad()
    (w * (RANK + 1)).sum().backward()
    opt.synchronize()
    assert w.grad.tolist() == [sum(range(1, SIZE + 1)) / SIZE] * 3


def test_a_backward_pass_too_many_after_the_c_hooks_raises():
    """The C hook counts its pass as the Python hook does: one more
    backward before step() raises the Python hook's error."""
    w = torch.nn.Parameter(torch.ones(2))
    opt, python_submits = hooked_optimizer([w])
    for _ in range(2):
        opt.zero_grad()
        w.sum().backward()
        opt.step()
    w.sum().backward()
    with pytest.raises(AssertionError, match="backward_passes_per_step"):
        w.sum().backward()
    opt.synchronize()
    assert not opt._handles and python_submits == ["grad.w0"]

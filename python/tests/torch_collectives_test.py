"""hvd.torch collectives on every rank of an hvdrun job (2 or 3 ranks): each
function, dtype and op against a reference computed from every rank's input;
in-place and async forms; join and barrier. Process sets, errors and
gradients are in torch_sets_errors_grads_test.py.

Run by hvdrun_driver.py; every rank runs these tests in the same order.
"""

import itertools
import time

import pytest
import torch

import hvd.torch as hvd
from torch_values import rows_of, value

hvd.init()
RANK = hvd.rank()
SIZE = hvd.size()

NUMERIC = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
           torch.float16, torch.bfloat16, torch.float32, torch.float64]
ALL_DTYPES = NUMERIC + [torch.bool]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def test_job_has_at_least_two_ranks():
    assert SIZE >= 2, "run under hvdrun -np 2 or more"



def close(actual, expected, dtype):
    tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(dtype, 1e-6)
    return torch.allclose(actual.double(), expected.double(), rtol=tol,
                          atol=tol)


def reference(op, dtype, shape=(17, 3)):
    stack = torch.stack([value(r, shape).double() for r in range(SIZE)])
    if op == hvd.Sum:
        out = stack.sum(0)
    elif op == hvd.Average:
        out = stack.sum(0) / SIZE
        if not dtype.is_floating_point:
            out = torch.trunc(out)  # Horovod: integer Average truncates
    elif op == hvd.Min:
        out = stack.min(0).values
    elif op == hvd.Max:
        out = stack.max(0).values
    else:
        out = stack.prod(0)
    return out


# ------------------------------------------------------------ topology --

def test_topology_is_consistent_across_ranks():
    ranks = hvd.allgather(torch.tensor([RANK]))
    assert ranks.tolist() == list(range(SIZE))
    assert 0 <= hvd.local_rank() < hvd.local_size() <= SIZE
    assert 0 <= hvd.cross_rank() < hvd.cross_size()
    assert hvd.is_initialized()
    assert hvd.is_homogeneous() in (True, False)
    assert hvd.mpi_built() is False and hvd.gloo_built() is False


# ------------------------------------------------------------ allreduce --

@pytest.mark.parametrize("dtype,op", list(itertools.product(NUMERIC, OPS)))
def test_allreduce_matches_reference_for_every_dtype_and_op(dtype, op):
    tensor = value(RANK).to(dtype)
    result = hvd.allreduce(tensor, op=op, name="ar.%s.%d" % (dtype, op))
    assert result.dtype == dtype and result.shape == tensor.shape
    assert close(result, reference(op, dtype), dtype), (result, op)
    assert torch.equal(tensor, value(RANK).to(dtype)), "input modified"


@pytest.mark.parametrize("op,logic", [(hvd.Sum, "or"), (hvd.Max, "or"),
                                      (hvd.Min, "and"), (hvd.Product, "and")])
def test_allreduce_bool_is_logical_or_for_sum_max_and_for_min_product(
        op, logic):
    # Element i is true on rank r iff bit r of i is set.
    tensor = torch.tensor([bool((i >> RANK) & 1) for i in range(8)])
    result = hvd.allreduce(tensor, op=op)
    bits = [[bool((i >> r) & 1) for r in range(SIZE)] for i in range(8)]
    expected = [any(b) if logic == "or" else all(b) for b in bits]
    assert result.dtype == torch.bool
    assert result.tolist() == expected


def test_allreduce_defaults_to_average():
    result = hvd.allreduce(torch.full((4,), float(RANK)))
    assert torch.allclose(result, torch.full((4,), (SIZE - 1) / 2))


def test_allreduce_average_argument_still_accepted():
    with pytest.warns(DeprecationWarning):
        summed = hvd.allreduce(torch.ones(3), average=False)
    assert torch.equal(summed, torch.full((3,), float(SIZE)))


def test_allreduce_prescale_and_postscale_factors():
    result = hvd.allreduce(torch.ones(5, dtype=torch.float64), op=hvd.Sum,
                           prescale_factor=2.0, postscale_factor=0.5 / SIZE)
    assert torch.allclose(result, torch.ones(5, dtype=torch.float64))
    avg = hvd.allreduce(torch.full((5,), 3.0), op=hvd.Average,
                        prescale_factor=2.0, postscale_factor=5.0)
    assert torch.allclose(avg, torch.full((5,), 30.0))


def test_allreduce_in_place_writes_into_the_tensor():
    tensor = torch.full((6,), float(RANK))
    returned = hvd.allreduce_(tensor, op=hvd.Sum)
    assert returned is tensor
    assert torch.equal(tensor, torch.full((6,), float(sum(range(SIZE)))))


def test_allreduce_in_place_of_a_non_contiguous_view_writes_back():
    base = torch.zeros(4, 6)
    view = base.t()[::2]  # 3 x 4, not contiguous, shares base's memory
    view.fill_(RANK + 1)
    assert not view.is_contiguous()
    hvd.allreduce_(view, op=hvd.Sum)
    total = float(sum(r + 1 for r in range(SIZE)))
    assert torch.equal(view, torch.full((3, 4), total))
    assert torch.equal(base.t()[1::2], torch.zeros(3, 4))


def test_allreduce_of_non_contiguous_input_returns_contiguous_result():
    x = (torch.arange(12.0).reshape(3, 4) + RANK).t()
    result = hvd.allreduce(x, op=hvd.Sum)
    expected = sum((torch.arange(12.0).reshape(3, 4) + r).t()
                   for r in range(SIZE))
    assert torch.equal(result, expected)


def test_allreduce_async_poll_and_synchronize():
    tensor = torch.full((1000,), float(RANK))
    handle = hvd.allreduce_async(tensor, op=hvd.Sum, name="async.sum")
    deadline = time.monotonic() + 30
    while not hvd.poll(handle):
        assert time.monotonic() < deadline, "allreduce never completed"
        time.sleep(0.001)
    result = hvd.synchronize(handle)
    assert torch.equal(result, torch.full((1000,), float(sum(range(SIZE)))))
    assert torch.equal(tensor, torch.full((1000,), float(RANK)))


def test_allreduce_async_in_place():
    tensor = torch.full((10,), 2.0)
    handle = hvd.allreduce_async_(tensor, op=hvd.Product)
    assert hvd.synchronize(handle) is tensor
    assert torch.equal(tensor, torch.full((10,), 2.0 ** SIZE))


def test_synchronize_of_an_unknown_handle_returns_none():
    assert hvd.synchronize(987654321) is None


def test_named_allreduces_submitted_in_different_orders_on_each_rank():
    names = ["order.%d" % i for i in range(6)]
    order = list(enumerate(names))
    if RANK % 2 == 1:
        order.reverse()
    handles = {name: hvd.allreduce_async(torch.full((3,), float(i + RANK)),
                                         op=hvd.Sum, name=name)
               for i, name in order}
    for i, name in enumerate(names):
        expected = float(sum(i + r for r in range(SIZE)))
        assert torch.equal(hvd.synchronize(handles[name]),
                           torch.full((3,), expected))


def test_allreduce_of_many_small_tensors_at_once_is_fused_and_correct():
    tensors = [torch.full((i + 1,), float(RANK * 100 + i)) for i in range(50)]
    handles = [hvd.allreduce_async(t, op=hvd.Sum, name="many.%d" % i)
               for i, t in enumerate(tensors)]
    for i, h in enumerate(handles):
        expected = float(sum(r * 100 + i for r in range(SIZE)))
        assert torch.equal(hvd.synchronize(h), torch.full((i + 1,), expected))


def test_allreduce_larger_than_the_fusion_buffer():
    n = 5 * 1024 * 1024  # 20 MiB of float32
    tensor = torch.full((n,), float(RANK + 1))
    result = hvd.allreduce(tensor, op=hvd.Sum)
    assert torch.equal(result, torch.full((n,), float(SIZE * (SIZE + 1) // 2)))


def test_allreduce_of_empty_and_scalar_tensors():
    assert hvd.allreduce(torch.zeros(0, 3), op=hvd.Sum).shape == (0, 3)
    scalar = hvd.allreduce(torch.tensor(float(RANK)), op=hvd.Sum)
    assert scalar.shape == () and scalar.item() == sum(range(SIZE))


def test_allreduce_fp16_compression_restores_the_dtype():
    tensor = torch.full((8,), 0.5 * (RANK + 1), dtype=torch.float32)
    result = hvd.allreduce(tensor, op=hvd.Sum,
                           compression=hvd.Compression.fp16)
    assert result.dtype == torch.float32
    assert torch.allclose(result, torch.full((8,), 0.5 * SIZE * (SIZE + 1) / 2))


def test_grouped_allreduce_forms():
    tensors = [torch.full((3,), float(RANK)), torch.full((2, 2), 2.0 * RANK)]
    total = float(sum(range(SIZE)))
    out = hvd.grouped_allreduce(tensors, op=hvd.Sum)
    assert torch.equal(out[0], torch.full((3,), total))
    assert torch.equal(out[1], torch.full((2, 2), 2 * total))
    out = hvd.synchronize(hvd.grouped_allreduce_async(tensors, op=hvd.Max))
    assert torch.equal(out[0], torch.full((3,), float(SIZE - 1)))
    copies = [t.clone() for t in tensors]
    returned = hvd.grouped_allreduce_(copies, op=hvd.Sum)
    assert returned[0] is copies[0]
    assert torch.equal(copies[0], torch.full((3,), total))
    copies = [t.clone() for t in tensors]
    hvd.synchronize(hvd.grouped_allreduce_async_(copies, op=hvd.Average))
    assert torch.allclose(copies[1], torch.full((2, 2), 2 * total / SIZE))


def test_grouped_allreduce_mixed_dtypes():
    out = hvd.grouped_allreduce([torch.ones(2, dtype=torch.int32),
                                 torch.ones(3, dtype=torch.float64)],
                                op=hvd.Sum)
    assert out[0].dtype == torch.int32 and out[0].tolist() == [SIZE] * 2
    assert out[1].dtype == torch.float64 and out[1].tolist() == [SIZE] * 3


# ------------------------------------------------------------ allgather --


def filled(shape, rank, dtype):
    """A tensor whose value says which rank it came from (bool: parity)."""
    if dtype == torch.bool:
        return torch.full(shape, rank % 2 == 0)
    return torch.full(shape, rank + 1).to(dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_allgather_concatenates_variable_first_dimensions(dtype):
    tensor = filled((rows_of(RANK), 3), RANK, dtype)
    result = hvd.allgather(tensor)
    expected = torch.cat([filled((rows_of(r), 3), r, dtype)
                          for r in range(SIZE)])
    assert result.dtype == dtype
    assert torch.equal(result, expected)


def test_allgather_async_and_grouped():
    t = torch.full((2,), float(RANK))
    gathered = hvd.synchronize(hvd.allgather_async(t))
    assert gathered.tolist() == [float(r) for r in range(SIZE) for _ in "ab"]
    a, b = hvd.grouped_allgather([t, torch.full((1, 2), RANK)])
    assert torch.equal(a, gathered)
    assert b.tolist() == [[r, r] for r in range(SIZE)]
    a2, = hvd.synchronize(hvd.grouped_allgather_async([t]))
    assert torch.equal(a2, gathered)


def test_allgather_of_a_rank_with_zero_rows():
    rows = 0 if RANK == 0 else 2
    result = hvd.allgather(torch.full((rows, 2), RANK))
    assert result.shape == (2 * (SIZE - 1), 2)


# ------------------------------------------------------------ broadcast --

@pytest.mark.parametrize("dtype,root", list(itertools.product(
    ALL_DTYPES, range(3))))
def test_broadcast_every_dtype_from_every_root(dtype, root):
    if root >= SIZE:
        pytest.skip("root beyond this job's size")
    tensor = filled((4, 5), RANK, dtype)
    result = hvd.broadcast(tensor, root_rank=root)
    assert torch.equal(result, filled((4, 5), root, dtype))
    assert torch.equal(tensor, filled((4, 5), RANK, dtype))


def test_broadcast_in_place_and_async():
    tensor = torch.full((3,), float(RANK))
    assert hvd.broadcast_(tensor, root_rank=1) is tensor
    assert torch.equal(tensor, torch.full((3,), 1.0))
    tensor = torch.full((3,), float(RANK))
    result = hvd.synchronize(hvd.broadcast_async(tensor, root_rank=0))
    assert torch.equal(result, torch.zeros(3))
    hvd.synchronize(hvd.broadcast_async_(tensor, root_rank=SIZE - 1))
    assert torch.equal(tensor, torch.full((3,), float(SIZE - 1)))


def test_broadcast_parameters_from_state_dict_and_named_parameters():
    torch.manual_seed(RANK)
    model = torch.nn.Linear(4, 3)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    gathered = hvd.allgather(model.weight.detach().reshape(1, -1))
    assert all(torch.equal(gathered[0], g) for g in gathered)
    torch.manual_seed(RANK + 10)
    other = torch.nn.Linear(4, 3)
    hvd.broadcast_parameters(list(other.named_parameters()), root_rank=1)
    gathered = hvd.allgather(other.bias.detach().reshape(1, -1))
    assert all(torch.equal(gathered[1], g) for g in gathered)


def test_broadcast_and_allgather_objects():
    obj = {"rank": RANK, "payload": list(range(RANK))} if RANK == 1 else None
    assert hvd.broadcast_object(obj, root_rank=1) == {"rank": 1,
                                                      "payload": [0]}
    everyone = hvd.allgather_object(("r", RANK, "x" * RANK))
    assert everyone == [("r", r, "x" * r) for r in range(SIZE)]


# ------------------------------------------------------------- alltoall --

def test_alltoall_even_split():
    tensor = torch.arange(SIZE * 2).reshape(SIZE * 2, 1) + 100 * RANK
    result = hvd.alltoall(tensor)
    expected = torch.cat([torch.arange(2 * RANK, 2 * RANK + 2).reshape(2, 1)
                          + 100 * r for r in range(SIZE)])
    assert torch.equal(result, expected)


def test_alltoall_with_splits_returns_received_splits():
    # Rank r sends (r + j + 1) rows to rank j.
    splits = [RANK + j + 1 for j in range(SIZE)]
    tensor = torch.full((sum(splits), 2), float(RANK))
    result, received = hvd.alltoall(tensor, splits=splits)
    assert received.tolist() == [r + RANK + 1 for r in range(SIZE)]
    expected = torch.cat([torch.full((r + RANK + 1, 2), float(r))
                          for r in range(SIZE)])
    assert torch.equal(result, expected)
    out, rec = hvd.synchronize(hvd.alltoall_async(
        tensor, splits=torch.tensor(splits, dtype=torch.int32)))
    assert torch.equal(out, expected) and torch.equal(rec, received)


def test_alltoall_splits_of_floats_are_refused_by_type_on_every_rank():
    # Values that would be valid splits: the dtype alone decides, so every
    # rank refuses and none is left waiting in a collective.
    tensor = torch.zeros(SIZE, 1)
    for bad in (torch.ones(SIZE, dtype=torch.float32),
                torch.ones(SIZE, dtype=torch.bool)):
        with pytest.raises(ValueError, match="splits must be a tensor of "
                           "integers"):
            hvd.alltoall(tensor, splits=bad)
    # Still in step: the next collective meets.
    result, received = hvd.alltoall(tensor,
                                    splits=torch.ones(SIZE, dtype=torch.int64))
    assert result.shape == (SIZE, 1) and received.tolist() == [1] * SIZE


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_alltoall_every_dtype(dtype):
    # Rank r sends j + 1 rows of its value to rank j.
    splits = [j + 1 for j in range(SIZE)]
    tensor = filled((sum(splits), 2), RANK, dtype)
    result, received = hvd.alltoall(tensor, splits=splits)
    assert result.dtype == dtype
    assert torch.equal(result, torch.cat([filled((RANK + 1, 2), r, dtype)
                                          for r in range(SIZE)]))
    assert received.tolist() == [RANK + 1] * SIZE


def test_integer_average_truncates_toward_zero_like_horovod():
    # Horovod averages integers as a Sum scaled by 1/size in float64, then
    # truncated: only rank 0 holds -1, so the mean is -1/SIZE -> 0 (floor
    # division would give -1); 2*SIZE+1 on rank 0 averages to 2.
    values = [-1, 2 * SIZE + 1, 7]
    for dtype in (torch.int32, torch.int64):
        t = torch.tensor(values if RANK == 0 else [0, 0, 7], dtype=dtype)
        assert hvd.allreduce(t, op=hvd.Average).tolist() == [0, 2, 7]
        both = hvd.grouped_allreduce([t, t.clone()], op=hvd.Average)
        assert [b.tolist() for b in both] == [[0, 2, 7]] * 2
        rows = torch.tensor(values[:1] if RANK == 0 else [0],
                            dtype=dtype).repeat(SIZE, 1)
        assert hvd.reducescatter(rows, op=hvd.Average).tolist() == [[0]]


# -------------------------------------------------------- reducescatter --

@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
@pytest.mark.parametrize("dtype", NUMERIC)
def test_reducescatter_uneven_rows(op, dtype):
    rows = 2 * SIZE + 1  # first rank gets one row more
    base = torch.arange(rows * 2).reshape(rows, 2) % 7  # sums fit in int8
    tensor = (base + RANK).to(dtype)
    result = hvd.reducescatter(tensor, op=op)
    full = reference_sum = sum(base + r for r in range(SIZE)).double()
    if op == hvd.Average:
        full = reference_sum / SIZE
        if not dtype.is_floating_point:
            full = torch.trunc(full)
    counts = [rows // SIZE + (1 if r < rows % SIZE else 0)
              for r in range(SIZE)]
    start = sum(counts[:RANK])
    assert result.shape == (counts[RANK], 2)
    assert close(result, full[start:start + counts[RANK]], dtype)


def test_reducescatter_defaults_to_average_and_takes_factors():
    tensor = torch.full((SIZE, 3), float(RANK + 1))
    mean = sum(r + 1 for r in range(SIZE)) / SIZE
    assert torch.allclose(hvd.reducescatter(tensor),
                          torch.full((1, 3), mean))
    scaled = hvd.synchronize(hvd.reducescatter_async(
        tensor, op=hvd.Sum, prescale_factor=2.0, postscale_factor=3.0))
    assert torch.allclose(scaled, torch.full((1, 3), 6.0 * mean * SIZE))


def test_grouped_reducescatter():
    a = torch.full((SIZE, 2), 1.0)
    b = torch.full((2 * SIZE,), 2.0)
    out = hvd.grouped_reducescatter([a, b], op=hvd.Sum)
    assert torch.equal(out[0], torch.full((1, 2), float(SIZE)))
    assert torch.equal(out[1], torch.full((2,), 2.0 * SIZE))
    out = hvd.synchronize(hvd.grouped_reducescatter_async([a, b]))
    assert torch.equal(out[1], torch.full((2,), 2.0))


# ------------------------------------------------------ barrier, join ---

def test_barrier():
    for _ in range(3):
        hvd.barrier()


def test_join_lets_the_last_rank_reduce_alone_and_reports_it():
    last = SIZE - 1
    if RANK != last:
        assert hvd.join() == last
    else:
        # Every other rank has joined (or will): they contribute zeros.
        result = hvd.allreduce(torch.ones(4), op=hvd.Sum, name="join.alone")
        assert torch.equal(result, torch.ones(4))
        assert hvd.join() == last

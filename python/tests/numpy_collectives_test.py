"""hvd.numpy on every rank of an hvdrun job: the collectives of hvd.torch on
numpy arrays, with the same names and arguments."""

import itertools

import numpy as np
import pytest

import hvd.numpy as hvd

hvd.init()
RANK = hvd.rank()
SIZE = hvd.size()

DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64,
          np.float16, np.float32, np.float64]


def value(rank, shape=(5, 4)):
    return (np.arange(np.prod(shape)).reshape(shape) % 2) + rank + 1


@pytest.mark.parametrize("dtype,op", list(itertools.product(
    DTYPES, [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product])))
def test_allreduce_every_dtype_and_op(dtype, op):
    stack = np.stack([value(r).astype(np.float64) for r in range(SIZE)])
    expected = {hvd.Sum: stack.sum(0), hvd.Min: stack.min(0),
                hvd.Max: stack.max(0), hvd.Product: stack.prod(0),
                hvd.Average: stack.mean(0)}[op]
    if op == hvd.Average and np.dtype(dtype).kind in "iu":
        expected = np.trunc(stack.sum(0) / SIZE)
    tensor = value(RANK).astype(dtype)
    result = hvd.allreduce(tensor, op=op)
    assert result.dtype == np.dtype(dtype)
    tol = 1e-2 if dtype == np.float16 else 1e-9
    assert np.allclose(result.astype(np.float64), expected, rtol=tol)
    assert np.array_equal(tensor, value(RANK).astype(dtype))


def test_allreduce_bool_and_in_place():
    flags = np.array([RANK == 0, True, False])
    assert hvd.allreduce(flags, op=hvd.Max).tolist() == [True, True, False]
    assert hvd.allreduce(flags, op=hvd.Min).tolist() == [False, True, False]
    a = np.full(4, float(RANK))
    assert hvd.allreduce_(a, op=hvd.Sum) is a
    assert a.tolist() == [float(sum(range(SIZE)))] * 4
    with pytest.raises(ValueError, match="read-only"):
        frozen = np.ones(2)
        frozen.flags.writeable = False
        hvd.allreduce_(frozen)


def test_results_are_writable_arrays():
    out = hvd.allgather(np.ones((2, 2)))
    out += 1
    assert out.sum() == 2 * 2 * 2 * SIZE


def test_grouped_allreduce_and_async():
    a, b = hvd.grouped_allreduce([np.ones(2), np.full(3, 2.0)], op=hvd.Sum)
    assert a.tolist() == [SIZE] * 2 and b.tolist() == [2.0 * SIZE] * 3
    handle = hvd.allreduce_async(np.ones(3), op=hvd.Sum)
    assert hvd.synchronize(handle).tolist() == [SIZE] * 3


def test_allgather_broadcast_alltoall_reducescatter():
    gathered = hvd.allgather(np.full((RANK + 1, 2), RANK, dtype=np.int32))
    assert gathered.shape == (sum(r + 1 for r in range(SIZE)), 2)
    assert gathered[:, 0].tolist() == [r for r in range(SIZE)
                                       for _ in range(r + 1)]
    assert hvd.broadcast(np.array([RANK]), root_rank=1).tolist() == [1]
    b = np.array([float(RANK)])
    hvd.broadcast_(b, root_rank=SIZE - 1)
    assert b.tolist() == [SIZE - 1]
    out = hvd.alltoall(np.arange(SIZE) + 10 * RANK)
    assert out.tolist() == [RANK + 10 * r for r in range(SIZE)]
    out, received = hvd.alltoall(np.full(SIZE + 1, RANK),
                                 splits=[2] + [1] * (SIZE - 1))
    assert received.tolist() == ([2] if RANK == 0 else [1]) * SIZE
    rs = hvd.reducescatter(np.ones((SIZE, 3)), op=hvd.Sum)
    assert rs.tolist() == [[float(SIZE)] * 3]
    g1, g2 = hvd.grouped_allgather([np.ones(1), np.zeros((1, 2))])
    assert g1.shape == (SIZE,) and g2.shape == (SIZE, 2)


def test_alltoall_splits_of_floats_are_refused_by_type_on_every_rank():
    with pytest.raises(ValueError, match="splits must be an array of "
                       "integers"):
        hvd.alltoall(np.zeros(SIZE), splits=np.ones(SIZE, dtype=np.float32))
    # Still in step: the next collective meets.
    out, received = hvd.alltoall(np.zeros(SIZE),
                                 splits=np.ones(SIZE, np.int32))
    assert out.shape == (SIZE,) and received.tolist() == [1] * SIZE


def test_a_removed_process_set_leaves_nothing_cached():
    # A job that adds and removes sets as it goes must not fill the binding's
    # cache of call options with sets that are gone.
    from hvd import _engine
    before = len(_engine._options_cache)
    for _ in range(3):
        subset = hvd.add_process_set([0])
        if RANK == 0:
            hvd.allreduce(np.ones(2), name="in_subset", process_set=subset)
            assert len(_engine._options_cache) > before
        hvd.remove_process_set(subset)
        assert len(_engine._options_cache) == before


def test_objects_barrier_and_join():
    assert hvd.broadcast_object({"x": RANK}, root_rank=0) == {"x": 0}
    assert hvd.allgather_object(RANK * "a") == [r * "a" for r in range(SIZE)]
    hvd.barrier()
    assert hvd.join() in range(SIZE)


def test_errors_raise_on_every_rank():
    with pytest.raises(hvd.HvdInternalError):
        hvd.allreduce(np.ones(RANK + 1), name="numpy.mismatch")
    with pytest.raises(ValueError, match="not supported"):
        hvd.allreduce(np.ones(2, dtype=np.complex128))

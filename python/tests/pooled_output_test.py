"""Out-of-place outputs hvd allocates for the frameworks (hvd_empty_like,
4 MiB and more on the host): right values, the input untouched, writable,
the caller's dtype (bool included), and freed memory reused, on every rank
of an hvdrun job."""

import numpy as np
import pytest
import torch

import hvd.numpy as hnp
import hvd.torch as ht
from hvd import _engine

ht.init()
RANK = ht.rank()
SIZE = ht.size()
BIG = _engine.POOLED_OUTPUT_BYTES // 4 + 3  # float32 elements, odd shape


def test_torch_allreduce_out_of_place_large():
    x = torch.arange(BIG, dtype=torch.float32) + RANK
    y = ht.allreduce(x, op=ht.Sum, name="pooled.torch")
    expected = torch.arange(BIG, dtype=torch.float32) * SIZE + sum(
        range(SIZE))
    assert y.dtype == torch.float32 and y.shape == x.shape
    assert torch.equal(y, expected)
    assert torch.equal(x, torch.arange(BIG, dtype=torch.float32) + RANK)
    assert y.data_ptr() != x.data_ptr()
    y.add_(1)  # writable, owned by torch
    assert y[0].item() == sum(range(SIZE)) + 1


def test_torch_allreduce_out_of_place_reuses_freed_output():
    x = torch.ones(BIG)
    seen = set()
    for _ in range(4):
        y = ht.allreduce(x, op=ht.Sum, name="pooled.reuse")
        assert torch.equal(y, torch.full((BIG,), float(SIZE)))
        seen.add(y.data_ptr())
        del y  # back to the pool
    assert len(seen) <= 2, seen


def test_torch_allreduce_average_and_bool_large():
    x = torch.full((BIG,), float(RANK))
    y = ht.allreduce(x, op=ht.Average, name="pooled.avg")
    assert torch.allclose(y, torch.full((BIG,), (SIZE - 1) / 2))
    b = torch.zeros(_engine.POOLED_OUTPUT_BYTES + 5, dtype=torch.bool)
    b[RANK] = True
    r = ht.allreduce(b, op=ht.Max, name="pooled.bool")
    assert r.dtype == torch.bool
    assert r[:SIZE].all() and r.sum().item() == SIZE


def test_torch_broadcast_out_of_place_large():
    x = torch.full((BIG,), float(RANK))
    y = ht.broadcast(x, root_rank=0, name="pooled.bcast")
    assert torch.equal(y, torch.zeros(BIG))
    assert torch.equal(x, torch.full((BIG,), float(RANK)))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_numpy_allreduce_out_of_place_large(dtype):
    n = _engine.POOLED_OUTPUT_BYTES // np.dtype(dtype).itemsize + 1
    if dtype == np.bool_:
        a = np.zeros(n, dtype=dtype)
        a[RANK] = True
        r = hnp.allreduce(a, op=hnp.Max, name="pooled.np.bool")
        assert r.dtype == np.bool_ and r.sum() == SIZE
        return
    a = (np.arange(n) % 7 + RANK).astype(dtype)
    r = hnp.allreduce(a, op=hnp.Sum, name="pooled.np.%s" % np.dtype(dtype))
    expected = ((np.arange(n) % 7) * SIZE + sum(range(SIZE))).astype(dtype)
    assert r.dtype == np.dtype(dtype)
    assert np.array_equal(r, expected)
    assert np.array_equal(a, (np.arange(n) % 7 + RANK).astype(dtype))
    assert r.flags.writeable
    r[0] = 1

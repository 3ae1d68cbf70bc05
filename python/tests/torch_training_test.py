"""Training with hvd.torch on every rank of an hvdrun job (2 or 3 ranks):
DistributedOptimizer against one process on the concatenated batches,
overlap of communication with backward, compression, gradient accumulation,
groups, optimizer-state broadcast, join with uneven data, SyncBatchNorm.

Run by hvdrun_driver.py; every rank runs these tests in the same order.
"""

import warnings

import pytest
import torch
import torch.nn.functional as F

import hvd.torch as hvd
from hvd import _engine, _fastpath

hvd.init()
RANK = hvd.rank()
SIZE = hvd.size()
BATCH = 4  # per rank
torch.set_num_threads(1)


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 1))


def global_batch(step):
    """The job's batch of `step`; rank r trains on rows r*BATCH..."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(SIZE * BATCH, 4, generator=g)
    return x, torch.sin(x.sum(1, keepdim=True))


def my_slice(t):
    return t[RANK * BATCH:(RANK + 1) * BATCH]


def distributed(opt_factory, model, **opt_kwargs):
    """A DistributedOptimizer over opt_factory's optimizer of `model`."""
    return hvd.DistributedOptimizer(opt_factory(model.parameters()),
                                    named_parameters=model.named_parameters(),
                                    **opt_kwargs)


def backward_on_my_slice(model, step=0):
    """Backward of the loss on this rank's slice of global_batch(step)."""
    x, y = global_batch(step)
    F.mse_loss(model(my_slice(x)), my_slice(y)).backward()


def train_steps(model, opt, steps):
    """`steps` steps of `opt`, each on this rank's slice of the batch."""
    for step in range(steps):
        opt.zero_grad()
        backward_on_my_slice(model, step)
        opt.step()


def train_distributed(opt_factory, steps=5, seed=0, **opt_kwargs):
    model = make_model(seed + RANK)  # different on purpose: broadcast fixes
    opt = distributed(opt_factory, model, **opt_kwargs)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    train_steps(model, opt, steps)
    return model, opt


def train_reference(opt_factory, steps=5, seed=0):
    """One process on the concatenation of every rank's batches."""
    model = make_model(seed)  # rank 0's initial model
    opt = opt_factory(model.parameters())
    for step in range(steps):
        x, y = global_batch(step)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    return model


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def assert_same_parameters(a, b, atol=1e-5):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=atol), (name, (p - q).abs().max())


def assert_equal_on_every_rank(model):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = hvd.allgather(flat.reshape(1, -1))
    for r in range(SIZE):
        assert torch.equal(gathered[r], gathered[0]), "rank %d differs" % r


def test_job_has_at_least_two_ranks():
    assert SIZE >= 2, "run under hvdrun -np 2 or more"


def test_data_parallel_equals_one_process_on_the_concatenated_batches():
    model, _ = train_distributed(sgd)
    assert_same_parameters(model, train_reference(sgd))
    assert_equal_on_every_rank(model)


def test_data_parallel_with_adam_and_predivide_factor():
    def adam(params):
        return torch.optim.Adam(params, lr=0.01)
    model, _ = train_distributed(adam, gradient_predivide_factor=float(SIZE))
    assert_same_parameters(model, train_reference(adam), atol=1e-4)


def test_wrapped_optimizer_keeps_its_class_and_state_dict():
    model = make_model()
    opt = distributed(sgd, model)
    assert isinstance(opt, torch.optim.SGD)
    assert opt.state_dict()["param_groups"][0]["lr"] == 0.1


def test_allreduces_are_enqueued_while_backward_is_still_running():
    model = make_model()
    opt = distributed(sgd, model)
    x, y = global_batch(0)
    inp = my_slice(x).clone().requires_grad_()
    # The input's gradient is the last thing backward computes: by then the
    # later layers' gradients must already be on their way.
    in_flight = []  # the parameters whose reduction is on its way
    inp.register_hook(lambda g: in_flight.append(
        [k.param for k in opt._handles if hasattr(k, "param")]))
    F.mse_loss(model(inp), my_slice(y)).backward()
    last_layer = list(model[4].parameters())
    assert in_flight, "input gradient hook did not run"
    assert len(in_flight[0]) >= 4  # weights and biases of layers 2 and 4
    assert all(any(p is q for q in in_flight[0]) for p in last_layer)
    opt.step()
    assert not opt._handles


def test_fp16_compression_trains_close_to_fp32():
    model, _ = train_distributed(sgd, compression=hvd.Compression.fp16)
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())
    assert_same_parameters(model, train_reference(sgd), atol=2e-2)
    assert_equal_on_every_rank(model)


@pytest.mark.parametrize("groups", [2, "layers"])
def test_grouped_gradients_give_the_same_result(groups):
    model = make_model(RANK)
    if groups == "layers":
        groups = [list(model[0].parameters()), list(model[2].parameters())]
    opt = distributed(sgd, model, groups=groups)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    train_steps(model, opt, 5)
    assert_same_parameters(model, train_reference(sgd))


def test_backward_passes_per_step_accumulates_locally():
    model = make_model(RANK)
    opt = distributed(sgd, model, backward_passes_per_step=2)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    half = BATCH // 2
    for step in range(5):
        x, y = global_batch(step)
        x, y = my_slice(x), my_slice(y)
        opt.zero_grad()
        for part in (slice(0, half), slice(half, BATCH)):
            # Two half-batch means, halved: the gradient of the full mean.
            (F.mse_loss(model(x[part]), y[part]) / 2).backward()
        opt.step()
    assert_same_parameters(model, train_reference(sgd))


def test_too_many_backward_passes_raise_and_synchronize_recovers():
    model = make_model()
    opt = distributed(sgd, model)
    backward_on_my_slice(model)
    with pytest.raises(AssertionError, match="backward_passes_per_step"):
        backward_on_my_slice(model)
    opt.synchronize()
    assert not opt._handles


@pytest.mark.parametrize("c_module", [True, False])
def test_a_failed_gradient_raises_from_step_and_leaves_no_reduction_behind(
        c_module):
    """A gradient whose shape differs between ranks fails its reduction on
    every rank: step() raises naming it, after every other gradient of the
    step was reduced and released, so the same names can be reduced again
    at once. The same with the C module off."""
    was = _fastpath.set_enabled(c_module)
    try:
        failed_step_leaves_nothing_behind()
    finally:
        _fastpath.set_enabled(was)


def failed_step_leaves_nothing_behind():
    good = torch.nn.Parameter(torch.ones(3))
    bad = torch.nn.Parameter(torch.ones(4 if RANK == 0 else 5))
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD([good, bad], lr=1.0),
        named_parameters=[("good", good), ("bad", bad)])
    pending = set(_engine._pending)
    (good.sum() * (RANK + 1) + bad.sum()).backward()
    with pytest.raises(hvd.HvdError, match="grad.bad"):
        opt.step()
    assert not opt._handles
    # Nothing of the step is left waiting to be synchronized.
    assert set(_engine._pending) <= pending
    mean = sum(range(1, SIZE + 1)) / SIZE
    assert good.grad.tolist() == [mean] * 3  # reduced before the failure
    # Both names are free: an op still in flight under one would be refused.
    for name in ("grad.good", "grad.bad"):
        assert hvd.allreduce_(torch.ones(2), op=hvd.Sum,
                              name=name).tolist() == [SIZE] * 2


def test_zero_grad_between_backward_and_step_is_refused():
    model = make_model()
    opt = distributed(sgd, model)
    backward_on_my_slice(model)
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.step()
    opt.zero_grad()


def test_synchronize_then_clip_then_step_in_skip_synchronize():
    model = make_model(RANK)
    opt = distributed(sgd, model)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    backward_on_my_slice(model)
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with opt.skip_synchronize():
            opt.step()
    assert_equal_on_every_rank(model)


def test_unused_parameters_get_zero_gradients_and_do_not_hang():
    torch.manual_seed(0)
    used, unused = torch.nn.Linear(3, 1), torch.nn.Linear(3, 1)
    params = list(used.named_parameters(prefix="used")) + \
        list(unused.named_parameters(prefix="unused"))
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD([p for _, p in params], lr=0.1),
        named_parameters=params)
    used(torch.ones(2, 3)).sum().backward()
    opt.step()
    assert torch.equal(unused.weight.grad, torch.zeros(1, 3))


@pytest.mark.parametrize("sparse_as_dense", [True, False])
def test_sparse_gradients_are_averaged(sparse_as_dense):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 3, sparse=True)
    reference = emb.weight.detach().clone()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(emb.parameters(), lr=1.0),
        named_parameters=emb.named_parameters(),
        sparse_as_dense=sparse_as_dense)
    # Rank r looks up rows r and 9: row 9's gradient is averaged over all.
    emb(torch.tensor([RANK, 9])).sum().backward()
    opt.step()
    expected = reference.clone()
    for r in range(SIZE):
        expected[r] -= 1.0 / SIZE
    expected[9] -= 1.0
    assert torch.allclose(emb.weight.detach(), expected, atol=1e-6)


@pytest.mark.parametrize("sparse_as_dense", [True, False])
def test_sparse_gradients_stay_sparse_for_the_wrapped_optimizer(
        sparse_as_dense):
    # SparseAdam takes sparse gradients only: reduced dense or not, the
    # gradient it sees after synchronize() is sparse, as in Horovod.
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 3, sparse=True)
    opt = hvd.DistributedOptimizer(
        torch.optim.SparseAdam(list(emb.parameters()), lr=0.1),
        named_parameters=emb.named_parameters(),
        sparse_as_dense=sparse_as_dense)
    emb(torch.tensor([RANK, 9])).sum().backward()
    opt.synchronize()
    assert emb.weight.grad.is_sparse
    dense = emb.weight.grad.to_dense()
    assert torch.allclose(dense[9], torch.ones(3))
    with opt.skip_synchronize():
        opt.step()


def test_step_after_synchronize_warns_in_horovods_words():
    model = torch.nn.Linear(2, 1)
    opt = distributed(sgd, model)
    model(torch.ones(1, 2)).sum().backward()
    opt.synchronize()
    with pytest.warns(UserWarning, match="optimizer.step\\(\\) called "
                      "without optimizer.skip_synchronize\\(\\)"):
        opt.step()


def test_named_parameters_must_be_unique_and_complete():
    model = make_model()
    named = list(model.named_parameters())
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(sgd(model.parameters()),
                                 named_parameters=named + named[:1])
    with pytest.raises(ValueError, match="not named"):
        hvd.DistributedOptimizer(sgd(model.parameters()),
                                 named_parameters=named[1:])


def test_bad_groups_and_ops_are_refused_when_wrapping():
    model = make_model()
    first = list(model[0].parameters())
    with pytest.raises(ValueError, match="only one of groups"):
        hvd.DistributedOptimizer(sgd(model.parameters()),
                                 named_parameters=model.named_parameters(),
                                 groups=[first, first[:1]])
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.DistributedOptimizer(sgd(model.parameters()),
                                 named_parameters=model.named_parameters(),
                                 op="mean")


def test_sum_op_adds_gradients():
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(),
                                   op=hvd.Sum)
    model(torch.ones(1, 2)).sum().backward()  # gradient 1 on every rank
    opt.step()
    assert torch.equal(model.weight.detach(), torch.full((1, 2), -float(SIZE)))


# ------------------------------------------------- broadcast of state ---

def test_broadcast_optimizer_state_restores_root_state_on_every_rank():
    model = make_model(0)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    if RANK == 0:  # only the root has trained: the others are fresh
        for step in range(3):
            x, y = global_batch(step)
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
        opt.param_groups[0]["lr"] = 0.123
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    def digest():
        out = []
        for p in model.parameters():
            for key, value in sorted(opt.state[p].items()):
                out.append((key, value.tolist() if torch.is_tensor(value)
                            else value))
        return out, opt.param_groups[0]["lr"]
    everyone = hvd.allgather_object(digest())
    assert all(d == everyone[0] for d in everyone)
    assert everyone[0][1] == 0.123
    assert opt.state[next(model.parameters())]["step"].item() == 3
    # And training goes on identically everywhere.
    x, y = global_batch(9)
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
    assert_equal_on_every_rank(model)


def test_broadcast_optimizer_state_of_a_distributed_optimizer():
    model, opt = train_distributed(sgd, steps=2)
    if RANK != 0:
        for state in opt.state.values():
            state["momentum_buffer"].fill_(7.0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    buffers = torch.cat([opt.state[p]["momentum_buffer"].reshape(-1)
                         for p in model.parameters()])
    gathered = hvd.allgather(buffers.reshape(1, -1))
    assert all(torch.equal(g, gathered[0]) for g in gathered)


def test_broadcast_optimizer_state_of_a_fresh_optimizer_leaves_zero_grads():
    # Horovod's contract: after the call every parameter that requires a
    # gradient has one (zeros), a frozen one has none, and the parameters
    # themselves are not changed (hvd takes no step, even with weight decay).
    model = make_model(0)
    frozen = model[0].bias
    frozen.requires_grad_(False)
    before = [p.detach().clone() for p in model.parameters()]
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                        weight_decay=0.1),
        named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert frozen.grad is None
    for p, old in zip(model.parameters(), before):
        assert torch.equal(p, old)
        if p is not frozen:
            assert p.grad is not None and not p.grad.any()


# ---------------------------------------------------------------- join ---

def test_join_with_uneven_numbers_of_batches():
    model = make_model(RANK)
    opt = distributed(sgd, model)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    train_steps(model, opt, 2 + 2 * RANK)  # rank r has 2 + 2r batches
    last = hvd.join()
    assert last == SIZE - 1
    hvd.broadcast_parameters(model.state_dict(), root_rank=last)
    assert_equal_on_every_rank(model)


# -------------------------------------------------------- SyncBatchNorm ---

def test_sync_batch_norm_equals_batch_norm_on_the_whole_batch():
    torch.manual_seed(5)
    full = torch.randn(SIZE * BATCH, 3, 6) * 2 + 1
    weights = torch.randn(SIZE * BATCH, 3, 6)
    sbn = hvd.SyncBatchNorm(3)
    bn = torch.nn.BatchNorm1d(3)
    with torch.no_grad():
        for m in (sbn, bn):
            m.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
            m.bias.copy_(torch.tensor([0.0, -1.0, 3.0]))

    x = my_slice(full).clone().requires_grad_()
    out = sbn(x)
    (out * my_slice(weights)).sum().backward()

    xf = full.clone().requires_grad_()
    outf = bn(xf)
    (outf * weights).sum().backward()

    assert torch.allclose(out, my_slice(outf), atol=1e-5)
    assert torch.allclose(x.grad, my_slice(xf.grad), atol=1e-4)
    assert torch.allclose(sbn.running_mean, bn.running_mean, atol=1e-5)
    assert torch.allclose(sbn.running_var, bn.running_var, atol=1e-5)
    wgrad = hvd.allreduce(sbn.weight.grad, op=hvd.Sum)
    assert torch.allclose(wgrad, bn.weight.grad, atol=1e-4)
    sbn.eval()
    bn.eval()
    assert torch.allclose(sbn(x), bn(x), atol=1e-5)

"""hvd.torch.elastic on every rank of a fixed hvdrun job (2 or 3 ranks):
TorchState's commit, restore and sync of models, optimizers, samplers and
objects; hvd.elastic.run resetting the real job (shutdown, init) after a
failure or a host update and resuming from the right state; the ranks
agreeing on host updates; ElasticSampler's partitions; hvd.numpy.elastic.

Run by hvdrun_driver.py; every rank runs these tests in the same order.
"""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hvd.numpy as hnp
import hvd.torch as hvd
from hvd.elastic import _job

hvd.init()
RANK = hvd.rank()
SIZE = hvd.size()
torch.set_num_threads(1)


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 1))


def train_step(model, optimizer, step):
    """One step on this rank's batch of `step`."""
    g = torch.Generator().manual_seed(100 * step + RANK)
    x = torch.randn(4, 3, generator=g)
    optimizer.zero_grad()
    F.mse_loss(model(x), x.sum(1, keepdim=True).sin()).backward()
    optimizer.step()


def snapshot(state_dict):
    return copy.deepcopy(state_dict)


def assert_same(a, b):
    """Equal nested state dicts (tensors compared exactly)."""
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        assert a == b


def on_every_rank(obj):
    """Every rank's obj, in rank order."""
    return hvd.allgather_object(obj)


def test_restore_brings_back_the_last_commit_of_everything():
    model = make_model(RANK)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    state = hvd.elastic.TorchState(model, optimizer, epoch=1, history=[])
    train_step(model, optimizer, 0)
    state.epoch = 2
    state.history.append("a")
    state.commit()
    committed = (snapshot(model.state_dict()),
                 snapshot(optimizer.state_dict()))
    train_step(model, optimizer, 1)
    state.epoch = 3
    state.history.append("b")
    state.restore()
    assert_same(model.state_dict(), committed[0])
    assert_same(optimizer.state_dict(), committed[1])
    assert optimizer.state_dict()["state"][0]["step"] == 1
    assert (state.epoch, state.history) == (2, ["a"])
    assert state.model is model and state.optimizer is optimizer


def test_sync_gives_every_rank_rank_zeros_state_and_commits_it():
    model = make_model(RANK)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_step(model, optimizer, RANK)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer,
                                   epoch=10 + RANK, tag="rank%d" % RANK)
    state.sync()
    everyone = on_every_rank((model.state_dict(), optimizer.state_dict(),
                              state.epoch, state.tag))
    for other in everyone[1:]:
        assert_same(other, everyone[0])
    assert (state.epoch, state.tag) == (10, "rank0")
    synced = snapshot(model.state_dict())
    train_step(model, optimizer, 7)
    state.epoch = 99
    state.restore()
    assert_same(model.state_dict(), synced)
    assert state.epoch == 10


def test_assigning_a_new_model_tracks_and_commits_it():
    state = hvd.elastic.TorchState(make_model(0), batch=0)
    replacement = make_model(1)
    state.model = replacement
    committed = snapshot(replacement.state_dict())
    with torch.no_grad():
        for p in replacement.parameters():
            p.add_(1.0)
    state.restore()
    assert state.model is replacement
    assert_same(replacement.state_dict(), committed)


def distributed_training(steps, fail_at=None):
    """Trains a DistributedOptimizer model `steps` steps under
    hvd.elastic.run, committing every 2 steps; the first call raises
    HvdAbortedError on every rank after step `fail_at`. Returns (model,
    what each call started from, sizes seen by the reset callback)."""
    model = make_model(RANK)  # different per rank: the sync unifies them
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, step=0)
    starts, resets = [], []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        starts.append(state.step)
        while state.step < steps:
            train_step(model, optimizer, state.step)
            state.step += 1
            if state.step % 2 == 0:
                state.commit()
            if state.step == fail_at and len(starts) == 1:
                raise hvd.HvdAbortedError("simulated: a peer was lost")
        return "trained"

    assert train(state) == "trained"
    return model, starts, resets


def test_run_resumes_from_the_last_commit_after_a_failed_collective():
    reference, starts, resets = distributed_training(6)
    assert (starts, resets) == ([0], [])
    model, starts, resets = distributed_training(6, fail_at=3)
    assert starts == [0, 2]  # step 3 was not committed
    assert resets == [SIZE]
    assert hvd.is_initialized() and (hvd.rank(), hvd.size()) == (RANK, SIZE)
    # The re-run steps 2..5 give what the uninterrupted run gave (up to
    # the order of the sums, which the fusion of the allreduces may change).
    for name, value in model.state_dict().items():
        assert torch.allclose(value, reference.state_dict()[name],
                              rtol=1e-5, atol=1e-6), name
    everyone = on_every_rank(model.state_dict())
    for other in everyone[1:]:
        assert_same(other, everyone[0])


@pytest.mark.parametrize("skip_sync", [False, True])
def test_hosts_updated_resets_without_restoring(skip_sync):
    state = hvd.elastic.TorchState(batch=0)
    starts, resets = [], []
    state.register_reset_callbacks([lambda: resets.append(1)])

    @hvd.elastic.run
    def train(state):
        starts.append(state.batch)
        if len(starts) == 1:
            state.batch = 5 + RANK  # not committed
            raise hvd.HostsUpdatedInterrupt(skip_sync=skip_sync)
        return state.batch

    result = train(state)
    assert starts == [0, result] and resets == [1]
    # Kept, not restored; rank 0's unless only hosts were removed.
    assert result == (5 + RANK if skip_sync else 5)
    assert hvd.is_initialized()


def test_a_mismatch_propagates_without_a_restore_or_reset():
    state = hvd.elastic.TorchState(batch=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(1)])

    @hvd.elastic.run
    def train(state):
        state.batch = 1
        hvd.allreduce(torch.ones(2 + RANK), name="elastic.mismatch")

    with pytest.raises(hvd.HvdInvalidArgumentError, match="elastic.mismatch"):
        train(state)
    assert state.batch == 1 and resets == []


def simulate_core(monkeypatch, updates):
    """An elastic job whose launcher announced `updates` [(seq, added,
    removed)] to this rank."""
    def host_updates(after_seq=0):
        newer = [u for u in updates if u[0] > after_seq]
        return _job.HostUpdates(max([u[0] for u in updates] or [0]),
                                any(u[1] for u in newer),
                                any(u[2] for u in newer))
    monkeypatch.setattr(_job, "enabled", lambda: True)
    monkeypatch.setattr(_job, "host_updates", host_updates)


def test_every_rank_acts_on_rank_zeros_view_of_host_updates(monkeypatch):
    updates = []
    simulate_core(monkeypatch, updates)
    state = hvd.elastic.TorchState(batch=0)
    state.check_host_updates()
    if RANK == 0:  # it reached rank 0 only
        updates.append((1, True, False))
    with pytest.raises(hvd.HostsUpdatedInterrupt) as raised:
        state.commit()
    assert raised.value.skip_sync is False
    if RANK != 0:  # not yet at rank 0: nobody acts on it
        updates.append((2, False, True))
    state.check_host_updates()
    if RANK == 0:
        updates.append((2, False, True))
    with pytest.raises(hvd.HostsUpdatedInterrupt) as raised:
        state.check_host_updates()
    assert raised.value.skip_sync is True
    state.check_host_updates()


def test_run_resets_once_for_a_host_update_at_a_commit(monkeypatch):
    updates = []
    simulate_core(monkeypatch, updates)
    state = hvd.elastic.TorchState(batch=0)
    starts = []

    @hvd.elastic.run
    def train(state):
        starts.append(state.batch)
        while state.batch < 4:
            state.batch += 1
            if state.batch == 2 and not updates:
                updates.append((1, True, False))
            state.commit()
        return state.batch

    assert train(state) == 4
    assert starts == [0, 2]


class Dataset(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return i

    def __len__(self):
        return self.n


def test_sampler_partitions_the_dataset_across_ranks():
    n = 10 * SIZE + 1
    sampler = hvd.elastic.ElasticSampler(Dataset(n), seed=3)
    parts = on_every_rank(list(sampler))
    assert [len(p) for p in parts] == [len(sampler)] * SIZE
    assert len(sampler) == -(-n // SIZE)
    assert sorted(set(sum(parts, []))) == list(range(n))
    orders = on_every_rank(sampler.remaining_indices)
    assert all(o == orders[0] for o in orders)
    assert orders[0] != list(range(n))  # shuffled
    sampler.set_epoch(1)
    assert sampler.remaining_indices != orders[0]
    plain = hvd.elastic.ElasticSampler(Dataset(n), shuffle=False)
    assert list(plain)[:3] == [RANK, RANK + SIZE, RANK + 2 * SIZE]


def test_recorded_batches_are_left_out_after_a_reset():
    n, batch = 8 * SIZE, 2
    sampler = hvd.elastic.ElasticSampler(Dataset(n))
    loader = torch.utils.data.DataLoader(Dataset(n), batch_size=batch,
                                         sampler=sampler)
    seen = []
    for batch_idx, data in enumerate(loader):
        seen += data.tolist()
        sampler.record_batch(batch_idx, batch)
        if batch_idx == 1:
            break
    assert sampler.processed_num == 2 * batch * SIZE
    sampler.reset()
    assert len(sampler) == 8 - 2 * batch
    everyone_seen = sum(on_every_rank(seen), [])
    left = sum(on_every_rank(list(sampler)), [])
    assert sorted(everyone_seen + left) == list(range(n))


def test_reset_repartitions_what_is_left_for_another_size(monkeypatch):
    import hvd.torch.elastic.sampler as sampler_module
    sampler = hvd.elastic.ElasticSampler(Dataset(20))
    sampler.record_batch(0, 3)  # 3 * SIZE done
    sampler.reset()
    left = sampler.remaining_indices
    assert len(left) == 20 - 3 * SIZE
    for new_size in (1, SIZE + 1):
        parts = []
        for new_rank in range(new_size):
            monkeypatch.setattr(sampler_module, "size", lambda: new_size)
            monkeypatch.setattr(sampler_module, "rank", lambda: new_rank)
            sampler.reset()
            parts.append(list(sampler))
        assert sampler.num_replicas == new_size
        assert sorted(set(sum(parts, []))) == sorted(left)
        assert all(len(p) == -(-len(left) // new_size) for p in parts)


def test_sampler_state_dict_round_trips():
    sampler = hvd.elastic.ElasticSampler(Dataset(30), seed=5)
    sampler.set_epoch(2)
    sampler.record_batch(0, 2)
    sampler.record_indices([1, 2])
    other = hvd.elastic.ElasticSampler(Dataset(30), seed=5)
    other.load_state_dict(sampler.state_dict())
    assert other.state_dict() == sampler.state_dict()
    sampler.reset()
    assert list(other) == list(sampler)
    other.load_state_dict({"epoch": 2, "processed_num": 2 * SIZE})
    assert other.processed_indices == set()
    assert [i for i in other.remaining_indices if i not in (1, 2)] \
        == sampler.remaining_indices


def test_sampler_in_a_torch_state_commits_restores_and_syncs():
    n, batch = 6 * SIZE, 2
    sampler = hvd.elastic.ElasticSampler(Dataset(n))
    state = hvd.elastic.TorchState(sampler=sampler)
    sampler.record_batch(0, batch)
    state.commit()
    sampler.record_batch(1, batch)
    state.restore()
    assert sampler.processed_num == batch * SIZE
    # Indices recorded on each rank: the sync merges them everywhere.
    sampler.set_epoch(1)
    mine = sampler.get_indices(0, batch) if list(sampler) else []
    sampler.record_indices(mine)
    state.sync()
    everyone = set(sum(on_every_rank(mine), []))
    assert len(everyone) == batch * SIZE
    assert sampler.processed_indices == everyone
    assert len(sampler) == (n - batch * SIZE) // SIZE
    assert not everyone & set(sum(on_every_rank(list(sampler)), []))


def test_numpy_object_state_resumes_from_rank_zeros_commit():
    state = hnp.elastic.ObjectState(hnp.broadcast_object, hnp.rank,
                                    weights=np.full(3, float(RANK)), step=0)
    starts = []

    @hnp.elastic.run
    def train(state):
        starts.append(state.step)
        while state.step < 3:
            state.weights = state.weights + hnp.allreduce(
                np.ones(3), op=hnp.Sum, name="elastic.np.%d" % state.step)
            state.step += 1
            state.commit()
            if len(starts) == 1:
                raise hnp.HvdAbortedError("simulated")
        return state.weights

    weights = train(state)
    assert starts == [0, 1]
    assert weights.tolist() == [3.0 * SIZE] * 3

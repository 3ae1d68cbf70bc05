"""hvd.torch.elastic (also horovod.torch.elastic, and hvd.elastic after
`import hvd.torch as hvd`): elastic training with PyTorch, Horovod's API.

    import hvd.torch as hvd
    hvd.init()
    model, optimizer = ..., hvd.DistributedOptimizer(...)
    sampler = hvd.elastic.ElasticSampler(dataset)
    loader = torch.utils.data.DataLoader(dataset, batch_size=B,
                                         sampler=sampler)

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            for batch_idx, (x, y) in enumerate(loader):
                ...                                  # one training step
                state.sampler.record_batch(batch_idx, B)
                state.commit()                       # or every few batches
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)
            state.commit()

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler,
                                   epoch=0)
    state.register_reset_callbacks([rescale_lr])
    train(state)

See hvd.elastic for what run does on which error, and docs/python.md.
"""

from hvd.elastic import ObjectState, State, run, run_fn  # noqa: F401
from hvd.torch.elastic.sampler import ElasticSampler  # noqa: F401
from hvd.torch.elastic.state import TorchState  # noqa: F401

__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run",
           "run_fn"]

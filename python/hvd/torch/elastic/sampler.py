"""ElasticSampler: a DistributedSampler that remembers what the job has
processed in the current epoch and shares out the rest again when the
number of workers changes."""

import math
import random

import torch.utils.data

from hvd.basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Partitions a dataset across the ranks, like DistributedSampler, and
    after a reset of the job across the new set of ranks, leaving out the
    samples the job has processed this epoch.

    Each epoch has one order of the dataset's indices (shuffled with
    seed + epoch, the same on every rank); the indices not yet processed
    are padded to a multiple of the number of ranks by repeating from their
    start, and rank r takes every size()-th of them from position r.

    Say what was processed in one of two ways (one of them per epoch):
      - record_batch(batch_idx, batch_size) after each batch, on every rank:
        the job has processed batch_size * size() more samples of the
        order (the ranks take batches in step);
      - record_indices(indices): these dataset indices are done; sync()
        gathers every rank's.
    Then, with the sampler in a TorchState: commit() saves that record,
    restore() brings the committed one back, and the sync after a reset
    gives every rank rank 0's epoch and record and the indices recorded on
    any rank, and repartitions. Call set_epoch(next) at the end of an epoch
    (not the start), so a partial epoch is not processed again.

    Arguments:
        dataset: a dataset of constant length.
        shuffle: shuffle the indices each epoch (default True).
        seed: the shuffle's seed, the same on every rank (default 0).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.processed_indices = set()
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch`: a new order, nothing processed."""
        self.epoch = epoch
        self.processed_num = 0
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Every rank has processed one more batch of `batch_size`."""
        self.processed_num += batch_size * self.num_replicas

    def record_indices(self, indices):
        """The dataset indices `indices` have been processed."""
        self.processed_indices.update(int(i) for i in indices)

    def get_indices(self, batch_idx, batch_size):
        """The indices of this rank's batch `batch_idx` of the current
        iteration, for record_indices."""
        start = batch_idx * batch_size
        return self.indices[start:start + batch_size]

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num,
                "processed_indices": set(self.processed_indices)}

    def load_state_dict(self, state_dict):
        """Takes a state_dict() (also Horovod's forms, which lack one of
        the two records) and repartitions."""
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict.get("processed_num", 0)
        self.processed_indices = set(state_dict.get("processed_indices", ()))
        self.reset()

    def reset(self):
        """Partitions what is left of the epoch among hvd.size() ranks."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = [i for i in order[self.processed_num:]
                                  if i not in self.processed_indices]
        self.num_samples = int(math.ceil(len(self.remaining_indices)
                                         / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        padded = list(self.remaining_indices)
        while padded and len(padded) < self.total_size:
            padded += padded[:self.total_size - len(padded)]
        self.indices = padded[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self):
        return self.num_samples

"""Inputs the hvd.torch tests share: values every rank can recompute for
every other rank."""

import torch


def value(rank, shape=(17, 3)):
    """Small, rank-dependent, element-varying values: exact in every dtype,
    and their Product over 3 ranks fits in int8."""
    base = torch.arange(int(torch.tensor(shape).prod())).reshape(shape) % 2
    return base + rank + 1


def rows_of(rank):
    return rank + 2  # first dimensions differ between ranks

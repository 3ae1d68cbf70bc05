"""Gradient compression for allreduce (Horovod's Compression.none / .fp16),
and how the grouped collectives apply it to a list of tensors."""

import torch


class Compressor:
    """Interface: compress before the collective, decompress after."""

    @staticmethod
    def compress(tensor):
        """Returns (compressed tensor, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16, restoring their type after."""

    @staticmethod
    def compress(tensor):
        dtype = tensor.dtype
        if dtype.is_floating_point and dtype != torch.float16:
            return tensor.type(torch.float16), dtype
        return tensor, dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is not None and tensor.dtype != ctx:
            return tensor.type(ctx)
        return tensor


class Compression:
    """Compression algorithms for hvd.allreduce and DistributedOptimizer."""
    none = NoneCompressor
    fp16 = FP16Compressor


def _apply_grouped(function, compression, tensors, *args):
    """Runs the grouped autograd `function` on `tensors` compressed by
    `compression`: function.apply(*args, *compressed). Returns its results
    decompressed, as a list ([] for no tensors, without calling it)."""
    if not tensors:
        return []
    compressed, cctxs = zip(*[compression.compress(t) for t in tensors])
    out = function.apply(*args, *compressed)
    return [compression.decompress(t, c) for t, c in zip(out, cctxs)]

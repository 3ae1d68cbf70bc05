"""SyncBatchNorm: batch normalization with statistics over the whole job."""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from hvd.basics import Sum
from hvd.process_sets import global_process_set
from hvd.torch.mpi_ops import allreduce


class SyncBatchNorm(_BatchNorm):
    """Applies batch normalization over N-dimensional input (N >= 2) using
    the mean and variance of the batch of every rank of `process_set` taken
    together, as if the ranks' batches were one.

    In training the per-rank count, sum and sum of squares of each channel
    are allreduced (one small tensor per forward); the backward pass goes
    through the same differentiable allreduce, so gradients are those of the
    job-wide batch. In eval mode, or with one rank, it is BatchNorm.

    Arguments are those of torch.nn.BatchNorm*d.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine,
                         track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)"
                             .format(input.dim()))

    def _momentum(self):
        if self.momentum is not None:
            return self.momentum
        # Cumulative moving average, as torch's BatchNorm does.
        return 1.0 / float(self.num_batches_tracked)

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
        use_batch_stats = self.training or not self.track_running_stats
        if not use_batch_stats or self.process_set.size() == 1:
            return F.batch_norm(
                input, self.running_mean, self.running_var, self.weight,
                self.bias, use_batch_stats, self._momentum()
                if self.training and self.track_running_stats else 0.0,
                self.eps)
        return self._sync_forward(input)

    def _sync_forward(self, input):
        channels = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        stat_dtype = torch.float64 if input.dtype == torch.float64 \
            else torch.float32
        x = input.to(stat_dtype)
        count = torch.full((1,), float(input.numel() // channels),
                           dtype=stat_dtype)
        local = torch.cat([count, x.sum(dims), (x * x).sum(dims)])
        total = allreduce(local, op=Sum, name=None,
                          process_set=self.process_set)
        n = total[0]
        mean = total[1:1 + channels] / n
        var = (total[1 + channels:] / n - mean * mean).clamp_min(0.0)

        if self.track_running_stats and self.running_mean is not None:
            with torch.no_grad():
                m = self._momentum()
                unbiased = var * (n / (n - 1)) if n > 1 else var
                self.running_mean.mul_(1 - m).add_(
                    mean.to(self.running_mean.dtype), alpha=m)
                self.running_var.mul_(1 - m).add_(
                    unbiased.to(self.running_var.dtype), alpha=m)

        shape = [1, channels] + [1] * (input.dim() - 2)
        out = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        out = out.to(input.dtype)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out


"""DistributedOptimizer: averages gradients over the job while backward runs.

A hook on each parameter's gradient accumulator enqueues that gradient's
allreduce the moment backward has produced it, so communication overlaps the
rest of backward and the core fuses the gradients that arrive together.
step() (or synchronize()) waits for all of them, then applies the wrapped
optimizer's update.
"""

import contextlib
import warnings

import torch

from hvd import _lib
from hvd.basics import Adasum, Average, Sum  # noqa: F401
from hvd.process_sets import global_process_set
from hvd.torch.compression import Compression
from hvd.torch.mpi_ops import (allreduce_async_, grouped_allreduce_async_,
                               sparse_allreduce_async, synchronize as
                               _synchronize)


class _DistributedOptimizer(torch.optim.Optimizer):
    """Methods mixed into a subclass of the wrapped optimizer's class (see
    DistributedOptimizer), so isinstance() and state_dict() behave as for the
    original optimizer. `super(self.__class__, self)` is that class."""

    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step, op, gradient_predivide_factor,
                 groups, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._op = op
        self._gradient_predivide_factor = gradient_predivide_factor
        self._sparse_as_dense = sparse_as_dense
        self._made_dense = set()  # params whose sparse grad went dense
        self._process_set = process_set
        self.backward_passes_per_step = backward_passes_per_step

        all_params = [p for g in self.param_groups for p in g["params"]]
        self._parameter_names = self._names(named_parameters, all_params)
        # Each gradient's operation name, made once (a step uses them all).
        self._grad_names = {p: "grad.%s" % name
                            for p, name in self._parameter_names.items()}
        self._requires_update = [p for p in all_params if p.requires_grad]
        self._group_of = self._make_groups(groups)
        self._allreduce_delay = {p: backward_passes_per_step
                                 for p in self._requires_update}
        # key (a parameter, or a tuple of them for a group) ->
        #   (handle or None while not started, per-parameter contexts)
        self._handles = {}
        self._group_ready = {}
        self._grad_accs = []
        self._synchronized = False
        self._should_synchronize = True
        if process_set.included():
            self._register_hooks()

    # ------------------------------------------------------------ set-up --

    @staticmethod
    def _names(named_parameters, all_params):
        if named_parameters is None:
            return {p: "noname.%d" % i for i, p in enumerate(all_params)}
        named = list(named_parameters)
        if any(not isinstance(x, tuple) or len(x) != 2 for x in named):
            raise ValueError("named_parameters should be a sequence of "
                             "(name, parameter) tuples, usually "
                             "model.named_parameters()")
        names = [name for name, _ in named]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError("Parameter names in named_parameters must be "
                             "unique. Found duplicates: %s"
                             % ", ".join(duplicates))
        by_param = {p: name for name, p in named}
        unnamed = [i for i, p in enumerate(all_params) if p not in by_param]
        if unnamed:
            raise ValueError("named_parameters was specified, but %d of the "
                             "optimizer's parameters (positions %s) are not "
                             "named in it" % (len(unnamed), unnamed[:10]))
        return {p: by_param[p] for p in all_params}

    def _make_groups(self, groups):
        """parameter -> tuple of the parameters reduced with it."""
        if not groups:
            return {}
        params = self._requires_update
        if isinstance(groups, int):
            if groups <= 0:
                raise ValueError("groups must be a positive number of "
                                 "groups or a list of parameter lists")
            per = -(-len(params) // groups)
            lists = [params[i:i + per] for i in range(0, len(params), per)]
        elif isinstance(groups, list):
            lists = [list(g) for g in groups]
            for g in lists:
                for p in g:
                    if not isinstance(p, torch.Tensor):
                        raise ValueError("groups must be a list of lists of "
                                         "torch.Tensor parameters")
        else:
            raise ValueError("groups must be an int or a list of parameter "
                             "lists, not %s" % type(groups).__name__)
        group_of = {}
        for g in lists:
            members = tuple(p for p in g if p.requires_grad)
            for p in members:
                group_of[p] = members
        return group_of

    def _register_hooks(self):
        for p in self._requires_update:
            # The AccumulateGrad node of p: its hook runs once p.grad holds
            # this backward pass's gradient.
            grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
            grad_acc.register_hook(self._make_hook(p))
            self._grad_accs.append(grad_acc)

    # ----------------------------------------------------- communication --

    def _make_hook(self, p):
        def hook(*_):
            if self._allreduce_delay[p] <= 0:
                raise AssertionError(
                    "Gradients were computed more than "
                    "backward_passes_per_step times before call to step(). "
                    "Increase backward_passes_per_step to accumulate "
                    "gradients locally.")
            if p.grad is not None and p.grad.requires_grad:
                raise AssertionError("hvd.DistributedOptimizer does not "
                                     "support gradients that require grad "
                                     "(create_graph=True)")
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] > 0:
                return
            group = self._group_of.get(p)
            if group is None:
                self._handles[p] = self._allreduce_grad_async(p)
                return
            ready = self._group_ready.setdefault(group, set())
            ready.add(p)
            if len(ready) == len(group):
                self._handles[group] = self._grouped_allreduce_async(group)
        return hook

    def _scale_factors(self):
        if self._op == Average:
            # The core divides by the set's size for Average; predividing
            # splits that division around the reduction.
            return (1.0 / self._gradient_predivide_factor,
                    self._gradient_predivide_factor)
        return 1.0, 1.0

    def _dense_grad(self, p):
        if p.grad is None:
            # Not used in this step's forward: contribute zeros, as every
            # rank must take part in every gradient's reduction.
            p.grad = torch.zeros_like(p)
        elif p.grad.is_sparse:
            # sparse_as_dense: reduced dense, made sparse again at
            # synchronize() (the wrapped optimizer may take sparse only).
            p.grad = p.grad.to_dense()
            self._made_dense.add(p)
        return p.grad

    def _allreduce_grad_async(self, p):
        name = self._grad_names[p]
        if p.grad is not None and p.grad.is_sparse \
                and not self._sparse_as_dense:
            return sparse_allreduce_async(p.grad, name, self._op,
                                          self._process_set), None
        grad = self._dense_grad(p)
        compressed, cctx = self._compression.compress(grad)
        pre, post = self._scale_factors()
        handle = allreduce_async_(compressed, name=name, op=self._op,
                                  prescale_factor=pre,
                                  postscale_factor=post,
                                  process_set=self._process_set)
        return handle, [(p, compressed, cctx)]

    def _grouped_allreduce_async(self, group):
        grads = [self._dense_grad(p) for p in group]
        compressed = [self._compression.compress(g) for g in grads]
        pre, post = self._scale_factors()
        name = "grad_group.%s" % self._parameter_names[group[0]]
        handle = grouped_allreduce_async_(
            [c for c, _ in compressed], name=name, op=self._op,
            prescale_factor=pre, postscale_factor=post,
            process_set=self._process_set)
        return handle, [(p, c, cctx) for p, (c, cctx) in zip(group,
                                                             compressed)]

    def _start_missing(self):
        """Starts the reductions backward did not start: parameters unused
        in this step's forward, or counted fewer than
        backward_passes_per_step times."""
        groups = []
        for p in self._requires_update:
            group = self._group_of.get(p)
            if group is None:
                entry = self._handles.get(p)
                if entry is None or entry[0] is None:
                    self._handles[p] = self._allreduce_grad_async(p)
            elif group not in self._handles and group not in groups:
                groups.append(group)
        for group in groups:
            self._handles[group] = self._grouped_allreduce_async(group)

    def synchronize(self):
        """Waits for every gradient's allreduce and writes the averaged
        gradients into p.grad. step() calls it unless inside
        skip_synchronize()."""
        if not self._process_set.included():
            self._synchronized = True
            return
        self._start_missing()
        try:
            for handle, contexts in self._handles.values():
                if contexts is None:  # sparse: handle is a waiting callable
                    continue
                _synchronize(handle)
                for p, compressed, cctx in contexts:
                    result = self._compression.decompress(compressed, cctx)
                    if result is not p.grad:
                        with torch.no_grad():
                            p.grad.copy_(result)
            for key, (handle, contexts) in self._handles.items():
                if contexts is None:
                    key.grad = handle()
            for p in self._made_dense:
                p.grad = p.grad.to_sparse()
        finally:
            for p in self._requires_update:
                self._allreduce_delay[p] = self.backward_passes_per_step
            self._handles.clear()
            self._group_ready.clear()
            self._made_dense.clear()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Inside this context step() does not synchronize: use it after an
        explicit synchronize() (e.g. to clip the averaged gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn(
                    "optimizer.step() called without "
                    "optimizer.skip_synchronize() after "
                    "optimizer.synchronize(): the gradients are reduced a "
                    "second time. Wrap step() in skip_synchronize().")
            self.synchronize()
        self._synchronized = False
        result = super(self.__class__, self).step(closure)
        _metrics_step()
        return result

    def zero_grad(self, set_to_none=False):
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but "
                "before optimizer.step() or optimizer.synchronize(). This is "
                "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(set_to_none)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes


_metrics_step_fn = None  # the library's hvd_metrics_step, looked up once


def _metrics_step():
    """Tells the core a training step ended (hvdrun --metrics-port shows the
    step time); nothing when the library predates hvd_metrics_step."""
    global _metrics_step_fn
    if _metrics_step_fn is None:
        _metrics_step_fn = _lib.optional("hvd_metrics_step") or (lambda: 0)
    _metrics_step_fn()


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps a torch optimizer so that step() applies gradients averaged (or
    reduced with `op`) over the ranks of `process_set`.

    Arguments:
        optimizer: the torch.optim.Optimizer to wrap.
        named_parameters: model.named_parameters(), to name each gradient's
            reduction (recommended; names must be unique).
        compression: Compression.none or Compression.fp16.
        backward_passes_per_step: backward passes accumulated locally before
            the gradients are reduced.
        op: Average (default), Sum, ... (Adasum raises HvdNotSupportedError).
        gradient_predivide_factor: with Average, divide by this before the
            reduction and by size/this after.
        groups: an int (split the parameters into that many groups) or a
            list of parameter lists; each group is reduced as one operation
            once all its gradients are ready.
        sparse_as_dense: reduce sparse gradients as dense tensors.
        process_set: the ranks that share gradients.
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with "
                         "op != Average")
    if num_groups:
        warnings.warn("num_groups is deprecated, use groups instead",
                      DeprecationWarning)
        if groups is None:
            groups = num_groups
    namespace = {k: v for k, v in _DistributedOptimizer.__dict__.items()
                 if k not in ("__dict__", "__weakref__")}
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               namespace)
    wrapped = cls(optimizer.param_groups, named_parameters, compression,
                  backward_passes_per_step, op, gradient_predivide_factor,
                  groups, sparse_as_dense, process_set)
    wrapped.defaults = dict(optimizer.defaults)
    for p, state in optimizer.state.items():
        wrapped.state[p] = state
    return wrapped

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

from hvd import _engine, _fastpath, _lib
from hvd.basics import Adasum, Average, Sum, resolve_op  # noqa: F401
from hvd.exceptions import HvdError
from hvd.process_sets import global_process_set
from hvd.torch.compression import Compression
from hvd.torch.mpi_ops import (allreduce_async_, grouped_allreduce_async_,
                               sparse_allreduce_async)


class _Gradient:
    """A parameter's reduction as its hook sees it on every step: plain
    attributes, where dicts keyed by the parameter would cost a hash each
    (torch hashes a tensor in Python), several times per gradient."""
    __slots__ = ("param", "name", "delay", "group", "options")

    def __init__(self, param, name, delay):
        self.param = param
        self.name = name  # the operation's name
        self.delay = delay  # backward passes left before the reduction
        self.group = None  # the _Group it is reduced with, if any
        # Its in-place allreduce's options (_fastpath.in_place_options),
        # made at its first reduction: the same every step.
        self.options = None


class _Group:
    """Parameters reduced as one grouped operation once all are ready."""
    __slots__ = ("members", "name", "ready")

    def __init__(self, members, name):
        self.members = members  # _Gradients
        self.name = name
        self.ready = 0  # members whose hook has fired this step


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
        self._requires_update = [p for p in all_params if p.requires_grad]
        # One _Gradient per parameter to update, found by the parameter's
        # id only while setting up (a dict keyed by the tensor itself would
        # hash it in Python).
        self._gradients = [_Gradient(p, "grad.%s" % self._parameter_names[p],
                                     backward_passes_per_step)
                           for p in self._requires_update]
        self._gradient_of = {id(g.param): g for g in self._gradients}
        self._groups = self._make_groups(groups)
        self._prescale, self._postscale = self._scale_factors()
        # A _Gradient or _Group -> (handle, per-parameter contexts: () when
        # the result is the gradient itself, None for a sparse reduction,
        # whose handle is a callable giving the result).
        self._handles = {}
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
        """The _Groups; each member _Gradient's `group` is set."""
        if not groups:
            return []
        params = self._requires_update
        if isinstance(groups, int):
            if groups <= 0:
                raise ValueError("groups must be a positive number of "
                                 "groups or a list of parameter lists")
            per = -(-len(params) // groups)
            lists = [params[i:i + per] for i in range(0, len(params), per)]
        elif isinstance(groups, list):
            lists = [list(g) for g in groups]
            seen = set()
            for g in lists:
                for p in g:
                    if not isinstance(p, torch.Tensor):
                        raise ValueError("groups must be a list of lists of "
                                         "torch.Tensor parameters")
                    if id(p) in seen:
                        raise ValueError("a parameter can appear in only one "
                                         "of groups")
                    seen.add(id(p))
        else:
            raise ValueError("groups must be an int or a list of parameter "
                             "lists, not %s" % type(groups).__name__)
        made = []
        for g in lists:
            members = [self._gradient_of[id(p)] for p in g
                       if id(p) in self._gradient_of]
            if not members:
                continue
            group = _Group(members, "grad_group.%s" % self._parameter_names[
                members[0].param])
            for member in members:
                member.group = group
            made.append(group)
        return made

    def _register_hooks(self):
        for p in self._requires_update:
            # The AccumulateGrad node of p: its hook runs once p.grad holds
            # this backward pass's gradient.
            grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
            grad_acc.register_hook(self._make_hook(p))
            self._grad_accs.append(grad_acc)

    # ----------------------------------------------------- communication --

    def _make_hook(self, p):
        gradient = self._gradient_of[id(p)]

        def hook(*_):
            if gradient.delay <= 0:
                raise AssertionError(
                    "Gradients were computed more than "
                    "backward_passes_per_step times before call to step(). "
                    "Increase backward_passes_per_step to accumulate "
                    "gradients locally.")
            grad = p.grad
            if grad is not None and grad.requires_grad:
                raise AssertionError("hvd.DistributedOptimizer does not "
                                     "support gradients that require grad "
                                     "(create_graph=True)")
            gradient.delay -= 1
            if gradient.delay > 0:
                return
            group = gradient.group
            if group is None:
                self._handles[gradient] = self._allreduce_grad_async(
                    gradient)
                return
            group.ready += 1
            if group.ready == len(group.members):
                self._handles[group] = self._grouped_allreduce_async(group)
        if gradient.group is None and self._compression is Compression.none:
            # Each step's submission in one C call where the C module is
            # there; this hook for the rest.
            return _fastpath.gradient_hook(gradient, hook, self._handles)
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

    def _allreduce_grad_async(self, gradient):
        p, name = gradient.param, gradient.name
        grad = p.grad
        if grad is not None and grad.is_sparse and not self._sparse_as_dense:
            return sparse_allreduce_async(grad, name, self._op,
                                          self._process_set), None
        if grad is None or grad.is_sparse:
            grad = self._dense_grad(p)
        if self._compression is Compression.none:
            # The per-gradient path of every step, in as few frames as the
            # fast path allows.
            options = gradient.options
            if options is None:
                options = gradient.options = _fastpath.in_place_options(
                    name, self._op, self._prescale, self._postscale,
                    self._process_set)
            handle = _fastpath.submit_kept(grad, options)
            if handle is not NotImplemented:
                # Reduced in place: nothing to undo at synchronize.
                return handle, ()
        compressed, cctx = self._compression.compress(grad)
        handle = allreduce_async_(compressed, name=name, op=self._op,
                                  prescale_factor=self._prescale,
                                  postscale_factor=self._postscale,
                                  process_set=self._process_set)
        return handle, [(p, compressed, cctx)]

    def _grouped_allreduce_async(self, group):
        params = [g.param for g in group.members]
        grads = [self._dense_grad(p) for p in params]
        compressed = [self._compression.compress(g) for g in grads]
        handle = grouped_allreduce_async_(
            [c for c, _ in compressed], name=group.name, op=self._op,
            prescale_factor=self._prescale, postscale_factor=self._postscale,
            process_set=self._process_set)
        return handle, [(p, c, cctx) for p, (c, cctx) in zip(params,
                                                             compressed)]

    def _start_missing(self):
        """Starts the reductions backward did not start: parameters unused
        in this step's forward, or counted fewer than
        backward_passes_per_step times."""
        groups = []
        for gradient in self._gradients:
            group = gradient.group
            if group is None:
                if gradient not in self._handles:
                    self._handles[gradient] = self._allreduce_grad_async(
                        gradient)
            elif group not in self._handles and group not in groups:
                groups.append(group)
        for group in groups:
            self._handles[group] = self._grouped_allreduce_async(group)

    def synchronize(self):
        """Waits for every gradient's allreduce and writes the averaged
        gradients into p.grad; if any failed, raises the first failure once
        all are over. step() calls it unless inside skip_synchronize()."""
        if not self._process_set.included():
            self._synchronized = True
            return
        self._start_missing()
        try:
            failure = self._wait_for_every_reduction()
            if failure is not None:
                raise failure
            for p in self._made_dense:
                p.grad = p.grad.to_sparse()
        finally:
            for gradient in self._gradients:
                gradient.delay = self.backward_passes_per_step
            for group in self._groups:
                group.ready = 0
            self._handles.clear()
            self._made_dense.clear()
        self._synchronized = True

    def _wait_for_every_reduction(self):
        """Waits for every reduction of the step, writing each result where
        it belongs; returns the first failure (an HvdError), or None. All
        are over when it returns: no gradient is written to after
        synchronize() has raised."""
        failure = None
        for key, (handle, contexts) in self._handles.items():
            try:
                if contexts is None:  # sparse: a callable giving the result
                    key.param.grad = handle()
                    continue
                _engine.synchronize(handle)
            except HvdError as e:
                failure = failure or e
                continue
            for p, compressed, cctx in contexts:
                result = self._compression.decompress(compressed, cctx)
                if result is not p.grad:
                    with torch.no_grad():
                        p.grad.copy_(result)
        return failure

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
        for gradient in self._gradients:
            gradient.delay = passes


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
    op = resolve_op(op, None)  # an unknown op is refused here, at once
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

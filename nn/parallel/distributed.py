"""``DistributedDataParallel``: torch.nn.parallel.DistributedDataParallel over tritensor.comm.

Why it exists: data-parallel training as PyTorch users write it. Each rank holds a replica of
the module; at construction rank 0's parameters and buffers are copied to every rank (after
checking that every rank has the same names, shapes and dtypes, so a mismatch is named
instead of corrupting memory); during backward the gradients are averaged over the group in
buckets that start communicating while backward still runs (:mod:`.reducer`), so after
``loss.backward()`` every rank holds the same mean gradient and optimizers stay in step.
"""
from __future__ import annotations

import contextlib
import json

import numpy as np

from ...autograd.graph import AccumulateGrad
from ...autograd.grad_mode import is_grad_enabled, no_grad
from ...comm import collectives, process_group as _pg
from ...comm.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from ...core.tensor import Tensor
from ..modules.module import Module
from .reducer import Reducer

__all__ = ["DistributedDataParallel"]


def _tensors_in(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors_in(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors_in(o)


def _reachable_params(outputs) -> set:
    """ids of the leaves whose AccumulateGrad the outputs' graphs reach."""
    seen, found = set(), set()
    stack = [t.grad_fn for t in _tensors_in(outputs) if t.grad_fn is not None]
    for t in _tensors_in(outputs):
        if t.grad_fn is None and t.requires_grad:
            found.add(id(t))
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            found.add(id(node.variable))
            continue
        stack.extend(fn for fn, _ in node.next_functions if fn is not None)
    return found


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training over ``process_group`` (default: the world).

    ``bucket_cap_mb``: bucket size in MiB (the first bucket is at most 1 MiB);
    ``broadcast_buffers``: copy rank 0's buffers to every rank at each forward;
    ``find_unused_parameters``: find the parameters a forward did not use and mark them
    ready, so backward completes (those unused on every rank keep their ``.grad``);
    ``gradient_as_bucket_view``: ``.grad`` tensors become views of the bucket buffers
    (no copy after communication); ``static_graph``: the set of unused parameters found
    in the first iteration is reused later. ``device_ids``: None, or one device (the
    module's own). A second backward within one iteration raises; use :meth:`no_sync`
    to accumulate gradients locally over several backwards.
    """

    def __init__(self, module, device_ids=None, process_group=None, bucket_cap_mb=25, broadcast_buffers=True,
                 find_unused_parameters=False, gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: 'module' must be a tritensor.nn.Module, "
                            f"got {type(module).__name__}")
        if device_ids is not None and (not isinstance(device_ids, (list, tuple)) or len(device_ids) != 1):
            raise ValueError(f"DistributedDataParallel: 'device_ids' must be None or a list of one device "
                             f"(single-device modules only), got {device_ids!r}")
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) or not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: 'bucket_cap_mb' must be a number > 0, got {bucket_cap_mb!r}")
        pg = _pg._resolve(process_group, "DistributedDataParallel")
        if pg is None:
            raise ValueError("DistributedDataParallel: this rank is not a member of 'process_group'")
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        self.module = module
        self.process_group = process_group
        self.device_ids = device_ids
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.static_graph = bool(static_graph)
        self.require_backward_grad_sync = True
        self._world = pg.size()
        self._rank = pg.rank()
        self._src = pg.global_ranks[0]
        self._static_unused = None
        self._check_same_everywhere()
        with no_grad():
            for _, t in list(module.named_parameters()) + list(module.named_buffers()):
                if t is not None:
                    collectives.broadcast(t.detach(), src=self._src, group=process_group)
        self._params = [p for _, p in named]
        self._param_names = [n for n, _ in named]
        self.reducer = Reducer(self._params, self._param_names, process_group, self._world, pg.timeout,
                               max(1, int(bucket_cap_mb * 1024 * 1024)), self.find_unused_parameters or
                               self.static_graph, self.gradient_as_bucket_view, allreduce_hook)

    # -- construction -------------------------------------------------------------------
    def _check_same_everywhere(self):
        """Every rank must have the same parameter and buffer names, shapes and dtypes; each
        rank learns all ranks' lists (two all_gathers) and raises naming the first difference."""
        sig = [[n, list(t.shape), str(t.dtype)] for n, t in list(self.module.named_parameters()) +
               list(self.module.named_buffers()) if t is not None]
        raw = np.frombuffer(json.dumps(sig).encode(), dtype=np.uint8)
        lengths = [np.zeros(1, np.int64) for _ in range(self._world)]
        collectives.all_gather(lengths, np.array([raw.size], np.int64), group=self.process_group)
        width = int(max(int(x[0]) for x in lengths))
        mine = np.zeros(width, np.uint8)
        mine[:raw.size] = raw
        everyone = [np.zeros(width, np.uint8) for _ in range(self._world)]
        collectives.all_gather(everyone, mine, group=self.process_group)
        sigs = [json.loads(bytes(e[:int(n[0])]).decode()) for e, n in zip(everyone, lengths)]
        ref = sigs[0]
        for r, other in enumerate(sigs[1:], start=1):
            if other == ref:
                continue
            for k in range(max(len(ref), len(other))):
                a = ref[k] if k < len(ref) else None
                b = other[k] if k < len(other) else None
                if a != b:
                    what = (f"'{a[0]}' has shape {tuple(a[1])} and dtype {a[2]} on rank 0" if a else
                            "rank 0 has no tensor there")
                    got = (f"'{b[0]}' with shape {tuple(b[1])} and dtype {b[2]} on rank {r}" if b else
                           f"rank {r} has no tensor there")
                    raise RuntimeError(f"DistributedDataParallel: parameters and buffers differ across ranks 0 and {r} "
                                       f"(tensor #{k}): {what}, but {got}")

    # -- training -----------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        sync = is_grad_enabled() and self.require_backward_grad_sync
        if sync:
            self.reducer.check_previous_finished()
        if self.broadcast_buffers and self._world > 1:
            with no_grad():
                for _, b in self.module.named_buffers():
                    if b is not None:
                        collectives.broadcast(b.detach(), src=self._src, group=self.process_group)
        out = self.module(*inputs, **kwargs)
        if sync:
            unused = set()
            if self.find_unused_parameters or (self.static_graph and self._static_unused is None):
                reached = _reachable_params(out)
                unused = {i for i, p in enumerate(self._params) if id(p) not in reached}
                if self.static_graph:
                    self._static_unused = unused
            elif self.static_graph:
                unused = self._static_unused
            self.reducer.prepare_for_backward(unused)
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Backwards inside accumulate into ``.grad`` locally; the first one after syncs the sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def register_comm_hook(self, state, hook):
        """Reduce buckets with ``hook(state, bucket) -> Future`` of the reduced flat buffer instead
        of the averaged allreduce. Once, before the first backward."""
        if not callable(hook):
            raise TypeError(f"register_comm_hook: 'hook' must be callable, got {type(hook).__name__}")
        if self.reducer.hook_registered:
            raise RuntimeError("register_comm_hook: a communication hook can only be registered once")
        if self.reducer.expect_hooks or self.reducer.last_launch_times:
            raise RuntimeError("register_comm_hook: register the hook before the first forward/backward")
        r = self.reducer
        r.hook, r.hook_state, r.hook_name, r.hook_registered = hook, state, getattr(hook, "__name__", repr(hook)), True

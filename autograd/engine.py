"""The backward pass: ``backward`` and ``grad``.

One call is one *graph task*, local to the calling thread (so backwards in several threads on
independent graphs never share state):

1. discover the nodes reachable from the roots and count, for each, the edges that feed it;
2. seed the roots' input buffers with the output gradients;
3. pop a node whose count is zero, run its tensor hooks, call ``apply``, add each resulting
   gradient into the buffer of the node it feeds and decrement that node's count.

Both walks use explicit stacks, never recursion, so a 100,000-op chain is fine, and each node
runs once. ``grad()`` prunes to the nodes that lead to its ``inputs`` and reads their
gradients instead of accumulating into ``.grad``. Without ``retain_graph`` each node frees its
saved tensors right after it ran.
"""
from __future__ import annotations

import math
import sys

from ..core.factories import zeros_like
from ..core.ops import fill
from ..core.tensor import Tensor, broadcast_shapes
from ..runtime import cuda as _cuda
from . import graph
from .anomaly_mode import _anomaly, apply_checked
from .grad_mode import _state


def _as_tuple(x, name):
    if isinstance(x, Tensor):
        return (x,)
    if x is None:
        return ()
    if isinstance(x, (tuple, list)):
        return tuple(x)
    raise TypeError(f"{name}: expected a Tensor or a sequence of Tensors, got {type(x).__name__}")


def _make_grads(outputs, grad_outputs, create_graph):
    """Fill in implicit gradients (ones, one-element outputs only) and check shapes."""
    grads = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(out, Tensor):
            raise TypeError(f"outputs[{i}]: expected a Tensor, got {type(out).__name__}")
        if g is None:
            if out._requires_grad and math.prod(out._shape) != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not out.dtype.is_floating_point:
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {out.dtype}")
            # ones_like(out) without the factory's argument handling (a dtype, device and shape
            # already checked): every loss.backward() makes this gradient
            g = Tensor._empty(out._shape, out.dtype, out.device)
            fill(g, 1)
        elif isinstance(g, Tensor):
            if g.shape != out.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] "
                                   f"has a shape of {out.shape}.")
            if g.dtype.is_floating_point != out.dtype.is_floating_point:
                raise TypeError(f"For grad_output[{i}]: expected a floating point grad of dtype {out.dtype}, got {g.dtype}")
        else:
            raise TypeError(f"grad_outputs[{i}]: expected a Tensor or None, got {type(g).__name__}")
        grads.append(g)
    return grads


def _check_roots(outputs):
    edges = []
    for i, out in enumerate(outputs):
        e = graph.gradient_edge(out)
        if e is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        edges.append(e)
    return edges


def _sum_to(g: Tensor, shape) -> Tensor:
    """Sum a broadcast gradient back to ``shape`` (PyTorch's ``sum_to``)."""
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    if dims:
        g = g.sum(dims, keepdim=True)
    return g.reshape(shape) if lead or g.shape != tuple(shape) else g


def _validate(node, i, g):
    """Make gradient ``i`` of ``node`` match its input's shape, dtype and device."""
    m = node._input_meta[i] if i < len(node._input_meta) else None
    if m is None:
        return g
    shape, dtype, device = m
    if g.shape != shape:
        try:
            ok = broadcast_shapes(g.shape, shape) == tuple(g.shape)
        except RuntimeError:
            ok = False
        if not ok:
            raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index {i} - got "
                               f"{list(g.shape)} but expected shape compatible with {list(shape)}")
        g = _sum_to(g, shape) if _other_device(g) is None else _on_device(_other_device(g), _sum_to, g, shape)
    if g.dtype is not dtype or g.device != device:
        g = g.to(device=device, dtype=dtype)
    return g


def _discover(root_nodes, needed_targets=None):
    """Count each reachable node's incoming edges; with targets, keep only nodes that reach one."""
    deps, seen, stack = {}, set(root_nodes), list(root_nodes)
    parents = {} if needed_targets is not None else None
    while stack:
        node = stack.pop()
        for e in node._edges:
            if not e:
                continue
            child = e[0]
            if parents is not None:
                parents.setdefault(child, []).append(node)
            if child not in seen:
                seen.add(child)
                stack.append(child)
    if needed_targets is None:
        needed = seen
    else:
        needed, stack = set(), [n for n in needed_targets if n in seen]
        needed.update(stack)
        while stack:
            for p in parents.get(stack.pop(), ()):
                if p not in needed:
                    needed.add(p)
                    stack.append(p)
    for node in needed:
        for e in node._edges:
            if e and e[0] in needed:
                deps[e[0]] = deps.get(e[0], 0) + 1
    return deps, needed


def _other_device(g):
    """The index of ``g``'s device when it is a CUDA device other than the current one, else None."""
    index = g.device.index
    return index if index is not None and index != getattr(_cuda._local, "device", 0) else None


def _on_device(index: int, fn, *args):
    """``fn(*args)`` with device ``index`` current (its kernels queue on that device's stream), then the
    caller's device again."""
    previous = _cuda.current_device()
    _cuda.set_device(index)
    try:
        return fn(*args)
    finally:
        _cuda.set_device(previous)


def _add(buf, nr, g):
    old = buf[nr]
    if old is None:
        buf[nr] = g
    elif _other_device(g) is None:
        buf[nr] = old + g
    else:  # two consumers' gradients on another device (a DataParallel replica's tensor used twice)
        buf[nr] = _on_device(_other_device(g), old.__add__, g)


def _capture(node, buf, captures, needed, inputs, results, accumulate) -> bool:
    """Record the gradients of ``inputs`` that arrive at ``node``; True if ``node`` needn't run.

    ``grad()`` returns them; ``backward(inputs=...)`` sums them into ``.grad`` (a leaf's
    AccumulateGrad does that itself when it runs).
    """
    for nr, g in enumerate(buf):
        for k in captures.get((node, nr), ()):
            results[k] = g
            if accumulate and g is not None and not isinstance(node, graph.AccumulateGrad):
                t = inputs[k]
                t.grad = graph.detached(g).clone() if t.grad is None else t.grad + g
    if isinstance(node, graph.AccumulateGrad):
        return not accumulate
    return not any(e and e[0] in needed for e in node._edges)


class _Probe:
    __slots__ = ("held",)


def _sole_count() -> int:
    """What ``sys.getrefcount`` says of an object one slot refers to (2 on most CPython releases;
    measured, since a release may count its own argument differently)."""
    probe = _Probe()
    probe.held = object()
    return sys.getrefcount(probe.held)


_SOLE = _sole_count()


def _owned(g, node, buf, grads) -> bool:
    """Whether ``g``, a gradient ``node`` just made, is the engine's alone: a builtin derivative made
    it (a user's Function may return a tensor it keeps), it is none of the node's incoming gradients
    (passed through) nor given to another edge too, and its memory is its own (no view, no other
    tensor on its storage). Such a gradient may become a leaf's ``.grad`` without a copy."""
    fwd = getattr(node, "_forward_cls", None)
    if fwd is None or not fwd._builtin or g._base is not None or sys.getrefcount(g._storage) > _SOLE:
        return False
    for b in buf:
        if b is g:
            return False
    seen = 0
    for x in grads:
        seen += x is g
    return seen <= 1


def run_backward(outputs, grad_outputs, retain_graph, create_graph, inputs=None, accumulate=True):
    """Run one graph task. With ``accumulate`` leaves' ``.grad`` (or only ``inputs``') is summed
    into; otherwise the gradients of ``inputs`` are returned (``grad()``)."""
    root_edges = _check_roots(outputs)
    captures = {}  # (node, output_nr) -> positions in inputs
    if inputs is not None:
        for k, t in enumerate(inputs):
            e = graph.gradient_edge(t)
            if e is None:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            captures.setdefault(e, []).append(k)
    root_nodes = [root_edges[0][0]] if len(root_edges) == 1 else list(dict.fromkeys(e[0] for e in root_edges))
    deps, needed = _discover(root_nodes, None if inputs is None else {e[0] for e in captures})
    results = [None] * (len(inputs) if inputs is not None else 0)

    buffers = {}
    # Gradients waiting in an accumulator's buffer that are the engine's alone, by id (holding them
    # keeps an id from being reused while it is here).
    owned = {}
    for (node, nr), g in zip(root_edges, grad_outputs):
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node._n_outputs
        _add(buf, nr, g)
    ready = [n for n in root_nodes if deps.get(n, 0) == 0]

    prev = _state.enabled
    _state.enabled = create_graph
    try:
        while ready:
            node = ready.pop()
            buf = buffers.pop(node, None) or [None] * node._n_outputs
            arrived = False  # any gradient at all for this node
            # Tensor hooks live on the node (non-leaf outputs) or on the leaf (accumulators).
            hooked = node._tensor_hooks is not None or node._is_accumulator
            retained = node._retained
            for nr, g in enumerate(buf):
                if g is None:
                    continue
                arrived = True
                g_any = g
                hooks = node.tensor_hooks(nr) if hooked else None
                if hooks:
                    for hook in list(hooks.values()):
                        r = hook(g)
                        if r is not None:
                            g = r
                    buf[nr] = g
                if retained and nr in retained:
                    t = retained[nr]
                    t.grad = graph.detached(g).clone() if t.grad is None else t.grad + g
            if captures and _capture(node, buf, captures, needed, inputs, results, accumulate):
                continue  # grad()/backward(inputs=...): nothing past this node is wanted
            if node._pre_hooks:
                for hook in list(node._pre_hooks.values()):
                    r = hook(tuple(buf))
                    if r is not None:
                        buf = list(r)
                        arrived = any(g is not None for g in buf)
            # A node of another device's work (a DataParallel replica's, a copy's) runs with that device
            # current, so its kernels queue on that device's stream, as torch's per-device threads do.
            previous = None
            if arrived and g_any.device.index is not None and g_any.device.index != getattr(_cuda._local, "device", 0):
                previous = _cuda.current_device()
                _cuda.set_device(g_any.device.index)
            try:
                if not arrived:
                    grads = (None,) * len(node._edges)
                elif node._is_accumulator and owned and owned.pop(id(buf[0]), None) is buf[0] \
                        and node.variable._hooks is None and not _anomaly.enabled:
                    grads = node.apply(buf[0], owned=True)
                else:
                    grads = apply_checked(node, buf) if _anomaly.enabled else node.apply(*buf)
                    if node._hooks:
                        for hook in list(node._hooks.values()):
                            r = hook(tuple(grads), tuple(buf))
                            if r is not None:
                                grads = tuple(r)
            finally:
                if previous is not None:
                    _cuda.set_device(previous)
            if not retain_graph:
                node.release()
            metas, n_grads = node._input_meta, len(grads)
            for i, e in enumerate(node._edges):
                if not e:
                    continue
                child, nr = e
                if child not in deps:
                    continue
                g = grads[i] if i < n_grads else None
                if g is not None:
                    m = metas[i] if i < len(metas) else None
                    # A gradient already of its input's shape, dtype and device (the common case)
                    # needs no call to make it so.
                    if m is not None and (g._shape != m[0] or g.dtype is not m[1]
                                          or (g.device is not m[2] and g.device != m[2])):
                        g = _validate(node, i, g)
                    cbuf = buffers.get(child)
                    if cbuf is None:
                        cbuf = buffers[child] = [None] * child._n_outputs
                    old = cbuf[nr]
                    if old is None:
                        cbuf[nr] = g
                        # (a leaf that has a .grad sums into it: only a first gradient may be kept)
                        if child._is_accumulator and not create_graph and child.variable.grad is None \
                                and _owned(g, node, buf, grads):
                            owned[id(g)] = g
                    else:
                        cbuf[nr] = g = old + g
                        if child._is_accumulator and not create_graph and child.variable.grad is None:
                            owned[id(g)] = g  # a new sum, nobody else's
                deps[child] -= 1
                if deps[child] == 0:
                    ready.append(child)
    finally:
        _state.enabled = prev
    return results


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """``tritensor.autograd.backward``: sum the gradients of ``tensors`` into the leaves' ``.grad``."""
    # loss.backward(): one tensor, no gradient given (the common call, answered without _as_tuple)
    tensors = (tensors,) if isinstance(tensors, Tensor) else _as_tuple(tensors, "tensors")
    grad_tensors = (None,) * len(tensors) if grad_tensors is None else \
        (_as_tuple(grad_tensors, "grad_tensors") or (None,) * len(tensors))
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(f"grad_tensors: got {len(grad_tensors)} gradients for {len(tensors)} tensors")
    if inputs is not None:
        inputs = _as_tuple(inputs, "inputs")
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    retain_graph = create_graph if retain_graph is None else retain_graph
    grads = _make_grads(tensors, grad_tensors, create_graph)
    if inputs is not None:
        for t in inputs:  # leaves named in inputs accumulate through their own AccumulateGrad
            if t.grad_fn is None and t._requires_grad:
                graph.grad_accumulator(t)
    run_backward(tensors, grads, retain_graph, create_graph, inputs=inputs, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``tritensor.autograd.grad``: the gradients of ``outputs`` with respect to ``inputs``."""
    outputs = _as_tuple(outputs, "outputs")
    inputs = _as_tuple(inputs, "inputs")
    if not inputs:
        raise RuntimeError("grad requires non-empty inputs.")
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"inputs[{i}]: expected a Tensor, got {type(t).__name__}")
    if is_grads_batched:
        raise NotImplementedError("grad(is_grads_batched=True) is not supported")
    if allow_unused is None:
        allow_unused = materialize_grads
    grad_outputs = _as_tuple(grad_outputs, "grad_outputs") or (None,) * len(outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad requires one grad_output per output: got {len(grad_outputs)} for {len(outputs)}")
    retain_graph = create_graph if retain_graph is None else retain_graph
    grads = _make_grads(outputs, grad_outputs, create_graph)
    results = run_backward(outputs, grads, retain_graph, create_graph, inputs=inputs, accumulate=False)
    out = []
    for t, g in zip(inputs, results):
        if g is None:
            if materialize_grads:
                g = zeros_like(t)
            elif not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   "Set allow_unused=True if this is the desired behavior.")
        elif not create_graph:
            g = graph.detached(g)
        out.append(g)
    return tuple(out)

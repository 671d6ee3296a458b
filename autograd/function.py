"""``Function``: an op with a forward and a backward, recorded into the graph by ``apply``.

Every differentiable op in tritensor is one (``autograd/functions/*.py``), and users write
their own the same way::

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

``apply`` decides once whether anything must be recorded (grad mode on and some tensor
argument requires grad). If not, forward runs with a throw-away ctx and nothing is saved. If
so, a node of class ``<Name>Backward`` is made; it is the ``ctx`` forward sees and becomes the
outputs' ``grad_fn``. Forward always runs with grad mode off.

tritensor's own derivatives (``autograd/functions/``) subclass :class:`BuiltinFunction`. The
simple families (elementwise, reductions, scans, softmax) are one generic ``BuiltinFunction`` each
plus a table of formulas, one row per op: :func:`functions_from_table` makes the per-op classes
from the rows, so each op's nodes keep their own name (``ExpBackward0``, ``SumBackward0``).
"""
from __future__ import annotations

from ..core.ops import fill
from ..core.tensor import Tensor
from . import graph
from .anomaly_mode import _anomaly, record_forward
from .grad_mode import _state


class BackwardFunction(graph.Node):
    """The node class of a :class:`Function`; ``apply`` calls the Function's ``backward``."""

    _forward_cls = None

    def apply(self, *grads):
        """Run the Function's backward on the incoming gradients (None ones made zeros first when
        materialize_grads is on, as torch's): what the engine calls for this node."""
        cls = self._forward_cls
        if self.materialize_grads:
            for g in grads:
                if g is None:
                    grads = tuple(_zeros_for(m) if g is None else g for g, m in zip(grads, self._output_meta or ()))
                    break
        out = cls.backward(self, *grads)
        out = out if isinstance(out, tuple) else (out,)
        n = len(self._edges)
        if len(out) != n:
            if len(out) > n and all(g is None for g in out[n:]):
                out = out[:n]
            elif cls._builtin and all(e is False for e in self._edges[len(out):]):
                out = out + (None,) * (n - len(out))  # trailing non-tensor options (inplace=...)
            else:
                raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients "
                                   f"(expected {n}, got {len(out)})")
        return out


def _zeros_for(m):
    shape, dtype, device = m
    z = Tensor._empty(shape, dtype, device)
    fill(z, 0)
    return z


class _InertCtx:
    """The ctx forward gets when nothing is recorded: saving is a no-op."""

    needs_input_grad = ()
    materialize_grads = True
    _dirty = None

    def save_for_backward(self, *tensors):
        pass

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


FunctionCtx = graph.Node  # what `ctx` is, for type hints


class Function:
    """Base class of differentiable ops; subclass with static ``forward``/``backward``."""

    _builtin = False  # builtin ops' nodes are named like PyTorch's (MulBackward0)
    _is_view = False  # view ops: their outputs alias the input (the engine re-checks them after in-place writes)
    _multiple_views = False  # ... several of them (unbind): torch forbids writing to those in place

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        suffix = "Backward0" if cls._builtin else "Backward"
        cls._backward_cls = type(cls.__name__ + suffix, (BackwardFunction,), {"_forward_cls": cls})

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Function subclasses are not instantiated: call MyFunction.apply(...)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """torch.autograd.Function.apply: run forward; when grad mode is on and a tensor argument requires
        grad, record a node whose backward the engine calls, and mark the outputs as its results."""
        record = False
        if _state.enabled:
            for a in args:
                if isinstance(a, Tensor) and a._requires_grad:
                    record = True
                    break
        if not record:
            ctx = _InertCtx()
            if cls._builtin:  # builtin forwards call core ops directly: nothing to switch off
                return cls.forward(ctx, *args, **kwargs)
            prev, _state.enabled = _state.enabled, False
            try:
                out = cls.forward(ctx, *args, **kwargs)
            finally:
                _state.enabled = prev
            if ctx._dirty:
                for t in ctx._dirty:
                    t._bump_version()
            return out

        node = cls._backward_cls()
        if _anomaly.enabled:
            record_forward(node)
        edges, needs, metas = [], [], []
        for a in args:
            if isinstance(a, Tensor):
                e = graph.gradient_edge(a)
                edges.append(e)
                needs.append(e is not None)
                metas.append((a._shape, a.dtype, a.device) if e is not None else None)
            else:
                edges.append(False)
                needs.append(False)
                metas.append(None)
        node._edges, node.needs_input_grad, node._input_meta = tuple(edges), tuple(needs), tuple(metas)
        _state.enabled = False
        try:
            out = cls.forward(node, *args, **kwargs)
        finally:
            _state.enabled = True
        return _wrap_outputs(cls, node, args, out)


class BuiltinFunction(Function):
    """Base of tritensor's own differentiable ops: their nodes are named like PyTorch's
    (``MulBackward0``), their forwards call core entries (grad mode needs no switching off), an
    output returned as it came in is not re-aliased, and a backward may leave out the trailing
    ``None``s of non-tensor arguments."""

    _builtin = True


def functions_from_table(base: type, table: dict, fields: tuple, names: dict | None = None) -> dict:
    """``{op: subclass of base}``, one per row of a formula table ``{op: (value, ...)}``.

    Each class carries ``op`` and the row's values under ``fields`` (functions as static methods)
    for ``base``'s generic forward and backward to read. It is named for the op in CamelCase
    (``gelu_tanh`` -> ``GeluTanh``, so its nodes are ``GeluTanhBackward0``) unless ``names`` says
    otherwise, and belongs to ``base``'s module."""
    classes = {}
    for op, row in table.items():
        if len(row) != len(fields):
            raise ValueError(f"{base.__name__} row {op!r}: {len(row)} values for the fields {fields}")
        name = (names or {}).get(op) or "".join(part.capitalize() for part in op.split("_"))
        attrs = {field: staticmethod(v) if callable(v) else v for field, v in zip(fields, row)}
        classes[op] = type(name, (base,), dict(attrs, op=op, __module__=base.__module__, __qualname__=name))
    return classes


def check_inplace(t: Tensor) -> None:
    """The errors PyTorch raises before an in-place op on a tensor autograd must protect."""
    if not _state.enabled:
        return
    if t.grad_fn is None and t._requires_grad and t._base is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = t._base
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    fn = getattr(t.grad_fn, "_forward_cls", None) if base is not None else None
    if fn is not None and fn._multiple_views:
        raise RuntimeError(f"Output {graph.output_nr(t)} of {fn.__name__} is a view and is being modified inplace. "
                           "This view is the output of a function that returns multiple views. Such functions do not "
                           "allow the output views to be modified inplace. You should replace the inplace operation by "
                           "an out-of-place one.")


def _wrap_outputs(cls, node, args, out):
    if cls._builtin and isinstance(out, Tensor) and not node._dirty and not node._non_diff:
        # The common case, what the loop below does for it without building lists: one new
        # output of one of tritensor's own forwards, nothing marked dirty or non-differentiable.
        node._n_outputs = 1
        node._output_meta = ((out._shape, out.dtype, out.device),)
        if out.dtype.is_floating_point:
            out.grad_fn, out._requires_grad = node, True
            if out._base is not None and cls._is_view:
                node._view_version = out._version
        if node._to_save is not None:
            node._pack_saved([out])
        return out
    is_tuple = isinstance(out, tuple)
    outs = list(out) if is_tuple else [out]
    dirty, non_diff = node._dirty or (), node._non_diff or ()
    if not cls._builtin:  # a custom forward returning an input unchanged gets a fresh alias
        arg_ids = {id(a) for a in args if isinstance(a, Tensor)}
        outs = [graph.detached(o) if isinstance(o, Tensor) and id(o) in arg_ids and id(o) not in dirty else o
                for o in outs]
    node._n_outputs = len(outs)
    if len(outs) > 1:
        node._output_meta = tuple((o._shape, o.dtype, o.device) if isinstance(o, Tensor) else None for o in outs)
    elif isinstance(outs[0], Tensor):
        node._output_meta = ((outs[0]._shape, outs[0].dtype, outs[0].device),)
    for i, o in enumerate(outs):
        if not isinstance(o, Tensor):
            continue
        if id(o) in dirty:
            if not cls._builtin:
                o._bump_version()
            _rebase_history(node, o, i, args)
            continue
        if id(o) in non_diff or not o.dtype.is_floating_point:
            continue
        o.grad_fn, o._requires_grad = node, True
        if i:
            graph.meta(o).output_nr = i
        if o._base is not None and cls._is_view:
            node._view_version = o._version
    if node._to_save is not None:
        node._pack_saved(outs)
    return tuple(outs) if is_tuple else outs[0]



def _rebase_history(node, t: Tensor, i: int, args) -> None:
    """``t`` (an input) was modified in place by ``node``'s op: it now comes from ``node``.

    For a view, the *base* gets the new history (:class:`graph.CopySlices`) and the view
    becomes a view of it again.
    """
    check_inplace(t)
    base = t._base
    if base is None:
        t.grad_fn, t._requires_grad = node, True
        if i:
            graph.meta(t).output_nr = i
        return
    self_index = next((k for k, a in enumerate(args) if a is t), None)
    if self_index is None:
        raise RuntimeError("mark_dirty: a view modified in place must be one of the Function's inputs")
    base.grad_fn = graph.CopySlices(base, t, node, self_index)
    base._requires_grad = True
    if base._autograd_meta is not None:
        base._autograd_meta.output_nr = 0
    graph.regenerate_view_grad_fn(t)

"""The recorded graph: nodes, edges, saved tensors, hooks.

A *node* is a tensor's ``grad_fn``: it knows how to turn the gradient of its outputs into the
gradients of its inputs (``apply``), and where those go (``_edges``, one per forward argument:
``(node, output_nr)``, ``None`` for a tensor that needs no gradient, ``False`` for a non-tensor
argument). Leaves that require grad end in an :class:`AccumulateGrad` node, which adds into
``.grad``. The node of an op is also the ``ctx`` its forward saw (as in PyTorch), so saved
tensors and attributes set in forward live on it until backward frees them.

In-place ops on views rewrite history here too: :class:`CopySlices` becomes the base's
``grad_fn`` and the view's new ``grad_fn`` is an :class:`AsStridedBackward0` of the base.
"""
from __future__ import annotations

import itertools
import threading

from ..core.factories_more import empty_strided
from ..core.ops import elementwise as _ew
from ..core.tensor import Tensor
from ..runtime import dtype as dt
from .grad_layout import is_grad_layout_enforced
from .grad_mode import _state

RETAIN_GRAPH_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if "
    "you need to access saved tensors after calling backward."
)
_accumulate_lock = threading.Lock()  # .grad of a leaf shared between threads is summed under it


SAME_DTYPE = object()  # Tensor.grad_dtype's default: the gradient has the leaf's own dtype


class AutogradMeta:
    """Per-tensor autograd extras, created only for the tensors that need them."""

    __slots__ = ("output_nr", "grad_accumulator", "retains_grad", "grad_dtype")

    def __init__(self):
        self.output_nr = 0
        self.grad_accumulator = None  # the leaf's AccumulateGrad (strong: a leaf's node lives with it)
        self.retains_grad = False
        self.grad_dtype = SAME_DTYPE  # a leaf's Tensor.grad_dtype: its own dtype unless set


def meta(t: Tensor) -> AutogradMeta:
    """``t``'s autograd extras (output number, gradient accumulator, retains_grad), made on first use."""
    m = t._autograd_meta
    if m is None:
        m = t._autograd_meta = AutogradMeta()
    return m


def output_nr(t: Tensor) -> int:
    """Which output of its grad_fn ``t`` is (0 for a leaf or a single output), as torch's Tensor.output_nr."""
    m = t._autograd_meta
    return 0 if m is None else m.output_nr


def detached(t: Tensor) -> Tensor:
    """Same storage and geometry, no history, shared version counter (what ``detach()`` returns)."""
    d = Tensor(t._storage, t._shape, t._stride, t._offset, t.dtype)
    d._version_counter = t._version_counter
    return d


def type_name(t: Tensor) -> str:
    """``t``'s legacy type name as torch's messages write it ('torch.FloatTensor'), for the version-counter
    error."""
    return dt.tensor_type_name(t.dtype, t.device.type)


class RemovableHandle:
    """Returned by ``register_hook``: ``handle.remove()`` unregisters the hook."""

    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self.id = next(RemovableHandle._ids)
        self._hooks = hooks

    def remove(self) -> None:
        """torch's RemovableHandle.remove: unregister the hook this handle was returned for."""
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class SavedTensor:
    """A tensor saved for backward and the version it had then.

    An op's own output is kept as a history-free alias (no reference cycle output -> node ->
    output); unpacking gives it back its ``grad_fn`` so double backward can see through it.
    """

    __slots__ = ("data", "version", "is_output", "output_nr", "producer")

    def __init__(self, t: Tensor, node, out_index):
        self.version = t._version
        self.is_output = out_index is not None
        if self.is_output:
            self.data, self.output_nr, self.producer = detached(t), out_index, node.name()
        else:
            self.data, self.output_nr = t, 0
            self.producer = t.grad_fn.name() if t.grad_fn is not None else None

    def unpack(self, node) -> Tensor:
        """The saved tensor for ``node``'s backward; torch's 'one of the variables needed for gradient
        computation has been modified by an inplace operation' when its version moved since it was saved."""
        t = self.data
        if t._version != self.version:
            which = f", which is output {self.output_nr} of {self.producer}," if self.producer else ""
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[{type_name(t)} {list(t.shape)}]{which} is at version {t._version}; expected version "
                f"{self.version} instead (saved by {node.name()}). Hint: the tensor was changed in place after "
                "it was saved for backward; use an out-of-place op or .clone() it before modifying it."
            )
        if self.is_output:
            out = detached(t)
            out.grad_fn, out._requires_grad = node, True
            if self.output_nr:
                meta(out).output_nr = self.output_nr
            return out
        return t


class Node:
    """One recorded op (its outputs' ``grad_fn``), and the ``ctx`` its forward was given.

    Subclasses implement ``apply(*grad_outputs) -> grads per forward argument``.
    Defaults live on the class so a node costs only what it sets.
    """

    _edges = ()
    _input_meta = ()
    needs_input_grad = ()
    _saved = ()
    _to_save = None
    _released = False
    _n_outputs = 1
    _output_meta = None
    _dirty = None
    _non_diff = None
    _hooks = None
    _pre_hooks = None
    _tensor_hooks = None  # {output_nr: {handle id: fn}}: register_hook on a non-leaf output
    _retained = None  # {output_nr: tensor}: retain_grad() on a non-leaf output
    _view_version = None  # view nodes: version of the view when this grad_fn was made for it
    _is_accumulator = False  # AccumulateGrad: its tensor hooks are its leaf's
    _metadata = None  # made on first use: anomaly mode keeps the forward's stack here
    materialize_grads = True

    def name(self) -> str:
        """torch's Node.name: the node's class name (MulBackward0 ...)."""
        return type(self).__name__

    @property
    def metadata(self) -> dict:
        """A dict for the user's (and anomaly mode's) annotations of this node, as torch's."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    @property
    def next_functions(self) -> tuple:
        """torch's Node.next_functions: for each input, (the node its gradient flows to, the output number),
        (None, 0) for inputs that need none."""
        return tuple((None, 0) if e is None else e for e in self._edges if e is not False)

    def apply(self, *grad_outputs):
        """Compute the gradients of this node's inputs from those of its outputs: each node type defines it."""
        raise NotImplementedError

    # ----- ctx API used by forward ----------------------------------------------------------
    def save_for_backward(self, *tensors) -> None:
        """torch's ctx.save_for_backward: keep tensors (or None) for backward, checked against in-place
        changes when unpacked; inference tensors are refused, as torch's."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors or None, but got {type(t).__name__}")
            if t is not None and t.is_inference():  # torch's rule: an inference tensor never joins autograd, saved ones included
                raise RuntimeError("Inference tensors cannot be saved for backward. To work around you can make a "
                                   "clone to get a normal tensor and use it in autograd.")
        self._to_save = tensors

    def mark_dirty(self, *tensors) -> None:
        """torch's ctx.mark_dirty: the tensors forward modified in place (their grad_fn becomes this node)."""
        self._dirty = {id(t) for t in tensors}

    def mark_non_differentiable(self, *tensors) -> None:
        """torch's ctx.mark_non_differentiable: outputs that get no gradient (indices, masks)."""
        self._non_diff = {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        """torch's ctx.set_materialize_grads: whether backward receives zeros (True, the default) or None for
        outputs that got no gradient."""
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self) -> tuple:
        """torch's ctx.saved_tensors: what save_for_backward kept, each checked against in-place changes;
        torch's error once the graph has been freed."""
        if self._released:
            raise RuntimeError(RETAIN_GRAPH_MSG)
        saved = self._saved  # one read: another thread may release the graph meanwhile
        if saved is None:
            raise RuntimeError(RETAIN_GRAPH_MSG)
        return tuple(None if s is None else s.unpack(self) for s in saved)

    def _pack_saved(self, outputs) -> None:
        to_save, self._to_save = self._to_save, None
        saved = []
        for t in to_save:
            if t is None:
                saved.append(None)
                continue
            index = None  # saving one of its own outputs: kept as a history-free alias
            for i, o in enumerate(outputs):
                if o is t:
                    index = i  # the last position, if it is returned twice
            saved.append(SavedTensor(t, self, index))
        self._saved = tuple(saved)

    def release(self) -> None:
        """Free what forward saved (backward without ``retain_graph``)."""
        self._released = True
        if self._saved:
            self._saved = None

    # ----- hooks ----------------------------------------------------------------------------
    def register_hook(self, fn) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` after this node ran; may return new grad_inputs."""
        if self._hooks is None:
            self._hooks = {}
        h = RemovableHandle(self._hooks)
        self._hooks[h.id] = fn
        return h

    def register_prehook(self, fn) -> RemovableHandle:
        """``fn(grad_outputs)`` before this node runs; may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        h = RemovableHandle(self._pre_hooks)
        self._pre_hooks[h.id] = fn
        return h

    def tensor_hooks(self, nr: int):
        """The ``register_hook`` functions of this node's output ``nr``."""
        th = self._tensor_hooks
        return None if th is None else th.get(nr)


class AccumulateGrad(Node):
    """The end of a leaf's path: sums the gradient into ``variable.grad``, then runs its
    post-accumulate hooks. Thread-safe: concurrent backwards into one leaf are serialised."""

    _is_accumulator = True

    def __init__(self, variable: Tensor):
        self.variable = variable
        self._input_meta = ()

    def tensor_hooks(self, nr: int):
        """The leaf's own gradient hooks (register_hook), run on the gradient before it is accumulated."""
        return self.variable._hooks

    def apply(self, grad, owned: bool = False):
        """Add the incoming gradient into the leaf's .grad (set it on the first call; under create_graph, keep
        the graph), under a lock, then run post-accumulate hooks. ``owned``: the engine made ``grad`` and
        nothing else refers to it or its memory, so a first gradient laid out as the leaf is becomes
        ``.grad`` itself instead of a copy (torch's AccumulateGrad steals such a buffer too)."""
        v = self.variable
        m = v._autograd_meta
        if m is not None and m.grad_dtype is not SAME_DTYPE and m.grad_dtype is not None \
                and grad.dtype is not m.grad_dtype:  # Tensor.grad_dtype: gradients arrive cast to it
            grad, owned = grad.to(m.grad_dtype), True
        with _accumulate_lock:
            if v.grad is None:
                if _state.enabled:
                    v.grad = grad
                elif owned and grad._offset == 0 and grad.dtype is v.dtype and (
                        grad._stride == v._stride or (not is_grad_layout_enforced() and grad.is_contiguous())):
                    # with the layout policy relaxed, a dense gradient is taken in its own layout
                    v.grad = detached(grad)
                elif is_grad_layout_enforced():
                    # torch's layout contract: .grad strided as its (dense) leaf, so an optimizer
                    # walks both alike (an overlapping leaf has no layout to follow: a plain copy)
                    v.grad = _in_leaf_layout(grad, v)
                else:
                    v.grad = detached(grad).clone()
            elif _state.enabled:  # create_graph: keep the graph of the sum
                v.grad = v.grad + grad
            else:
                _ew.binary("add", v.grad, grad, out=v.grad)
                v.grad._bump_version()
        if v._post_acc_hooks:
            for hook in list(v._post_acc_hooks.values()):
                hook(v)
        return ()


def _in_leaf_layout(grad: Tensor, v: Tensor) -> Tensor:
    """A copy of ``grad`` strided as the leaf ``v`` when ``v`` is dense and non-overlapping (torch's
    gradient layout contract), else a plain copy."""
    order = sorted(range(len(v._shape)), key=lambda d: v._stride[d])
    expect = 1
    for d in order:
        if v._shape[d] == 1:
            continue
        if v._stride[d] != expect:
            return detached(grad).clone()  # a copy, laid out as grad's clone is
        expect *= v._shape[d]
    out = empty_strided(tuple(v._shape), tuple(v._stride), dtype=grad.dtype, device=grad.device)
    return out.copy_(detached(grad))


def grad_accumulator(t: Tensor) -> AccumulateGrad:
    """The leaf ``t``'s AccumulateGrad node, one per leaf, made on first use (what a graph's edge to a leaf
    points to)."""
    m = meta(t)
    acc = m.grad_accumulator
    if acc is None:
        acc = m.grad_accumulator = AccumulateGrad(t)
    return acc


def gradient_edge(t: Tensor):
    """Where gradient for ``t`` goes: ``(grad_fn, output_nr)``, its accumulator, or None."""
    fn = t.grad_fn
    if t._base is None and fn is None and t._requires_grad:  # a leaf (every recorded op's parameters)
        m = t._autograd_meta
        acc = m.grad_accumulator if m is not None else None
        return (acc if acc is not None else grad_accumulator(t), 0)
    if t._base is not None and (
        (fn is not None and fn._view_version is not None and fn._view_version != t._version)
        or (fn is None and not t._requires_grad and t._base.grad_fn is not None)
    ):
        fn = regenerate_view_grad_fn(t)  # the base was changed in place after this view was taken
    if fn is not None:
        m = t._autograd_meta
        return (fn, 0 if m is None else m.output_nr)
    if t._requires_grad:
        return (grad_accumulator(t), 0)
    return None


def _geometry(t: Tensor) -> tuple:
    return (tuple(t._shape), t._stride, t._offset)


def _strided_zeros(dtype, device, geom, base_offset) -> tuple:
    """A zero tensor laid out like ``geom`` (shape, strides, offset), and its storage origin."""
    shape, stride, offset = geom
    span = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0
    flat = Tensor._empty((span,), dtype, device)
    flat.fill_(0) if span else None
    return Tensor(flat._storage, shape, stride, 0, dtype), flat


def _region(full: Tensor, view_geom, base_offset: int) -> Tensor:
    shape, stride, offset = view_geom
    return Tensor(full._storage, shape, stride, offset - base_offset, full.dtype)


class AsStridedBackward0(Node):
    """grad_fn of a view whose base was rewritten in place: scatter the view's gradient into
    a zero tensor shaped like the base. (First-order only.)"""

    def __init__(self, base: Tensor, view: Tensor):
        self._edges = (gradient_edge(base),)
        self._input_meta = ((base.shape, base.dtype, base.device),)
        self.base_geom, self.view_geom = _geometry(base), _geometry(view)
        self._view_version = view._version

    def apply(self, grad):
        """The gradient of a view whose base was changed in place: the gradient written into zeros of the
        base's geometry at the view's region."""
        full, _ = _strided_zeros(grad.dtype, grad.device, self.base_geom, self.base_geom[2])
        _region(full, self.view_geom, self.base_geom[2]).copy_(grad)
        return (full,)


def regenerate_view_grad_fn(view: Tensor):
    """Give a view of a base modified in place the grad_fn torch gives it (AsStridedBackward0 over the base's
    new history), so the gradient reaches the base."""
    base = view._base
    node = AsStridedBackward0(base, view)
    view.grad_fn, view._requires_grad = node, True
    if view._autograd_meta is not None:
        view._autograd_meta.output_nr = 0
    return node


class CopySlices(Node):
    """The base's new grad_fn after an in-place op ``fn`` wrote into one of its views.

    Backward: the base's gradient outside the view passes through unchanged; inside the view
    it goes through ``fn``'s backward, whose gradient for the view's old value lands back in
    the view's region and whose other gradients go to ``fn``'s other inputs.
    """

    def __init__(self, base: Tensor, view: Tensor, fn: Node, self_index: int):
        self.fn, self.self_index = fn, self_index
        others = [i for i in range(len(fn._edges)) if i != self_index]
        self._others = others
        self._edges = (gradient_edge(base),) + tuple(fn._edges[i] for i in others)
        self._input_meta = ((base.shape, base.dtype, base.device),) + tuple(fn._input_meta[i] for i in others)
        self.base_geom, self.view_geom = _geometry(base), _geometry(view)

    def apply(self, grad):
        """The gradient of an in-place op on a view: the region the op wrote goes through the op's own
        backward; the rest of the base's gradient passes unchanged."""
        full, _ = _strided_zeros(grad.dtype, grad.device, self.base_geom, self.base_geom[2])
        full.copy_(grad)
        region = _region(full, self.view_geom, self.base_geom[2])
        fn_grads = self.fn.apply(region.clone())
        g_self = fn_grads[self.self_index] if self.self_index < len(fn_grads) else None
        if g_self is None:
            region.fill_(0)
        else:
            region.copy_(g_self)
        return (full,) + tuple(fn_grads[i] if i < len(fn_grads) else None for i in self._others)

    def release(self) -> None:
        """Free the saved tensors of this node and of the in-place op it wraps (after backward, unless
        retain_graph)."""
        super().release()
        self.fn.release()

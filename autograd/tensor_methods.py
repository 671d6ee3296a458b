"""Tensor's autograd API: ``backward``, ``detach``, ``detach_``, ``register_hook``,
``register_post_accumulate_grad_hook``, ``retain_grad``, ``retains_grad``, ``data``, ``grad_dtype``.

Core's Tensor cannot import autograd, so these are entries of the op table (``core/ops/table.py``,
``API``) whose calls the autograd layer of the dispatcher answers from :data:`TENSOR_API`
(``autograd/layer.py``). ``is_leaf`` and ``requires_grad_`` need nothing from autograd: they are in
``core/tensor_base.py``."""
from __future__ import annotations

from ..core.tensor import Tensor
from . import engine, graph


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Sum d(self)/d(leaf) into each leaf's ``.grad`` (``gradient`` is d(loss)/d(self))."""
    engine.backward(self, gradient, retain_graph, create_graph, inputs)


def detach(self) -> Tensor:
    """A tensor sharing this one's data and version counter, with no history."""
    return graph.detached(self)


def detach_(self) -> Tensor:
    """torch's Tensor.detach_: this tensor made a leaf that requires no grad, in place; refused for a view
    whose base requires grad, as torch's."""
    if self._base is not None and (self._base._requires_grad or self._requires_grad):
        raise RuntimeError("Can't detach views in-place. Use detach() instead.")
    self.grad_fn, self._requires_grad = None, False
    return self


def _check_hookable(self):
    if not self._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")


def register_hook(self, hook):
    """``hook(grad) -> Tensor or None`` runs when this tensor's gradient is computed; a returned
    tensor replaces the gradient. Returns a handle with ``remove()``."""
    _check_hookable(self)
    if self._hooks is None:
        self._hooks = {}
    h = graph.RemovableHandle(self._hooks)
    self._hooks[h.id] = hook
    fn = self.grad_fn
    if fn is not None:  # non-leaf: the node runs the hooks of its output
        if fn._tensor_hooks is None:
            fn._tensor_hooks = {}
        fn._tensor_hooks[graph.output_nr(self)] = self._hooks
    return h


def register_post_accumulate_grad_hook(self, hook):
    """``hook(tensor)`` runs after the gradient was accumulated into this leaf's ``.grad``."""
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    _check_hookable(self)
    if self._post_acc_hooks is None:
        self._post_acc_hooks = {}
    h = graph.RemovableHandle(self._post_acc_hooks)
    self._post_acc_hooks[h.id] = hook
    return h


def retain_grad(self) -> None:
    """Keep ``.grad`` for this non-leaf tensor too (leaves always keep theirs)."""
    if not self._requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    fn = self.grad_fn
    if fn is None:
        return
    if fn._retained is None:
        fn._retained = {}
    fn._retained[graph.output_nr(self)] = self
    graph.meta(self).retains_grad = True


def retains_grad(self) -> bool:
    """torch's Tensor.retains_grad: whether retain_grad() was called on this non-leaf, so its .grad is kept."""
    m = self._autograd_meta
    return bool(m and m.retains_grad)


def _get_data(self) -> Tensor:
    return graph.detached(self)


def _set_data(self, value: Tensor) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"data: expected a Tensor, got {type(value).__name__}")
    if value.shape != self.shape and self._base is not None:
        raise RuntimeError("data: cannot change the shape of a view")
    self._storage, self._shape, self._stride, self._offset = value._storage, value._shape, value._stride, value._offset
    self.dtype, self.device = value.dtype, value.device


def _get_grad_dtype(self):
    """torch's Tensor.grad_dtype: the dtype a leaf's gradient is cast to on accumulation (its own dtype by
    default; None accepts any)."""
    if self.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be accessed on leaf tensors.")
    m = self._autograd_meta
    return self.dtype if m is None or m.grad_dtype is graph.SAME_DTYPE else m.grad_dtype


def _set_grad_dtype(self, value) -> None:
    if self.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be set on leaf tensors.")
    if value is not None and not isinstance(value, type(self.dtype)):
        raise RuntimeError(f"grad_dtype must be a torch.dtype or None, but got {type(value).__name__}")
    graph.meta(self).grad_dtype = value


TENSOR_API = {"backward": backward, "detach": detach, "detach_": detach_, "register_hook": register_hook,
              "register_post_accumulate_grad_hook": register_post_accumulate_grad_hook, "retain_grad": retain_grad,
              "retains_grad": retains_grad, "get_data": _get_data, "set_data": _set_data,
              "get_grad_dtype": _get_grad_dtype, "set_grad_dtype": _set_grad_dtype}

"""The autograd layer of the dispatcher (``core/dispatch.py``), registered when autograd is imported.

For every op call it decides, by the op's name, whether autograd has anything to do:

* Tensor's autograd API (``backward``, ``register_hook`` ...): answered here (``tensor_methods.py``);
* an op with a derivative (``functions.DERIVATIVES``), grad mode on and an argument that requires
  grad: the op's recorder runs it and records it into the graph;
* anything else: the call goes on down to the core entry untouched.
"""
from __future__ import annotations

from ..core import dispatch
from ..core.tensor import Tensor
from .functions import DERIVATIVES
from .grad_mode import _state
from .tensor_methods import TENSOR_API


def _wants_grad(args, kwargs) -> bool:
    for a in args:
        if isinstance(a, Tensor) and a._requires_grad:
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(t, Tensor) and t._requires_grad for t in a):
            return True  # cat/stack take their tensors as one sequence
    for k, a in kwargs.items():
        if k != "out" and isinstance(a, Tensor) and a._requires_grad:
            return True
    return False


def autograd_layer(op, args, kwargs, next):
    """The autograd layer of core/dispatch.py: Tensor's autograd API answered here; an op with a derivative
    and an input that requires grad (grad mode on) recorded by its recorder; every other call handed on to
    core."""
    api = TENSOR_API.get(op.name)
    if api is not None:
        return api(*args, **kwargs)
    record = DERIVATIVES.get(op.name)
    if record is not None and _state.enabled:
        for a in args:  # _wants_grad's common case inline, as needed() has it: the tensors are positional
            if isinstance(a, Tensor):
                if a._requires_grad:
                    return record(*args, **kwargs)
            elif isinstance(a, (list, tuple)):
                break
        else:
            if not kwargs:
                return next(op, args, kwargs)
        if _wants_grad(args, kwargs):
            return record(*args, **kwargs)
    return next(op, args, kwargs)


def needed(op, args, kwargs) -> bool:
    """Whether the layer has anything to do with this call (else the dispatcher skips it)."""
    name = op.name
    if name in TENSOR_API:
        return True
    if not _state.enabled or name not in DERIVATIVES:
        return False
    # _wants_grad's common case inline (every op asks this): the tensors are positional.
    for a in args:
        if isinstance(a, Tensor):
            if a._requires_grad:
                return True
        elif isinstance(a, (list, tuple)):
            return _wants_grad(args, kwargs)
    return bool(kwargs) and _wants_grad(args, kwargs)


dispatch.register_layer("autograd", autograd_layer, needed)

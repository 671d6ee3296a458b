"""One small Function per op, and :func:`install`, which makes tritensor's public surface
differentiable.

``core/tensor.py`` and ``core/functional.py`` attach the *core* ops (check, allocate, run a
kernel; no graph). ``tritensor/__init__.py`` calls :func:`install` once everything is loaded,
and it rebinds each differentiable Tensor method and free function to the Function that wraps
the same core op. The tables below are the complete list: a name missing here records nothing.

Where an op's derivative lives:
  elementwise.py  unary math, + - * / ** maximum minimum remainder, where, clamp
  views.py        view reshape transpose permute expand squeeze unsqueeze narrow select []
  copies.py       clone/contiguous, to (dtype/device), copy_, fill_/zero_
  reduce.py       sum mean prod amax amin max min var std softmax log_softmax layer_norm
  matmul.py       matmul mm bmm linear
  conv.py         conv2d max_pool2d avg_pool2d
  loss.py         cross_entropy (fused log-softmax + NLL kernel), nll_loss, mse_loss
  index.py        index_select gather, advanced x[idx] (integer tensors, lists, masks)
"""
from __future__ import annotations

from ...triton_kernels import elementwise as _k
from .. import grad_mode
from . import conv, copies, elementwise, index, matmul, reduce, views
from .elementwise import binary, unary

DIFFERENTIABLE_UNARY = tuple(op for op in _k.UNARY if op in elementwise.UNARY)
DIFFERENTIABLE_BINARY = tuple(op for op in _k.BINARY if op in elementwise.BINARY)
_DUNDERS = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "pow": "pow",
            "floordiv": "floor_divide", "mod": "remainder"}


def _unary_method(op):
    def method(self):
        return unary(op, self)

    def method_(self):
        return unary(op, self, inplace=True)

    method.__name__, method_.__name__ = op, op + "_"
    return method, method_


def _binary_method(op, reflected=False):
    if reflected:
        def method(self, other):
            return binary(op, other, self)
    else:
        def method(self, other):
            return binary(op, self, other)

    def method_(self, other):
        return binary(op, self, other, inplace=True)

    method.__name__, method_.__name__ = op, op + "_"
    return method, method_


def _clamp(self, min=None, max=None):
    return elementwise.Clamp.apply(self, min, max)


def _clamp_(self, min=None, max=None):
    from ..function import check_inplace

    check_inplace(self)
    return elementwise.Clamp.apply(self, min, max, True)


def _check_out(name, out, *args):
    from ...core.tensor import Tensor

    if out is not None and grad_mode.is_grad_enabled() and any(isinstance(a, Tensor) and a._requires_grad
                                                               for a in args):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")


def _unary_fn(op, core_fn):
    def fn(input, *, out=None):
        if out is not None:
            _check_out(op, out, input)
            return core_fn(input, out=out)
        return unary(op, input)

    fn.__name__, fn.__doc__ = op, core_fn.__doc__
    return fn


def _binary_fn(op, core_fn):
    def fn(input, other, *, out=None):
        if out is not None:
            _check_out(op, out, input, other)
            return core_fn(input, other, out=out)
        return binary(op, input, other)

    fn.__name__, fn.__doc__ = op, core_fn.__doc__
    return fn


def _where(condition, input, other, *, out=None):
    from ...core.ops import elementwise as _ew

    if out is not None:
        _check_out("where", out, input, other)
        return _ew.where(condition, input, other, out=out)
    return elementwise.Where.apply(condition, input, other)


REDUCTION_METHODS = {"sum": reduce.sum, "mean": reduce.mean, "prod": reduce.prod, "amax": reduce.amax,
                     "amin": reduce.amin, "max": reduce.max, "min": reduce.min, "var": reduce.var,
                     "std": reduce.std, "softmax": reduce.softmax, "log_softmax": reduce.log_softmax}
MATMUL_FUNCTIONS = {"matmul": matmul.matmul, "mm": matmul.mm, "bmm": matmul.bmm}


def install(Tensor, namespace: dict) -> None:
    """Rebind Tensor's differentiable methods and the free functions in ``namespace``
    (the ``tritensor`` module's globals)."""
    from .. import tensor_methods

    for op in DIFFERENTIABLE_UNARY:
        m, m_ = _unary_method(op)
        setattr(Tensor, op, m)
        setattr(Tensor, op + "_", m_)
        if op in namespace:
            namespace[op] = _unary_fn(op, namespace[op])
    for op in DIFFERENTIABLE_BINARY:
        m, m_ = _binary_method(op)
        setattr(Tensor, op, m)
        setattr(Tensor, op + "_", m_)
        if op in namespace:
            namespace[op] = _binary_fn(op, namespace[op])
    for dunder, op in _DUNDERS.items():
        m, m_ = _binary_method(op)
        r, _ = _binary_method(op, reflected=True)
        setattr(Tensor, f"__{dunder}__", m)
        setattr(Tensor, f"__r{dunder}__", r)
        setattr(Tensor, f"__i{dunder}__", m_)
    Tensor.__neg__, Tensor.__abs__ = Tensor.neg, Tensor.abs
    Tensor.true_divide, Tensor.multiply, Tensor.subtract = Tensor.div, Tensor.mul, Tensor.sub
    Tensor.clamp = Tensor.clip = _clamp
    Tensor.clamp_ = Tensor.clip_ = _clamp_
    Tensor.clamp_min = lambda self, min: _clamp(self, min, None)
    Tensor.clamp_max = lambda self, max: _clamp(self, None, max)
    Tensor.where = lambda self, condition, other: _where(condition, self, other)
    for name, fn in REDUCTION_METHODS.items():
        setattr(Tensor, name, fn)
    Tensor.matmul = Tensor.__matmul__ = matmul.matmul
    Tensor.__rmatmul__ = lambda self, other: matmul.matmul(other, self)
    Tensor.mm, Tensor.bmm = matmul.mm, matmul.bmm
    views.install(Tensor)
    index.install(Tensor)  # after views: puts advanced indexing in front of the recording []
    copies.install(Tensor)
    tensor_methods.install(Tensor)

    namespace.update(true_divide=namespace["div"], multiply=namespace["mul"], subtract=namespace["sub"])
    namespace["where"] = _where
    namespace["clamp"] = namespace["clip"] = lambda input, min=None, max=None: _clamp(input, min, max)
    namespace.update(REDUCTION_METHODS)
    namespace.update(MATMUL_FUNCTIONS)
    namespace["layer_norm"], namespace["native_layer_norm"] = reduce.layer_norm, reduce.native_layer_norm
    namespace["linear"] = matmul.linear
    namespace.update(index_select=index.index_select, gather=index.gather)
    namespace.update(conv2d=conv.conv2d, max_pool2d=conv.max_pool2d, avg_pool2d=conv.avg_pool2d,
                     max_pool2d_with_indices=conv.max_pool2d_with_indices)

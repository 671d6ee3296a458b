"""PyTorch's free functions (``tritensor.exp(x)``, ``tritensor.add(a, b)``, ``tritensor.sum(x)`` ...),
generated from the op table (``core/ops/table.py``): each is ``dispatch.call(op, ...)``, the same
path as the Tensor method. Like torch's, some of these names (sum, max, min, all, any) shadow
Python's builtins in this module.
"""
from __future__ import annotations

import functools
import warnings

from . import dispatch
from .ops import table
from .ops.join import repeat_interleave_index
from .shape import broadcast_shapes
from .tensor import Tensor


def function(op, name: str, numpy_names: bool = True):
    """The free function ``name`` for ``op`` (also used by ``nn.functional``, whose Python functions
    in torch take no NumPy names: ``numpy_names=False``)."""
    aliases = table.numpy_names(op.impl, op.name) if numpy_names else {}
    if aliases:
        def fn(*args, **kwargs):
            if kwargs:
                kwargs = table.rename_numpy_keywords(kwargs, aliases, name)
            return dispatch.call(op, *args, **kwargs)
    else:
        def fn(*args, **kwargs):
            return dispatch.call(op, *args, **kwargs)

    functools.update_wrapper(fn, op.impl)  # the core entry's signature and docstring
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    return fn


def is_tensor(obj) -> bool:
    """torch.is_tensor: whether ``obj`` is a tritensor Tensor (a Parameter is one)."""
    return isinstance(obj, Tensor)


def flatten(input, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """``torch.flatten``: ``input.flatten(start_dim, end_dim)``, a composite of ``reshape``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"flatten(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input.flatten(start_dim, end_dim)


def get_device(input) -> int:
    """``input.get_device()``: the CUDA device index, -1 on the CPU."""
    return _tensor(input, "get_device").get_device()


def _tensor(x, fn: str, name: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    return x


# ----- composites of recorded ops (views, index_select, stack), as torch's free functions -----------
@table.accepts_numpy_names
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """``input.repeat_interleave(repeats, dim)``; with ``repeats`` omitted, ``input`` is the repeats
    and the result ``arange(len(input))`` repeated by them."""
    _tensor(input, "repeat_interleave")
    if repeats is None:
        return repeat_interleave_index(input.reshape(-1) if input.ndim == 0 else input, output_size)
    return input.repeat_interleave(repeats, dim, output_size=output_size)


@table.accepts_numpy_names
def tensor_split(input, indices_or_sections, dim: int = 0):
    """torch.tensor_split: ``input.tensor_split(indices_or_sections, dim)``, views along ``dim``."""
    return _tensor(input, "tensor_split").tensor_split(indices_or_sections, dim)


def rot90(input, k: int = 1, dims=(0, 1)):
    """torch.rot90: ``input.rot90(k, dims)``, a flip and a transposed view."""
    return _tensor(input, "rot90").rot90(k, dims)


@table.accepts_numpy_names
def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    """torch.diff: ``input.diff(n, dim, prepend, append)``, the n-th forward difference along ``dim``."""
    return _tensor(input, "diff").diff(n, dim, prepend, append)


def split(tensor, split_size_or_sections, dim: int = 0):
    """``torch.split``: ``tensor.split(split_size_or_sections, dim)``, views made with ``narrow``."""
    return _tensor(tensor, "split", "tensor").split(split_size_or_sections, dim)


@table.accepts_numpy_names
def chunk(input, chunks: int, dim: int = 0):
    """``torch.chunk``: ``input.chunk(chunks, dim)``."""
    return _tensor(input, "chunk").chunk(chunks, dim)


def unflatten(input, dim: int, sizes):
    """torch.unflatten: ``input.unflatten(dim, sizes)``, dim ``dim`` viewed as ``sizes``."""
    return _tensor(input, "unflatten").unflatten(dim, sizes)


@table.accepts_numpy_names
def unbind(input, dim: int = 0):
    """torch.unbind: ``input.unbind(dim)``, the slices along ``dim`` as a tuple of views."""
    return _tensor(input, "unbind").unbind(dim)


def broadcast_to(input, size):
    """torch.broadcast_to: ``input.broadcast_to(size)``, an expanded view."""
    return _tensor(input, "broadcast_to").broadcast_to(size)


def _tensor_list(tensors, fn: str):
    items = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    for t in items:
        _tensor(t, fn, "tensors")
    return list(items)


def broadcast_tensors(*tensors):
    """Expanded views of ``tensors`` with their common broadcast shape."""
    ts = _tensor_list(tensors, "broadcast_tensors")
    shape = broadcast_shapes(*(t.shape for t in ts))
    return tuple(t.expand(shape) for t in ts)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 0-d/1-d tensors (expanded views): ``'ij'`` puts tensor i along dim i,
    ``'xy'`` swaps the first two dims (NumPy's default). Without ``indexing``, ``'ij'`` and torch's
    warning."""
    ts = _tensor_list(tensors, "meshgrid")
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in ts:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor of "
                               f"shape {list(t.shape)}")
    if len({t.dtype for t in ts}) > 1 or len({t.device for t in ts}) > 1:
        raise RuntimeError("meshgrid expects all tensors to have the same dtype and device")
    pos = list(range(len(ts)))
    if indexing == "xy" and len(ts) >= 2:
        pos[0], pos[1] = 1, 0
    shape = [0] * len(ts)
    for i, t in zip(pos, ts):
        shape[i] = t.numel()
    out = []
    for i, t in zip(pos, ts):
        view = [1] * len(ts)
        view[i] = t.numel()
        out.append(t.reshape(view).expand(shape))
    return tuple(out)


def cartesian_prod(*tensors):
    """Every combination of the elements of 1-D tensors, one per row (``itertools.product`` order)."""
    ts = _tensor_list(tensors, "cartesian_prod")
    for t in ts:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(ts) == 1:
        return ts[0]
    return globals()["stack"]([g.reshape(-1) for g in meshgrid(*ts, indexing="ij")], 1)


def _atleast(tensors, n: int, fn: str):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    out = []
    for t in _tensor_list(tensors, fn):
        if t.ndim < n:  # torch's layouts: (1,) / (1, N) / (1, N, 1) and (M, N, 1)
            t = t.reshape((1,) if n == 1 else (1, t.numel()) if n == 2 else
                          {0: (1, 1, 1), 1: (1, t.numel(), 1), 2: tuple(t.shape) + (1,)}[t.ndim])
        out.append(t)
    return out[0] if single else tuple(out)


def atleast_1d(*tensors):
    """torch.atleast_1d: each tensor with at least one dim (a 0-d tensor becomes shape (1,)); one tensor for
    one, a tuple for several."""
    return _atleast(tensors, 1, "atleast_1d")


def atleast_2d(*tensors):
    """torch.atleast_2d: each tensor with at least two dims ((1,), then (1, n)); one tensor for one, a tuple
    for several."""
    return _atleast(tensors, 2, "atleast_2d")


def atleast_3d(*tensors):
    """torch.atleast_3d: each tensor with at least three dims ((1, 1, 1), (1, n, 1), (m, n, 1)); one tensor
    for one, a tuple for several."""
    return _atleast(tensors, 3, "atleast_3d")


__all__ = ["is_tensor", "flatten", "get_device", "repeat_interleave", "tensor_split", "rot90", "diff", "unflatten", "unbind", "broadcast_to",
           "split", "chunk",
           "broadcast_tensors", "meshgrid", "cartesian_prod", "atleast_1d", "atleast_2d", "atleast_3d"]
for _op in table.OPS.values():
    if _op.function:
        for _name in (_op.name,) + _op.aliases:
            globals()[_name] = function(_op, _name)
            __all__.append(_name)

"""More factories: ``as_tensor`` (share memory when nothing must change), ``linspace``,
``logspace``, ``eye``, and the random ``randint``/``randint_like``/``randperm``. Kept apart from ``factories.py`` so each file stays one topic: these make
a tensor from a recipe (a range, an identity) or adopt existing data, with PyTorch's checks.
Kernels: ``triton_kernels/math_ops.py`` (``linspace``/``logspace``); ``eye`` is two fills of
``triton_kernels/cast.py`` (zeros, then ones on the diagonal view); ``randint`` is
``triton_kernels/random.py`` and ``randperm`` the stable sort of random keys
(``core/ops/random.py``), both on a :class:`Generator`'s counters.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..triton_kernels import math_ops as _k
from ..triton_kernels import random as _rand

from ..runtime import dtype as dt
from ..runtime.device import CPU, device, device_or_default
from .factories import _dtype, _finish, from_numpy, tensor
from .generator import resolve
from .ops import fill
from .ops.join import diagonal_view
from .ops.random import randperm_keys
from .shape import _shape_arg, check_layout, strided
from .tensor import Tensor

_device = device  # the argument named ``device`` shadows the class inside the factories


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, sharing memory where possible: a Tensor of the requested dtype and
    device is returned as is; a NumPy array becomes a CPU tensor over the same memory when its
    dtype is kept; anything else is copied (``tensor(data, ...)``)."""
    want_dev = None if device is None else _device(device)
    if isinstance(data, Tensor):
        want_dt = data.dtype if dtype is None else dt.to_dtype(dtype)
        return data.to(device=want_dev or data.device, dtype=want_dt)
    if isinstance(data, np.ndarray) and data.dtype in [d.np for d in dt.ALL] and all(s >= 0 for s in data.strides):
        t = from_numpy(data)
        if (dtype is None or dt.to_dtype(dtype) is t.dtype) and (want_dev is None or want_dev == CPU):
            return t
        return t.to(device=want_dev or CPU, dtype=t.dtype if dtype is None else dt.to_dtype(dtype))
    return tensor(data, dtype=dtype, device=device)


def _scalar(v, name: str, op: str):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise RuntimeError(f"{op}(): argument '{name}' must be a number or a one-element tensor, got a tensor "
                               f"of {v.numel()} elements")
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.number)):
        raise TypeError(f"{op}(): argument '{name}' must be a number, not {type(v).__name__}")
    return float(v)


def _steps(steps, op: str) -> int:
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)):
        raise TypeError(f"{op}(): argument 'steps' must be int, not {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return int(steps)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (both ends exact)."""
    a, b, n = _scalar(start, "start", "linspace"), _scalar(end, "end", "linspace"), _steps(steps, "linspace")
    out = Tensor._empty((n,), _dtype(dtype), device_or_default(device))
    _k.linspace(out, a, b)
    return _finish(out, requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """``base ** linspace(start, end, steps)``, computed in float64 before the cast."""
    a, b, n = _scalar(start, "start", "logspace"), _scalar(end, "end", "logspace"), _steps(steps, "logspace")
    base = _scalar(base, "base", "logspace")
    out = Tensor._empty((n,), _dtype(dtype), device_or_default(device))
    _k.linspace(out, a, b, base=base)
    return _finish(out, requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """The ``n`` x ``m`` (default square) matrix with ones on the main diagonal."""
    for name, v in (("n", n), ("m", m)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"eye(): argument '{name}' must be int, not {type(v).__name__}")
        if v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    m = n if m is None else m
    out = Tensor._empty((int(n), int(m)), _dtype(dtype), device_or_default(device))
    fill(out, 0)
    if out.numel():
        fill(diagonal_view(out, 0), 1)
    return _finish(out, requires_grad)


def _int_arg(v, name: str, op: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(v).__name__}")
    return int(v)


# The C type PyTorch's randint names when a bound does not fit the dtype ("from is out of bounds for short int")
_RANDINT_C_NAMES = {dt.uint8: "unsigned char", dt.int8: "signed char", dt.int16: "short int", dt.bool_: "bool",
                    dt.uint16: "short unsigned int", dt.uint32: "unsigned int", dt.uint64: "long unsigned int"}


def randint(*args, size=None, generator=None, dtype=None, layout=strided, device=None, requires_grad=False,
            pin_memory=False) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)`` (``size=`` as a keyword too):
    integers uniform in [low, high) (int64 unless ``dtype`` says otherwise)."""
    check_layout(layout, "randint")
    if size is not None and len(args) in (1, 2):
        args = args + (size,)
    elif size is not None:
        raise TypeError("randint() got multiple values for argument 'size'")
    if len(args) == 2:
        low, (high, size) = 0, args
    elif len(args) == 3:
        low, high, size = args
    else:
        raise TypeError(f"randint() takes 2 or 3 positional arguments (high, size) or (low, high, size), "
                        f"{len(args)} given")
    low, high = _int_arg(low, "low", "randint"), _int_arg(high, "high", "randint")
    if not -2**63 <= low < 2**63 or not -2**63 <= high < 2**63:  # torch reads both as int64, whatever the dtype
        raise ValueError("Overflow when unpacking long long")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    gen = resolve(generator, "randint")
    d = dt.int64 if dtype is None else dt.to_dtype(dtype)
    if d in _RANDINT_C_NAMES:  # the bounds must fit the dtype, as torch checks them
        lo, hi = (0, 1) if d is dt.bool_ else (int(np.iinfo(d.np).min), int(np.iinfo(d.np).max))
        if not lo <= low <= hi:
            raise RuntimeError(f"from is out of bounds for {_RANDINT_C_NAMES[d]}")
        if not lo <= high - 1 <= hi:
            raise RuntimeError(f"to - 1 is out of bounds for {_RANDINT_C_NAMES[d]}")
    out = Tensor._empty(_shape_arg((size,)), d, device_or_default(device))
    seed, off = gen._take(out.numel())
    if d is dt.int64:
        _rand.randint(out, seed, off, low, high)
    else:
        tmp = Tensor._empty(out.shape, dt.int64, out.device)
        _rand.randint(tmp, seed, off, low, high)
        out.copy_(tmp)
    return _finish(out, requires_grad, pin_memory)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, device=None) -> Tensor:
    """``randint`` with ``input``'s shape (and dtype, device unless given); ``randint_like(x, high)`` too."""
    if not isinstance(input, Tensor):
        raise TypeError(f"randint_like(): argument 'input' must be Tensor, not {type(input).__name__}")
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), generator=generator, dtype=dtype or input.dtype,
                   device=device or input.device)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A random permutation of 0 .. n-1."""
    n = _int_arg(n, "n", "randperm")
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    gen = resolve(generator, "randperm")
    dev = device_or_default(device)
    perm = randperm_keys(n, gen, dev)
    d = dt.int64 if dtype is None else dt.to_dtype(dtype)
    return _finish(perm if d is dt.int64 else perm.to(d), requires_grad)


def _tri_indices(op: str, row, col, offset, dtype, device, upper: bool) -> Tensor:
    for name, v in (("row", row), ("col", col), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}(): argument '{name}' must be int, not {type(v).__name__}")
    if row < 0 or col < 0:
        raise RuntimeError(f"{'row' if row < 0 else 'col'} must be non-negative, got {row if row < 0 else col}")
    d = dt.int64 if dtype is None else dt.to_dtype(dtype)
    if d not in (dt.int32, dt.int64):
        raise RuntimeError(f'"{op}" not implemented for {d.name}: dtype must be int32 or int64')
    r, c = (np.triu_indices if upper else np.tril_indices)(row, offset, col)
    return tensor(np.stack([r, c]).astype(d.np).reshape(2, -1), device=device_or_default(device))


def triu_indices(row, col, offset=0, *, dtype=None, device=None) -> Tensor:
    """The (2, N) coordinates of the upper triangle (``col - row >= offset``) of a row x col matrix,
    row by row (computed on the host, as torch does on the CPU)."""
    return _tri_indices("triu_indices", row, col, offset, dtype, device, True)


def tril_indices(row, col, offset=0, *, dtype=None, device=None) -> Tensor:
    """The (2, N) coordinates of the lower triangle (``col - row <= offset``) of a row x col matrix."""
    return _tri_indices("tril_indices", row, col, offset, dtype, device, False)


"""The window functions of spectral analysis, as torch's factories: ``hann_window hamming_window
blackman_window bartlett_window kaiser_window`` (``periodic=``, ``dtype=``, ``device=``).

Each checks its arguments, allocates the window on its device and runs the one window kernel
(``triton_kernels/windows.py``), which computes every element from its position: nothing is made
on the host and copied over. A periodic window of length L is the symmetric one of length L + 1
without its last element (denominator L instead of L - 1); a window of length 1 is ``[1.]``.
Windows take no tensor, so they have no gradient (``requires_grad=True`` makes a leaf, as torch).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numbers

from ...triton_kernels import windows as _k
from ...runtime import dtype as dt
from ...runtime.device import device_or_default
from ..shape import check_layout, strided
from ..tensor_base import TensorBase
from . import fill

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

# the C++ type names torch's TensorOptions prints in its dtype error
_CPP_NAME = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
             "bool": "bool"}


def _window(op, window_length, periodic, dtype, layout, device, requires_grad, pin_memory, kind, **coeffs):
    if isinstance(window_length, bool) or not isinstance(window_length, numbers.Integral):
        raise TypeError(f"{op}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    if not isinstance(periodic, bool):
        raise TypeError(f"{op}(): argument 'periodic' must be bool, not {type(periodic).__name__}")
    check_layout(layout, op)
    d = dt.get_default_dtype() if dtype is None else dt.to_dtype(dtype)  # read at call time: set_default_dtype
    dev = device_or_default(device)
    if not d.is_floating_point:
        raise RuntimeError(f"{op} expects floating point dtypes, got: TensorOptions(dtype={_CPP_NAME[d.name]}, "
                           f"device={dev}, layout=Strided (default), requires_grad=false (default), "
                           "pinned_memory=false, memory_format=(nullopt))")
    if window_length < 0:
        raise RuntimeError(f"{op} requires non-negative window_length, got window_length={window_length}")
    out = TensorBase._empty((int(window_length),), d, dev)
    if window_length == 1:
        fill(out, 1.0)
    else:
        _k.window(out, kind, float(window_length if periodic else window_length - 1), **coeffs)
    if pin_memory:
        out = out.pin_memory()
    if requires_grad:
        out.requires_grad_(True)
    return out


def hann_window(window_length, periodic=True, *, dtype=None, layout=strided, device=None, requires_grad=False,
                pin_memory=False) -> Tensor:
    """``0.5 - 0.5 cos(2 pi k / N)``."""
    return _window("hann_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory,
                   "cosine", a0=0.5, a1=0.5)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=strided, device=None,
                   requires_grad=False, pin_memory=False) -> Tensor:
    """``alpha - beta cos(2 pi k / N)``."""
    return _window("hamming_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory,
                   "cosine", a0=float(alpha), a1=float(beta))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=strided, device=None, requires_grad=False,
                    pin_memory=False) -> Tensor:
    """``0.42 - 0.5 cos(2 pi k / N) + 0.08 cos(4 pi k / N)``."""
    return _window("blackman_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory,
                   "cosine", a0=0.42, a1=0.5, a2=0.08)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=strided, device=None, requires_grad=False,
                    pin_memory=False) -> Tensor:
    """The triangle ``1 - |2k / N - 1|``."""
    return _window("bartlett_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory,
                   "bartlett")


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=strided, device=None,
                  requires_grad=False, pin_memory=False) -> Tensor:
    """``I0(beta sqrt(1 - (2k / N - 1)^2)) / I0(beta)``."""
    return _window("kaiser_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory,
                   "kaiser", beta=float(beta))

"""More factories: ``as_tensor`` (share memory when nothing must change), ``linspace``,
``logspace``, ``eye``. Kept apart from ``factories.py`` so each file stays one topic: these make
a tensor from a recipe (a range, an identity) or adopt existing data, with PyTorch's checks.
Kernels: ``triton_kernels/math_ops.py`` (``linspace``) and ``triton_kernels/join.py`` (``eye`` is
the lower triangle at 0 of a matrix of ones with its upper triangle removed: one remap launch).
"""
from __future__ import annotations

import numpy as np

from ..runtime import dtype as dt
from ..runtime.device import CPU, device
from .factories import _dtype, _finish, from_numpy, tensor
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

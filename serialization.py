"""``tritensor.save`` / ``tritensor.load``: state dicts (name -> tensor) in the safetensors
format, which holds raw little-endian tensor bytes plus a JSON header (no pickle, so loading a
file runs no code). Other values (optimizer state dicts, nested containers) are not supported.
"""
from __future__ import annotations

import os

import numpy as np

from .core.factories import tensor
from .core.tensor import Tensor
from .runtime import dtype as dt

_ST = {"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16", "int32": "I32", "int64": "I64",
       "bool": "BOOL"}


def save(obj, f, metadata: dict | None = None) -> None:
    """Write a ``{name: Tensor}`` mapping (e.g. ``model.state_dict()``) to ``f`` (a path or a
    binary file object)."""
    from safetensors.numpy import save as _st_save

    if not isinstance(obj, dict):
        raise TypeError(f"save(): obj must be a dict of str -> Tensor (a state dict), got {type(obj).__name__}")
    arrays = {}
    for k, v in obj.items():
        if not isinstance(k, str):
            raise TypeError(f"save(): keys must be str, got {type(k).__name__}")
        if not isinstance(v, Tensor):
            raise TypeError(f"save(): value for key '{k}' must be a Tensor, got {type(v).__name__}")
        a = v.detach()._to_host_array()
        arrays[k] = a.view(np.uint16) if v.dtype.name == "bfloat16" else a
    data = _st_save(arrays, metadata={**(metadata or {}), **{f"__dtype__.{k}": v.dtype.name
                                                            for k, v in obj.items() if v.dtype.name == "bfloat16"}})
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)


def load(f, map_location=None, weights_only: bool = True) -> dict:
    """Read a state dict written by :func:`save` (or any safetensors file)."""
    import json
    import struct

    from safetensors.numpy import load as _st_load

    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    if len(data) < 8:
        raise RuntimeError("load(): not a safetensors file (too short)")
    (n,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        raise RuntimeError(f"load(): not a safetensors file (bad header: {e})") from None
    meta = header.get("__metadata__", {}) or {}
    arrays = _st_load(data)
    out = {}
    for k, a in arrays.items():
        d = dt.bfloat16 if meta.get(f"__dtype__.{k}") == "bfloat16" or header[k]["dtype"] == "BF16" else None
        if d is dt.bfloat16:
            import ml_dtypes

            a = a.view(ml_dtypes.bfloat16)
        t = tensor(a)
        out[k] = t.to(map_location) if map_location is not None else t
    return out

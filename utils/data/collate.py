"""``default_collate`` and ``default_convert``: how a DataLoader turns samples into a batch
(PyTorch's ``torch.utils.data._utils.collate``, same rules and messages).

Tensors are stacked on the host with NumPy (one copy, no kernel launch), so collation in a worker
process never touches a device; a batch of CUDA tensors is stacked on the host and moved back.
"""
from __future__ import annotations

import collections.abc
import re

import numpy as np

from ...core.factories import from_numpy, tensor
from ...core.tensor import Tensor
from ...runtime import dtype as dt

_np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _stack(batch) -> Tensor:
    """``torch.stack(batch, 0)`` for the collate path (same size check and message)."""
    first = batch[0]
    for i, t in enumerate(batch):
        if t.shape != first.shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(first.shape)} at entry 0 "
                               f"and {list(t.shape)} at entry {i}")
    d = first.dtype
    for t in batch[1:]:
        d = dt.promote_types(d, t.dtype)
    arrays = [t.detach().cpu().numpy() for t in batch]
    out = from_numpy(np.stack([a.astype(d.np, copy=False) for a in arrays]))
    return out if first.device.type == "cpu" else out.to(first.device)


def default_convert(data):
    """Convert NumPy arrays (inside containers too) to tensors; leave everything else as is."""
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if elem_type.__name__ == "ndarray" and _np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return tensor(data)  # torch.as_tensor shares memory; a copy keeps the batch independent
    if isinstance(data, collections.abc.Mapping):
        try:
            return elem_type({key: default_convert(data[key]) for key in data})
        except TypeError:
            return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # Backwards compatibility (as torch).
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """Stack a list of samples into a batch: tensors and arrays gain a leading batch dimension,
    Python floats become a float64 tensor, ints an int64 tensor (bools a bool tensor), strings
    stay a list, and mappings, namedtuples and sequences are collated field by field."""
    elem = batch[0]
    elem_type = type(elem)
    if isinstance(elem, Tensor):
        return _stack(batch)
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if elem_type.__name__ in ("ndarray", "memmap"):
            if _np_str_obj_array_pattern.search(elem.dtype.str) is not None:
                raise TypeError(default_collate_err_msg_format.format(elem.dtype))
            return default_collate([tensor(b) for b in batch])
        if elem.shape == ():  # NumPy scalars
            return tensor(np.array(batch))
    if isinstance(elem, bool):
        return tensor(batch, dtype=dt.bool_)
    if isinstance(elem, float):
        return tensor(batch, dtype=dt.float64)
    if isinstance(elem, int):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        try:
            return elem_type({key: default_collate([d[key] for d in batch]) for key in elem})
        except TypeError:  # the mapping type may not take a dict
            return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]  # Backwards compatibility.
        try:
            return elem_type([default_collate(samples) for samples in transposed])
        except TypeError:
            return [default_collate(samples) for samples in transposed]
    raise TypeError(default_collate_err_msg_format.format(elem_type))

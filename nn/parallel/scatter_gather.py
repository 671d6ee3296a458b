"""``nn.parallel.scatter``, ``scatter_kwargs`` and ``gather`` (torch's ``scatter_gather``): how
``nn.DataParallel`` splits its inputs over the devices and joins the replicas' outputs.

Both are device-to-device copies recorded by autograd (``narrow``/``chunk``, ``Tensor.to``,
``cat``), so a loss on the gathered output sends each slice's gradient back to the input it came
from; nothing here is a collective.
"""
from __future__ import annotations

import warnings

from ...core.functional import cat
from ...core.tensor import Tensor
from ...runtime import cuda as _cuda
from ...runtime.device import device as _device
from .replicate import _device_index, _restoring_context

__all__ = ["scatter", "scatter_kwargs", "gather"]


def _is_namedtuple(obj) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


def _scatter_tensor(t: Tensor, devices: list[int], dim: int) -> tuple:
    """``t`` cut in ``chunk``'s pieces along ``dim`` (at most one per device: fewer when the
    extent is smaller), piece i copied to ``devices[i]``."""
    return tuple(piece.to(_device("cuda", index)) for piece, index in zip(t.chunk(len(devices), dim), devices))


def scatter(inputs, target_gpus, dim: int = 0):
    """Slice tensors into approximately equal chunks along ``dim`` and distribute them across the
    given GPUs; tuples, lists, dicts and namedtuples are taken apart and rebuilt per device, and
    any other object is referenced once per device."""
    _cuda._require("scatter")
    devices = [_device_index(d) for d in target_gpus]

    def scatter_map(obj):
        if isinstance(obj, Tensor):
            return _scatter_tensor(obj, devices, dim)
        if _is_namedtuple(obj):
            return [type(obj)(*args) for args in zip(*map(scatter_map, obj))]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(scatter_map, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(i) for i in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(i) for i in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in devices]

    with _restoring_context():
        return scatter_map(inputs)


def scatter_kwargs(inputs: tuple, kwargs: dict | None, target_gpus, dim: int = 0) -> tuple[tuple, tuple]:
    """:func:`scatter` of the positional and the keyword arguments, each padded with empty ones
    to the same number of devices."""
    scattered_inputs = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(inputs):
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def _gather_tensors(target_device, dim: int, tensors: list):
    if not all(t.device.type != "cpu" for t in tensors):
        raise AssertionError("Gather function not implemented for CPU tensors")
    if target_device == "cpu" or target_device == -1 or (
            not isinstance(target_device, int) and _device(target_device).type == "cpu"):
        target = _device("cpu")
    else:
        target = _device("cuda", _device_index(target_device))
    if dim == 0 and all(t.dim() == 0 for t in tensors):
        tensors = [t.view(1) for t in tensors]
        warnings.warn("Was asked to gather along dimension 0, but all input tensors were scalars; "
                      "will instead unsqueeze and return a vector.", stacklevel=3)
    with _restoring_context():
        return cat([t.to(target) for t in tensors], dim)


def gather(outputs, target_device, dim: int = 0):
    """Join the per-device ``outputs`` on ``target_device`` (an index or device; -1 or 'cpu' for the
    host): tensors concatenated along ``dim`` (0-d ones made a vector, with torch's warning),
    dicts, tuples, lists and namedtuples rebuilt element by element, None kept."""
    def gather_map(outputs):
        out = outputs[0]
        if isinstance(out, Tensor):
            return _gather_tensors(target_device, dim, outputs)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outputs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, gather_map([d[k] for d in outputs])) for k in out)
        if _is_namedtuple(out):
            return type(out)._make(map(gather_map, zip(*outputs, strict=True)))
        return type(out)(map(gather_map, zip(*outputs, strict=True)))

    return gather_map(outputs)

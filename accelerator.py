"""``tritensor.accelerator`` (torch.accelerator): device-generic questions about the accelerator.

Code written for any accelerator asks ``torch.accelerator`` rather than ``torch.cuda``. tritensor's
one accelerator is CUDA: a GPU in GPU mode, or the simulated device (``TRITENSOR_DEVICE=sim``,
``runtime/mode.py``), which runs the GPU path and counts as a GPU here as everywhere. In CPU mode
the answers are torch's without an accelerator: none, not available, zero devices, and torch's
``RuntimeError`` for the calls that need one.
"""
from __future__ import annotations

from .runtime import cuda as _cuda
from .runtime import mode
from .runtime.device import device as _device

__all__ = ["current_accelerator", "current_device_idx", "current_device_index", "device_count", "is_available",
           "set_device_idx", "set_device_index", "synchronize"]

_NONE = "Cannot access accelerator device when none is available."


def current_accelerator(check_available: bool = False):
    """``device('cuda')`` when there is a GPU (or the simulated device), else ``None``."""
    if not mode.GPU:
        return None
    return _device("cuda")


def is_available() -> bool:
    """Whether there is an accelerator: a CUDA GPU, or the simulated device (False in CPU mode)."""
    return mode.GPU and _cuda.device_count() > 0


def device_count() -> int:
    """The number of CUDA devices, simulated ones included (0 in CPU mode)."""
    return _cuda.device_count() if mode.GPU else 0


def _require() -> None:
    if not mode.GPU:
        raise RuntimeError(_NONE)


def _index(dev):
    if dev is None or isinstance(dev, int):
        return dev
    d = _device(dev)
    if d.type != "cuda":
        raise ValueError(f"{d.type} doesn't match the current accelerator cuda.")
    return d.index


def current_device_index() -> int:
    """The index of the current CUDA device; RuntimeError (torch's message) without an accelerator."""
    _require()
    return _cuda.current_device()


def set_device_index(device, /) -> None:
    """Make device ``device`` (an index, 'cuda:N' or a device; None changes nothing) current; RuntimeError without an
    accelerator."""
    _require()
    idx = _index(device)
    if idx is not None:
        _cuda.set_device(idx)


def synchronize(device=None, /) -> None:
    """Wait for all work queued on ``device`` (default: the current one); RuntimeError without an accelerator."""
    _require()
    _cuda.synchronize(_index(device))


current_device_idx = current_device_index
set_device_idx = set_device_index

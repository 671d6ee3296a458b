"""``tritensor.utils.dlpack`` (PyTorch's ``torch.utils.dlpack``): ``to_dlpack`` and ``from_dlpack``.

The exchange itself lives in ``core/dlpack.py`` (``Tensor.__dlpack__``, ``tritensor.from_dlpack``);
this is torch's older spelling of the same two operations, for scripts that use it.
"""
from __future__ import annotations

from ..core.dlpack import from_dlpack
from ..core.tensor import Tensor


def to_dlpack(tensor):
    """A DLPack capsule of ``tensor`` (no copy), consumed once by a framework's ``from_dlpack``."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack(): argument 'tensor' must be Tensor, not {type(tensor).__name__}")
    return tensor.__dlpack__()


__all__ = ["from_dlpack", "to_dlpack"]

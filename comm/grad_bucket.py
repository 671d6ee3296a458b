"""``GradBucket``: what DistributedDataParallel hands a communication hook.

Why it exists: a communication hook (``ddp.register_comm_hook(state, hook)``) sees one bucket
of gradients at a time, as torch's ``dist.GradBucket``: a flat 1-D buffer holding the
gradients of several parameters back to back, plus which parameters they belong to. The hook
returns a :class:`~tritensor.comm.Future` of the reduced flat buffer; DDP copies it back into
each parameter's ``.grad``.
"""
from __future__ import annotations

__all__ = ["GradBucket", "DEFAULT_FIRST_BUCKET_BYTES"]

# DDP keeps its first bucket this small so that communication starts early in backward; torch
# names it torch.distributed._DEFAULT_FIRST_BUCKET_BYTES, and so does tritensor.comm.
DEFAULT_FIRST_BUCKET_BYTES = 1 << 20


class GradBucket:
    """One bucket: ``buffer()`` is the flat gradient tensor, ``gradients()`` its per-parameter
    views (shaped like the parameters), ``parameters()`` the parameters, in the same order."""

    __slots__ = ("_index", "_buffer", "_params", "_offsets", "_is_last")

    def __init__(self, index: int, buffer, parameters, offsets, is_last: bool):
        if len(parameters) != len(offsets):
            raise ValueError(f"GradBucket: {len(parameters)} parameters but {len(offsets)} offsets")
        self._index = int(index)
        self._buffer = buffer
        self._params = list(parameters)
        self._offsets = list(offsets)
        self._is_last = bool(is_last)

    def index(self) -> int:
        """The bucket's index; bucket 0 holds the parameters registered last."""
        return self._index

    def buffer(self):
        """The flat 1-D gradient buffer (the same tensor DDP reads the result layout from)."""
        return self._buffer

    def set_buffer(self, buffer) -> None:
        """Replace the flat buffer (same number of elements), as torch's ``set_buffer``."""
        if not hasattr(buffer, "numel") or buffer.ndim != 1 or buffer.numel() != self._buffer.numel():
            raise ValueError(f"set_buffer: 'buffer' must be a 1-D tensor of {self._buffer.numel()} elements, "
                             f"got {getattr(buffer, 'shape', type(buffer).__name__)}")
        self._buffer = buffer

    def gradients(self) -> list:
        """Views of ``buffer()``, one per parameter, shaped like it."""
        return [self._buffer.narrow(0, off, p.numel()).view(*p.shape) for p, off in zip(self._params, self._offsets)]

    def parameters(self) -> list:
        """torch's GradBucket.parameters: the parameters whose gradients this bucket holds, in order."""
        return list(self._params)

    def offsets(self) -> list:
        """Where each parameter's gradient starts in ``buffer()`` (elements)."""
        return list(self._offsets)

    def is_last(self) -> bool:
        """True for the bucket whose result completes the backward pass's reduction."""
        return self._is_last

    def __repr__(self):
        return f"GradBucket(index={self._index}, numel={self._buffer.numel()}, parameters={len(self._params)})"

"""The exceptions of tritensor.comm, named and shaped like torch.distributed's.

All subclass ``RuntimeError`` (as torch's do), so ``except RuntimeError`` keeps working for
code ported from PyTorch, while callers who care can tell a store failure from a failed
collective. Timeouts get their own subclasses so a caller can retry on them.
"""

from __future__ import annotations

__all__ = [
    "DistError",
    "DistBackendError",
    "DistNetworkError",
    "DistStoreError",
    "DistTimeoutError",
    "DistStoreTimeoutError",
]


class DistError(RuntimeError):
    """Base class of every communication error."""


class DistBackendError(DistError):
    """A collective or point-to-point operation failed (a peer died, sizes disagreed, ...)."""


class DistNetworkError(DistError):
    """A connection could not be made or was lost."""


class DistStoreError(DistError):
    """A TCPStore operation failed."""


class DistTimeoutError(DistBackendError):
    """A collective or point-to-point operation did not finish within its timeout."""


class DistStoreTimeoutError(DistStoreError):
    """A TCPStore wait (get, wait, multi_get) did not see its keys within the timeout."""

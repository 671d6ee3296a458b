"""torch.TypedStorage: what the deprecated ``Tensor.storage()`` returns, a storage's bytes read as elements of
one dtype.

torch keeps TypedStorage for old code (it warns on every use that UntypedStorage will be the only storage
class); code written against it still indexes storages by element, asks their ``size()`` in elements and
passes them to ``Tensor.set_``. It is a thin view over the UntypedStorage a tensor holds
(``runtime/memory.py``): element reads and writes go through the bytes, so they see and make the same
changes the tensors over that storage do.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..runtime import dtype as dt
from ..runtime.memory import UntypedStorage

__all__ = ["TypedStorage", "warn_typed_storage"]

_DEPRECATED = ("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only "
               "storage class. This should only matter to you if you are using storages directly.  To access "
               "UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()")


def warn_typed_storage(stacklevel: int = 3) -> None:
    """torch's warning on each use of a TypedStorage (``Tensor.storage()`` among them)."""
    warnings.warn(_DEPRECATED, UserWarning, stacklevel=stacklevel)


class TypedStorage:
    """``TypedStorage(wrap_storage=..., dtype=...)``: ``wrap_storage``'s bytes as elements of ``dtype``."""

    is_sparse = False

    def __init__(self, *, wrap_storage, dtype):
        if not isinstance(wrap_storage, UntypedStorage):
            raise TypeError(f"TypedStorage(): argument 'wrap_storage' must be UntypedStorage, not "
                            f"{type(wrap_storage).__name__}")
        if not isinstance(dtype, dt.dtype):
            raise TypeError(f"TypedStorage(): argument 'dtype' must be torch.dtype, not {type(dtype).__name__}")
        self._untyped_storage = wrap_storage
        self.dtype = dtype

    @property
    def device(self):
        """The device of the bytes."""
        return self._untyped_storage.device

    @property
    def is_cuda(self) -> bool:
        """Whether the bytes are in GPU memory."""
        return self._untyped_storage.is_cuda

    def untyped(self) -> UntypedStorage:
        """The bytes this storage reads."""
        return self._untyped_storage

    def size(self) -> int:
        """The number of whole elements of ``dtype`` the bytes hold."""
        return int(self._untyped_storage.nbytes) // self.dtype.itemsize

    def __len__(self) -> int:
        return self.size()

    def element_size(self) -> int:
        """Bytes per element of ``dtype``."""
        return self.dtype.itemsize

    def nbytes(self) -> int:
        """The bytes the storage holds, whole elements or not."""
        return int(self._untyped_storage.nbytes)

    def data_ptr(self) -> int:
        """The address of the first byte."""
        return self._untyped_storage.data_ptr()

    def is_shared(self) -> bool:
        """Whether the bytes are in shared memory (``share_memory_``)."""
        return self._untyped_storage.is_shared()

    def _elements(self) -> np.ndarray:
        n = self.size()
        return self._untyped_storage._read(0, n * self.dtype.itemsize).view(self.dtype.np)

    def tolist(self) -> list:
        """Every element, as Python numbers (a copy: reads of GPU bytes are ordered on their stream)."""
        return self._elements().tolist()

    def _index(self, idx) -> int:
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise TypeError(f"can't index a TypedStorage with {type(idx).__name__}")
        n = self.size()
        if not -n <= idx < n:
            raise IndexError(f"index {idx} out of range for storage of size {n}")
        return idx % n

    def __getitem__(self, idx):
        i = self._index(idx)
        item = self.dtype.itemsize
        return self._untyped_storage._read(i * item, item).view(self.dtype.np)[0].item()

    def _write_elements(self, start: int, values: np.ndarray) -> None:
        self._untyped_storage._write(start * self.dtype.itemsize, values.astype(self.dtype.np).view(np.uint8))

    def __setitem__(self, idx, value) -> None:
        i = self._index(idx)
        self._write_elements(i, np.array([value]))

    def fill_(self, value):
        """Every element set to ``value``, in place; returns the storage."""
        self._write_elements(0, np.full(self.size(), value))
        return self

    def __repr__(self) -> str:
        body = "\n".join(f" {v}" for v in self.tolist())
        return f"{body}\n[tritensor.storage.TypedStorage(dtype={self.dtype}, device={self.device}) of size {self.size()}]"

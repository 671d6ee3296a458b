"""``nn.Parameter``: a leaf tensor that requires grad and that a Module registers when it is
assigned as an attribute; ``nn.Buffer``: a tensor a Module registers as a buffer the same way,
as torch 2.13."""
from __future__ import annotations

from ..core.tensor import Tensor
from ..core.factories import empty


class Parameter(Tensor):
    """A tensor a Module registers as a parameter when assigned as an attribute: it shares ``data``'s storage and
    version counter and requires grad by default, as torch.nn.Parameter (``Parameter()`` is an empty one)."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad: bool = True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be a Tensor, got {type(data).__name__}")
        p = Tensor.__new__(cls)
        Tensor.__init__(p, data._storage, data.shape, data.stride(), data.storage_offset(), data.dtype)
        p._version_counter = data._version_counter
        p.requires_grad = requires_grad
        return p

    def __init__(self, data=None, requires_grad: bool = True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        return (Parameter, (self.detach().clone(), self.requires_grad))


class Buffer(Tensor):
    """``nn.Buffer(data, persistent=True)`` (torch 2.13): a tensor that a Module registers as a
    buffer when it is assigned as an attribute (``register_buffer(name, data, persistent)``); a
    non-persistent one is left out of ``state_dict``. It shares ``data``'s memory, detached."""

    __slots__ = ("persistent",)

    def __new__(cls, data=None, *, persistent: bool = True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer: data must be a Tensor, got {type(data).__name__}")
        b = Tensor.__new__(cls)
        Tensor.__init__(b, data._storage, data.shape, data.stride(), data.storage_offset(), data.dtype)
        b._version_counter = data._version_counter
        b.requires_grad = data.requires_grad
        b.persistent = persistent
        return b

    def __init__(self, data=None, *, persistent: bool = True):
        pass

    def __reduce_ex__(self, proto):
        return (_rebuild_buffer, (self.detach().clone(), self.persistent))


def _rebuild_buffer(data, persistent):
    return Buffer(data, persistent=persistent)

"""``nn.Parameter``: a leaf tensor that requires grad and that a Module registers when it is
assigned as an attribute."""
from __future__ import annotations

from ..core.tensor import Tensor
from ..core.factories import empty


class Parameter(Tensor):
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

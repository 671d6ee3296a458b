"""``nn.Parameter``: a leaf tensor that requires grad and that a Module registers when it is
assigned as an attribute; ``nn.Buffer``: a tensor a Module registers as a buffer the same way,
as torch 2.13. ``UninitializedParameter`` / ``UninitializedBuffer``: the placeholders of the lazy
modules, whose shape is known only at the first forward; ``materialize(shape)`` gives them storage
and turns them, in place, into a Parameter / a plain Tensor (so a module, an optimizer or a hook
holding one holds the materialized tensor)."""
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


class UninitializedTensorMixin:
    """What both placeholders share: ``materialize``, a repr that says what they are, moves and casts
    that change the dtype/device the tensor will have (answered in place, so ``Module.to`` keeps the
    placeholder), and pickling as a placeholder."""

    __slots__ = ()
    cls_to_become: type = Tensor

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the tensor ``shape`` (uninitialized memory, on its own device and dtype unless given)
        and make it a ``cls_to_become``, in place."""
        data = empty(tuple(shape), device=self.device if device is None else device,
                     dtype=self.dtype if dtype is None else dtype)
        self._become(data)
        self.__class__ = self.cls_to_become

    def _become(self, data) -> None:
        requires_grad = self.requires_grad
        Tensor.__init__(self, data._storage, data.shape, data.stride(), data.storage_offset(), data.dtype)
        self._version_counter = data._version_counter
        self.requires_grad = requires_grad

    def _moved(self, moved):
        self._become(empty(0, device=moved.device, dtype=moved.dtype))
        return self

    def to(self, *args, **kwargs):
        """Tensor.to for a placeholder: the dtype/device it will have changes, in place (Module.to keeps the
        placeholder)."""
        return self._moved(Tensor.to(self, *args, **kwargs))

    def cuda(self, *args, **kwargs):
        """Tensor.cuda for a placeholder: it will be made on the device, in place."""
        return self._moved(Tensor.cuda(self, *args, **kwargs))

    def cpu(self, *args, **kwargs):
        """Tensor.cpu for a placeholder: it will be made in host memory, in place."""
        return self._moved(Tensor.cpu(self, *args, **kwargs))

    def half(self, *args, **kwargs):
        """Tensor.half for a placeholder: it will be made in float16, in place."""
        return self._moved(Tensor.half(self, *args, **kwargs))

    def float(self, *args, **kwargs):
        """Tensor.float for a placeholder: it will be made in float32, in place."""
        return self._moved(Tensor.float(self, *args, **kwargs))

    def double(self, *args, **kwargs):
        """Tensor.double for a placeholder: it will be made in float64, in place."""
        return self._moved(Tensor.double(self, *args, **kwargs))

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    def __str__(self) -> str:
        return f"<{type(self).__name__}>"

    def __reduce_ex__(self, proto):
        return (type(self), (self.requires_grad, self.device, self.dtype))

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet (a lazy module's, until its first forward), as
    torch.nn.UninitializedParameter; ``materialize(shape)`` makes it a Parameter in place."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        return Parameter.__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet, as torch.nn.UninitializedBuffer; ``materialize(shape)``
    makes it a plain Tensor in place. (Whether it persists is the ``register_buffer`` call's.)"""

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True):
        data = empty(0, device=device, dtype=dtype)
        b = Tensor.__new__(cls)
        Tensor.__init__(b, data._storage, data.shape, data.stride(), data.storage_offset(), data.dtype)
        b._version_counter = data._version_counter
        b.requires_grad = requires_grad
        return b

    def __init__(self, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True):
        pass


def is_lazy(param) -> bool:
    """Whether ``param`` is a placeholder not materialized yet, as torch.nn.parameter.is_lazy."""
    return isinstance(param, UninitializedTensorMixin)

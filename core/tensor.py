"""The Tensor: a typed, strided view of a storage on one device, with every op of the op table.

What a tensor *is* (storage, shape, strides, offset, dtype, version counter) lives in
``core/tensor_base.py``. This module adds the ops: every op method, in-place form and Python
operator is generated from the op table (``core/ops/table.py``) when the class is created, as
``dispatch.call(op, self, ...)`` (``core/dispatch.py``: autocast -> autograd -> core -> kernel);
nothing rebinds them later. The composite methods the table lists (flatten, split, cuda(), half()
...: ``COMPOSITE_METHODS``, written in their family's module in ``core/ops/``) are a second mixin,
made the same way. What is written out below is no op: Python's protocol (len, iter, bool, int, hash,
pickling) and host interop (numpy, item, tolist, repr, DLPack).
"""
from __future__ import annotations

import functools

import numpy as np

from . import dispatch, dlpack, printing
from ..runtime import cuda, memory
from ..runtime import dtype as dt
from ..runtime.device import device
from .ops import host_tensor, table
from .shape import (Size, _shape_arg, broadcast_shapes, contiguous_format, contiguous_strides,  # noqa: F401  (re-exported)
                    infer_size, normalize_dim, preserve_format, view_strides)
from .tensor_base import TensorBase


def _method(op, name: str):
    """``Tensor.<name>``: the op with ``self`` as its argument ``op.self_arg`` (and NumPy's names for
    ``dim``/``keepdim`` where the op has them, as torch's native methods)."""
    k = op.self_arg
    aliases = table.numpy_names(op.impl, op.name)
    if aliases:
        def method(self, *args, **kwargs):
            if kwargs:
                kwargs = table.rename_numpy_keywords(kwargs, aliases, name)
            return dispatch.call(op, self, *args, **kwargs)
    elif k == 0:
        def method(self, *args, **kwargs):
            return dispatch.call(op, self, *args, **kwargs)
    else:
        def method(self, *args, **kwargs):
            return dispatch.call(op, *args[:k], self, *args[k:], **kwargs)
    return _named(method, op, name)


def _reflected(op, name: str):
    """``__radd__`` and friends: ``other + self``."""
    def method(self, other):
        return dispatch.call(op, other, self)
    return _named(method, op, name)


def _named(fn, op, name: str):
    functools.update_wrapper(fn, op.impl)  # the core entry's signature and docstring
    fn.__name__, fn.__qualname__, fn.__module__ = name, f"Tensor.{name}", __name__
    return fn


def _api(name: str):
    """The accessor of a Tensor autograd API property (data, retains_grad): the autograd layer
    answers it (the API *methods*, backward, register_hook ..., come from the table like any op)."""
    op = table.OPS[name]

    def method(self, *args, **kwargs):
        return dispatch.call(op, self, *args, **kwargs)
    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    return method


def _op_methods(ops) -> dict:
    """Every method and operator the table declares for Tensor, by attribute name."""
    out = {}
    for op in ops.values():
        names = ((op.name,) + op.aliases) if op.method else ()
        for name in names + op.dunders:
            out[name] = _method(op, name)
        for name in op.rdunders:
            out[name] = _reflected(op, name)
    return out


def _composites(op_methods: dict) -> dict:
    """The composite methods the table lists, checked against the op methods: no name is both."""
    both = op_methods.keys() & table.COMPOSITE_METHODS.keys()
    if both:
        raise TypeError(f"Tensor methods declared both as an op and as a composite: {sorted(both)}")
    return dict(table.COMPOSITE_METHODS)


# The generated methods, as mixin classes Tensor derives from (made once, here; never changed).
_OP_METHODS = _op_methods(table.OPS)
TensorOps = type("TensorOps", (), {"__slots__": (), "__module__": __name__, "__doc__":
                                   "Tensor's op methods and operators, generated from core/ops/table.py.",
                                   **_OP_METHODS})
TensorComposites = type("TensorComposites", (), {"__slots__": (), "__module__": __name__, "__doc__":
                                                 "Tensor's composite methods, as core/ops/table.py lists them.",
                                                 **_composites(_OP_METHODS)})


class Tensor(TensorComposites, TensorOps, TensorBase, results=True):
    """torch.Tensor: a typed, strided view of a storage on one device. What it is lives in TensorBase; its op
    methods and operators (TensorOps) and its composite methods (TensorComposites) come from the op table;
    written here are Python's protocol and host interop."""
    __slots__ = ()

    # ----- autograd API (answered by the autograd layer; see core/dispatch.py) ------------------
    data = property(_api("get_data"), _api("set_data"))
    retains_grad = property(_api("retains_grad"))
    grad_dtype = property(_api("get_grad_dtype"), _api("set_grad_dtype"))

    # ----- Python protocol ------------------------------------------------------------------------
    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def __hash__(self):  # by identity, as torch (TensorOps' generated __eq__ would leave it None)
        return id(self)

    def __reduce_ex__(self, proto):
        """Pickle by value: the bytes, dtype, device and requires_grad. (The default would copy the
        storage's raw pointer, so the unpickled tensor would alias, or outlive, the original's memory.)"""
        raw = self._to_host_array().reshape(-1).view(np.uint8)
        return (_rebuild_tensor, (raw, tuple(self._shape), self.dtype.name, str(self.device),
                                  bool(self._requires_grad and self.grad_fn is None)))

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __float__(self) -> float:
        return float(self.item())

    # ----- host interop -----------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """A NumPy view that shares this CPU tensor's memory (PyTorch's semantics)."""
        if self.device.type != "cpu":
            if force:
                return self.cpu().numpy()
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy. "
                "Use Tensor.cpu() to copy the tensor to host memory first."
            )
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        isz = self.dtype.itemsize
        buf = self._storage.bytes_view()
        if self.numel() == 0:
            return np.empty(self._shape, dtype=self.dtype.np)
        return np.ndarray(
            self._shape, dtype=self.dtype.np, buffer=buf, offset=self._offset * isz,
            strides=tuple(s * isz for s in self._stride),
        )

    def _to_host_array(self) -> np.ndarray:
        """A fresh, C-contiguous host copy (works on any device)."""
        if self.device.type == "cpu":
            return np.array(self.numpy(force=True), order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
        src = self.contiguous()
        out = np.empty(self._shape, dtype=self.dtype.np)
        memory.device_to_host(out.reshape(-1).view(np.uint8), src.data_ptr(), cuda.current_stream(self.device.index))
        return out

    def item(self):
        """torch's Tensor.item: the one element as a Python number (a host sync on a device); an error for
        more elements."""
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self._to_host_array().reshape(-1)[0].item()

    def tolist(self):
        """torch's Tensor.tolist: the elements as nested Python lists of numbers (a host sync on a device)."""
        a = self._to_host_array()
        if self.dtype is dt.bfloat16:
            a = a.astype(np.float32)
        return a.tolist()

    # ----- printing (torch's print rules live in core/printing.py) ---------------------------
    def __repr__(self) -> str:
        a = self._to_host_array()
        return printing.tensor_repr(self, a.astype(np.float32) if self.dtype is dt.bfloat16 else a)

    def __format__(self, format_spec: str) -> str:
        """A 0-d tensor formats as its number (``f"{loss:.4f}"``); others as ``object`` does, as torch."""
        if self.ndim == 0 and type(self) is Tensor:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    __str__ = __repr__

    # ----- interop (DLPack, NumPy's __array__, __cuda_array_interface__; core/dlpack.py) ----------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return dlpack.to_dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple:
        return dlpack.dlpack_device(self)

    def __array__(self, dtype=None, copy=None):
        return dlpack.as_array(self, dtype, copy)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """A NumPy ufunc applied to a tensor (``np.exp(t)``) gives a tensor back, on this tensor's
        device, as torch's does (NumPy computed it from ``__array__``'s host array)."""
        return host_tensor(np.ascontiguousarray(np.asarray(array)), self.device)

    @property
    def __cuda_array_interface__(self) -> dict:
        return dlpack.cuda_array_interface(self)


def _rebuild_tensor(raw, shape, dtype_name, device_str, requires_grad):
    """Unpickle a tensor (see ``Tensor.__reduce_ex__``): a fresh tensor owning a copy of the bytes."""
    arr = np.frombuffer(raw, dtype=np.uint8).view(dt._by_name(dtype_name).np).reshape(shape)
    out = host_tensor(arr, device(device_str))
    if requires_grad:
        out.requires_grad_(True)
    return out

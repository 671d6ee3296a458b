"""The Tensor: a typed, strided view of a storage on one device.

Everything here is bookkeeping on shape, stride and storage offset (views share storage and
copy nothing); every byte of compute is a Triton kernel reached through ``core/ops``. Views share
the version counter of the storage they see, so in-place writes through any view are visible
to whoever saved the tensor (autograd checks this).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import dtype as dt
from . import memory, mode
from .device import CPU, device


class Size(tuple):
    """``tensor.shape``: a tuple that prints like PyTorch's."""

    def __repr__(self) -> str:
        return f"tritensor.Size({list(self)})"

    def numel(self) -> int:
        return math.prod(self)


class _Version:
    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


def contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def normalize_dim(d, ndim: int, argname: str = "dim") -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
        raise TypeError(f"{argname}: expected an int, got {type(d).__name__}")
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not lo <= d <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
    return int(d) % max(ndim, 1)


def _shape_arg(args, argname="size") -> tuple:
    """Accept f(2, 3) and f((2, 3)) and f([2, 3]) as PyTorch does."""
    if len(args) == 1 and isinstance(args[0], (tuple, list, Size)):
        args = tuple(args[0])
    out = []
    for s in args:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{argname}: expected a sequence of ints, got {args!r}")
        out.append(int(s))
    return tuple(out)


def infer_size(shape, numel: int) -> tuple:
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred (-1)")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    known = math.prod(s for s in shape if s != -1)
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def view_strides(oldshape, oldstride, newshape):
    """Strides that let ``newshape`` view memory laid out as (oldshape, oldstride), or None.

    PyTorch's ``computeStride``: walk both shapes from the right in chunks of dims that are
    contiguous with each other; a new dim may not straddle two chunks.
    """
    if math.prod(oldshape) == 0:
        return contiguous_strides(newshape)
    if not oldshape:
        oldshape, oldstride = (1,), (1,)
    newstride = [0] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base = oldstride[-1]
    tensor_numel, view_numel = 1, 1
    for td in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[td]
        if td == 0 or (oldshape[td - 1] != 1 and oldstride[td - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if td > 0:
                chunk_base = oldstride[td - 1]
                tensor_numel, view_numel = 1, 1
    if view_d != -1:
        return None
    return tuple(newstride)


def broadcast_shapes(*shapes) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                raise RuntimeError(
                    "shapes cannot be broadcast together: "
                    + " and ".join(str(list(x)) for x in shapes)
                    + f" (mismatch at dimension {j}: {out[j]} vs {n})"
                )
    return tuple(out)


class Tensor:
    __slots__ = (
        "_storage", "_shape", "_stride", "_offset", "dtype", "device", "_version_counter",
        "_base", "_requires_grad", "grad", "grad_fn", "_hooks", "_post_acc_hooks", "_autograd_meta", "__weakref__",
    )

    def __init__(self, storage, shape, stride, offset, dtype_, base=None):
        self._storage = storage
        self._shape = Size(shape)
        self._stride = tuple(stride)
        self._offset = int(offset)
        self.dtype = dtype_
        self.device = storage.device
        self._base = base
        self._version_counter = base._version_counter if base is not None else _Version()
        self._requires_grad = False
        self._autograd_meta = None  # autograd's per-tensor extras (output_nr, grad accumulator, retain_grad)
        self.grad = None
        self.grad_fn = None
        self._hooks = None
        self._post_acc_hooks = None

    # ----- construction -----------------------------------------------------------------------
    @staticmethod
    def _empty(shape, dtype_, dev) -> "Tensor":
        shape = tuple(int(s) for s in shape)
        for s in shape:
            if s < 0:
                raise RuntimeError(f"negative dimension {s} in shape {list(shape)}")
        nbytes = math.prod(shape) * dtype_.itemsize
        if dev.type == "cpu":
            storage = memory.HostStorage(nbytes)
        else:
            from . import cuda

            idx = cuda.current_device() if dev.index is None else dev.index
            dev = device("cuda", idx)
            storage = memory.CudaStorage(nbytes, dev, cuda.current_stream(idx))
        return Tensor(storage, shape, contiguous_strides(shape), 0, dtype_)

    def _view(self, shape, stride, offset=None) -> "Tensor":
        base = self._base if self._base is not None else self
        return Tensor(self._storage, shape, stride, self._offset if offset is None else offset, self.dtype, base)

    # ----- autograd flag (the engine is tritensor/autograd; it binds backward, detach, hooks ...) -
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value) -> None:
        if not value and self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if value and not self.dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        self._requires_grad = bool(value)

    # ----- metadata ---------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return self._shape

    def size(self, dim=None):
        return self._shape if dim is None else self._shape[normalize_dim(dim, self.ndim)]

    def stride(self, dim=None):
        return self._stride if dim is None else self._stride[normalize_dim(dim, self.ndim)]

    def storage_offset(self) -> int:
        return self._offset

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return math.prod(self._shape)

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def data_ptr(self) -> int:
        return self._storage.data_ptr() + self._offset * self.dtype.itemsize

    def untyped_storage(self):
        return self._storage

    def record_stream(self, stream) -> None:
        """Mark the memory as in use by ``stream``: its free waits for work queued there."""
        self._storage.record_stream(stream)

    @property
    def _version(self) -> int:
        return self._version_counter.value

    def _bump_version(self) -> None:
        self._version_counter.value += 1

    def is_contiguous(self) -> bool:
        expected = 1
        for n, s in zip(reversed(self._shape), reversed(self._stride)):
            if n == 0:
                return True
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def __hash__(self):
        return id(self)

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

    # ----- views ------------------------------------------------------------------------------
    def view(self, *shape) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], dt.dtype):
            raise NotImplementedError("view(dtype) is not supported; use .to(dtype)")
        shape = infer_size(_shape_arg(shape, "view"), self.numel())
        strides = view_strides(self._shape, self._stride, shape)
        if strides is None:
            raise RuntimeError(
                f"view size {list(shape)} is not compatible with input tensor's size {list(self._shape)} and "
                f"stride {list(self._stride)} (at least one dimension spans across two contiguous subspaces). "
                "Use .reshape(...) instead."
            )
        return self._view(shape, strides)

    def reshape(self, *shape) -> "Tensor":
        shape = infer_size(_shape_arg(shape, "reshape"), self.numel())
        strides = view_strides(self._shape, self._stride, shape)
        if strides is not None:
            return self._view(shape, strides)
        return self.contiguous().view(shape)

    def view_as(self, other) -> "Tensor":
        return self.view(other.shape)

    def reshape_as(self, other) -> "Tensor":
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        if self.ndim == 0:
            return self.reshape(1)
        s, e = normalize_dim(start_dim, self.ndim, "start_dim"), normalize_dim(end_dim, self.ndim, "end_dim")
        if s > e:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        shape = self._shape[:s] + (math.prod(self._shape[s : e + 1]),) + self._shape[e + 1 :]
        return self.reshape(shape)

    def unflatten(self, dim: int, sizes) -> "Tensor":
        d = normalize_dim(dim, self.ndim)
        sizes = infer_size(sizes, self._shape[d])
        return self.view(self._shape[:d] + tuple(sizes) + self._shape[d + 1 :])

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        d0, d1 = normalize_dim(dim0, self.ndim, "dim0"), normalize_dim(dim1, self.ndim, "dim1")
        shape, stride = list(self._shape), list(self._stride)
        if self.ndim:
            shape[d0], shape[d1] = shape[d1], shape[d0]
            stride[d0], stride[d1] = stride[d1], stride[d0]
        return self._view(shape, stride)

    swapaxes = transpose

    def t(self) -> "Tensor":
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self.transpose(0, 1) if self.ndim == 2 else self

    def permute(self, *dims) -> "Tensor":
        dims = _shape_arg(dims, "dims")
        if len(dims) != self.ndim:
            raise RuntimeError(
                f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
                f"of the desired ordering of dimensions i.e. input.dim() = {self.ndim} is not equal to "
                f"len(dims) = {len(dims)}".replace("(sparse_coo)", "")
            )
        nd = [normalize_dim(d, self.ndim, "dims") for d in dims]
        if len(set(nd)) != len(nd):
            raise RuntimeError(f"permute(): duplicate dims are not allowed: {list(dims)}")
        return self._view([self._shape[d] for d in nd], [self._stride[d] for d in nd])

    @property
    def T(self) -> "Tensor":
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> "Tensor":
        if self.ndim < 2:
            raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices")
        return self.transpose(-2, -1)

    def expand(self, *sizes) -> "Tensor":
        sizes = _shape_arg(sizes, "size")
        if len(sizes) < self.ndim:
            raise RuntimeError(
                f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the number "
                f"of dimensions in the tensor ({self.ndim})"
            )
        lead = len(sizes) - self.ndim
        shape, stride = [], []
        for i, s in enumerate(sizes):
            if i < lead:
                if s < 0:
                    raise RuntimeError(f"expand: -1 is not allowed in a leading, non-existing dimension {i}")
                shape.append(s)
                stride.append(0)
                continue
            n, st = self._shape[i - lead], self._stride[i - lead]
            if s == -1 or s == n:
                shape.append(n)
                stride.append(st)
            elif n == 1:
                shape.append(s)
                stride.append(0)
            else:
                raise RuntimeError(
                    f"The expanded size of the tensor ({s}) must match the existing size ({n}) at non-singleton "
                    f"dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(self._shape)}"
                )
        return self._view(shape, stride)

    def expand_as(self, other) -> "Tensor":
        return self.expand(other.shape)

    def broadcast_to(self, shape) -> "Tensor":
        return self.expand(shape)

    def squeeze(self, dim=None) -> "Tensor":
        if dim is None:
            dims = {i for i, s in enumerate(self._shape) if s == 1}
        else:
            dims = dim if isinstance(dim, (tuple, list)) else (dim,)
            dims = {normalize_dim(d, self.ndim) for d in dims}
            dims = {d for d in dims if self.ndim and self._shape[d] == 1}
        keep = [i for i in range(self.ndim) if i not in dims]
        return self._view([self._shape[i] for i in keep], [self._stride[i] for i in keep])

    def unsqueeze(self, dim: int) -> "Tensor":
        d = normalize_dim(dim, self.ndim + 1)
        shape, stride = list(self._shape), list(self._stride)
        new_stride = shape[d] * stride[d] if d < self.ndim else 1
        shape.insert(d, 1)
        stride.insert(d, new_stride)
        return self._view(shape, stride)

    def narrow(self, dim: int, start, length: int) -> "Tensor":
        d = normalize_dim(dim, self.ndim)
        n = self._shape[d]
        start = int(start)
        if start < 0:
            start += n
        if not 0 <= start <= n or length < 0 or start + length > n:
            raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n}) of dim {d}")
        shape = list(self._shape)
        shape[d] = length
        return self._view(shape, self._stride, self._offset + start * self._stride[d])

    def select(self, dim: int, index: int) -> "Tensor":
        d = normalize_dim(dim, self.ndim)
        n = self._shape[d]
        if not -n <= index < n:
            raise IndexError(f"index {index} is out of bounds for dimension {d} with size {n}")
        index %= n
        return self._view(
            self._shape[:d] + self._shape[d + 1 :],
            self._stride[:d] + self._stride[d + 1 :],
            self._offset + index * self._stride[d],
        )

    def unbind(self, dim: int = 0):
        d = normalize_dim(dim, self.ndim)
        return tuple(self.select(d, i) for i in range(self._shape[d]))

    def split(self, split_size, dim: int = 0):
        d = normalize_dim(dim, self.ndim)
        n = self._shape[d]
        if isinstance(split_size, int):
            if split_size <= 0:
                raise ValueError(f"split_size: expected a positive int, got {split_size}")
            sizes = [min(split_size, n - i) for i in range(0, n, split_size)] or [0]
        else:
            sizes = list(split_size)
            if sum(sizes) != n:
                raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n}, got {sizes}")
        out, start = [], 0
        for s in sizes:
            out.append(self.narrow(d, start, s))
            start += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0):
        d = normalize_dim(dim, self.ndim)
        return self.split(max(1, -(-self._shape[d] // chunks)), d)

    def __getitem__(self, index) -> "Tensor":
        if _index.is_advanced(index):  # integer index tensors, lists, bool masks: a copy (core/ops/index.py)
            return _index.getitem(self, index)
        return self._basic_getitem(index)

    def _basic_getitem(self, index) -> "Tensor":
        if not isinstance(index, tuple):
            index = (index,)
        n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
        if sum(1 for i in index if i is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if n_real > self.ndim:
            raise IndexError(f"too many indices for tensor of dimension {self.ndim}")
        expanded = []
        for i in index:
            if i is Ellipsis:
                expanded.extend([slice(None)] * (self.ndim - n_real))
            else:
                expanded.append(i)
        shape, stride, offset, d = [], [], self._offset, 0
        for i in expanded:
            if i is None:
                shape.append(1)
                stride.append(0)
                continue
            n = self._shape[d]
            if isinstance(i, Tensor) and i.numel() == 1 and not i.dtype.is_floating_point and i.dtype is not dt.bool_:
                i = int(i.item())
            if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
                offset += (int(i) % n) * self._stride[d]
            elif isinstance(i, slice):
                start, stop, step = i.start, i.stop, 1 if i.step is None else int(i.step)
                if step <= 0:
                    raise ValueError("step must be greater than zero")
                start, stop, _ = slice(start, stop, step).indices(n)
                length = max(0, -(-(stop - start) // step))
                if length:
                    offset += start * self._stride[d]
                shape.append(length)
                stride.append(self._stride[d] * step)
            else:
                raise TypeError(
                    f"index: only integers, slices (`:`), ellipsis (`...`), None and integer or bool "
                    f"tensors/lists are supported, got {type(i).__name__}"
                )
            d += 1
        shape += self._shape[d:]
        stride += self._stride[d:]
        return self._view(shape, stride, offset)

    def __setitem__(self, index, value) -> None:
        if _index.is_advanced(index):  # index_put_ without accumulate (core/ops/index.py)
            return _index.setitem(self, index, value)
        target = self[index]
        if isinstance(value, Tensor):
            target.copy_(value)
        else:
            target.fill_(value)

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
        from . import cuda

        src = self.contiguous()
        out = np.empty(self._shape, dtype=self.dtype.np)
        memory.device_to_host(out.reshape(-1).view(np.uint8), src.data_ptr(), cuda.current_stream(self.device.index))
        return out

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self._to_host_array().reshape(-1)[0].item()

    def tolist(self):
        a = self._to_host_array()
        if self.dtype is dt.bfloat16:
            a = a.astype(np.float32)
        return a.tolist()

    def __repr__(self) -> str:
        a = self._to_host_array()
        if self.dtype is dt.bfloat16:
            a = a.astype(np.float32)
        body = np.array2string(a, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3)
        extras = []
        if self.device.type != "cpu":
            extras.append(f"device='{self.device}'")
        if self.dtype not in (dt.float32, dt.int64, dt.bool_) or self.numel() == 0:
            extras.append(f"dtype={self.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{type(self.grad_fn).__name__}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    __str__ = __repr__

    # ----- copies, devices and dtypes ---------------------------------------------------------
    def contiguous(self) -> "Tensor":
        return self if self.is_contiguous() else self.clone()

    def clone(self) -> "Tensor":
        out = Tensor._empty(self._shape, self.dtype, self.device)
        _ops.copy_into(out, self)
        return out

    def copy_(self, src) -> "Tensor":
        """Write ``src`` into this tensor in place: broadcasts, casts and crosses devices."""
        if not isinstance(src, Tensor):
            raise TypeError(f"copy_(): src must be a Tensor, got {type(src).__name__}")
        broadcast_shapes(src.shape, self.shape)  # raises with both shapes
        if src.shape != self.shape:
            if len(src.shape) > self.ndim:
                src = src.reshape(src.shape[len(src.shape) - self.ndim:]) if math.prod(
                    src.shape[: len(src.shape) - self.ndim]) == 1 else src
            src = src.expand(self.shape)
        if src.device != self.device:
            src = src.to(self.device)
        _ops.copy_into(self, src)
        self._bump_version()
        return self

    def to(self, *args, **kwargs) -> "Tensor":
        target_dev, target_dt, copy = self.device, self.dtype, bool(kwargs.pop("copy", False))
        kwargs.pop("non_blocking", None)
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, Tensor):
                target_dev, target_dt = a.device, a.dtype
            elif isinstance(a, dt.dtype):
                target_dt = a
            elif isinstance(a, (str, device, int)) and not isinstance(a, bool):
                target_dev = device(a)
            elif a is None:
                continue
            else:
                target_dt = dt.to_dtype(a, "to(dtype)")
        if target_dev.type == "cuda":
            from . import cuda

            cuda._require(f"to({target_dev})")
            if target_dev.index is None:
                target_dev = device("cuda", cuda.current_device())
        same_dev = target_dev == self.device
        if same_dev and target_dt is self.dtype:
            return self.clone() if copy else self
        if same_dev:
            out = Tensor._empty(self._shape, target_dt, self.device)
            _ops.copy_into(out, self)
            return out
        return _ops.move(self, target_dev, target_dt)

    def cuda(self, device_=None) -> "Tensor":
        return self.to(device("cuda", device_) if isinstance(device_, int) else (device_ or "cuda"))

    def cpu(self) -> "Tensor":
        return self.to(CPU)

    def type(self, dtype_=None):
        if dtype_ is None:
            return f"tritensor.{self.dtype.name}"
        return self.to(dt.to_dtype(dtype_))

    def half(self):
        return self.to(dt.float16)

    def bfloat16(self):
        return self.to(dt.bfloat16)

    def float(self):
        return self.to(dt.float32)

    def double(self):
        return self.to(dt.float64)

    def int(self):
        return self.to(dt.int32)

    def long(self):
        return self.to(dt.int64)

    def bool(self):
        return self.to(dt.bool_)

    def new_empty(self, *size, dtype=None, device=None):
        return Tensor._empty(_shape_arg(size), dtype or self.dtype, _dev(device, self.device))

    def new_zeros(self, *size, dtype=None, device=None):
        return self.new_full(_shape_arg(size), 0, dtype=dtype, device=device)

    def new_ones(self, *size, dtype=None, device=None):
        return self.new_full(_shape_arg(size), 1, dtype=dtype, device=device)

    def new_full(self, size, fill_value, dtype=None, device=None):
        from .factories import full

        return full(size, fill_value, dtype=dtype or self.dtype, device=_dev(device, self.device))

    def new_tensor(self, data, dtype=None, device=None):
        from .factories import tensor

        return tensor(data, dtype=dtype or self.dtype, device=_dev(device, self.device))

    def fill_(self, value) -> "Tensor":
        if isinstance(value, Tensor):
            if value.numel() != 1:
                raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
            value = value.item()
        if not isinstance(value, (numbers.Number, np.number, bool)):
            raise TypeError(f"fill_(): value must be a number, got {type(value).__name__}")
        _ops.fill(self, value)
        self._bump_version()
        return self

    def zero_(self) -> "Tensor":
        return self.fill_(0)


def _dev(d, default):
    return default if d is None else device(d)


from . import ops as _ops  # noqa: E402  (ops needs Tensor defined)
from .ops import elementwise as _ew  # noqa: E402
from .ops import index as _index  # noqa: E402

# Op methods. Below, every op is attached as its *core* op (check, allocate, run a kernel; no
# graph), so the Tensor is complete without autograd. ``import tritensor`` then runs
# ``autograd.functions.install``, which rebinds the differentiable ones (arithmetic, math,
# reductions, matmul, views...) to recording versions; comparisons and logical ops keep these.


def _unary_method(op):
    def method(self):
        return _ew.unary(op, self)

    def method_(self):
        _ew.unary(op, self, out=self)
        self._bump_version()
        return self

    method.__name__, method_.__name__ = op, op + "_"
    method.__doc__ = f"Elementwise ``{op}`` (kernel: triton_kernels/elementwise.py)."
    return method, method_


def _binary_method(op, reflected=False):
    def method(self, other):
        return _ew.binary(op, other, self) if reflected else _ew.binary(op, self, other)

    method.__name__ = op
    return method


def _inplace_binary(op):
    def method_(self, other):
        _ew.binary(op, self, other, out=self)
        self._bump_version()
        return self

    method_.__name__ = op + "_"
    return method_


for _op in _ew._k.UNARY:
    _m, _m_ = _unary_method(_op)
    setattr(Tensor, _op, _m)
    setattr(Tensor, _op + "_", _m_)
for _op in _ew._k.BINARY:
    setattr(Tensor, _op, _binary_method(_op))
    setattr(Tensor, _op + "_", _inplace_binary(_op))

# Python operators, as PyTorch maps them.
for _dunder, _op in {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "pow": "pow",
                     "floordiv": "floor_divide", "mod": "remainder"}.items():
    setattr(Tensor, f"__{_dunder}__", _binary_method(_op))
    setattr(Tensor, f"__r{_dunder}__", _binary_method(_op, reflected=True))
    setattr(Tensor, f"__i{_dunder}__", _inplace_binary(_op))
for _dunder, _op in {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}.items():
    setattr(Tensor, f"__{_dunder}__", _binary_method(_op))
Tensor.__neg__ = Tensor.neg
Tensor.__abs__ = Tensor.abs
Tensor.__invert__ = lambda self: _ew.unary("logical_not", self) if self.dtype is dt.bool_ else _invert_error(self)
Tensor.__and__ = _binary_method("logical_and")
Tensor.__or__ = _binary_method("logical_or")
Tensor.true_divide = Tensor.div
Tensor.multiply = Tensor.mul
Tensor.subtract = Tensor.sub
Tensor.clamp_min = lambda self, m: _ew.binary("maximum", self, m)
Tensor.clamp_max = lambda self, m: _ew.binary("minimum", self, m)


def _invert_error(t):
    raise TypeError(f"~ (bitwise not) is only implemented for bool tensors, got {t.dtype}")


def _clamp(self, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None")
    out = self if min is None else _ew.binary("maximum", self, min)
    return out if max is None else _ew.binary("minimum", out, max)


Tensor.clamp = Tensor.clip = _clamp
Tensor.where = lambda self, condition, other: _ew.where(condition, self, other)
Tensor.__hash__ = lambda self: id(self)


# Matmul family (kernels: triton_kernels/matmul.py; argument checks: core/ops/matmul.py).
from .ops import matmul as _mm  # noqa: E402


def _matmul(self, other):
    return _mm.matmul(self, other)


def _rmatmul(self, other):
    return _mm.matmul(other, self)


Tensor.matmul = Tensor.__matmul__ = _matmul
Tensor.__rmatmul__ = _rmatmul
Tensor.mm = lambda self, mat2: _mm.mm(self, mat2)
Tensor.bmm = lambda self, mat2: _mm.bmm(self, mat2)


# Reduction and normalization families (kernels: triton_kernels/reduce.py, softmax.py, layer_norm.py;
# argument checks: core/ops/reduce.py, core/ops/norm.py). The free functions take ``input``
# first, so they are the methods as they stand.
from .ops import norm as _norm  # noqa: E402
from .ops import reduce as _red  # noqa: E402

for _name in ("sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "all", "any"):
    setattr(Tensor, _name, getattr(_red, _name))
Tensor.softmax = _norm.softmax
Tensor.log_softmax = _norm.log_softmax


# Indexing family (kernels: triton_kernels/index.py; argument checks: core/ops/index.py).
Tensor.index_select = _index.index_select
Tensor.gather = _index.gather
Tensor.scatter_add = _index.scatter_add
Tensor.index_add = _index.index_add
Tensor.scatter_add_ = lambda self, dim, index, src: _index.scatter_add(self, dim, index, src, out=self)
Tensor.index_add_ = lambda self, dim, index, source, *, alpha=1: _index.index_add(self, dim, index, source,
                                                                                   alpha=alpha, out=self)

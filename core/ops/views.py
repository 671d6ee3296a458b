"""The view ops: ``view reshape transpose permute expand squeeze unsqueeze narrow select`` and basic
indexing (``x[1, :, None]``). Each computes the new shape/strides/offset over the same storage and
copies nothing (only ``reshape`` copies, when no strides can express the result).

These are the core entries of the op table (``core/ops/table.py``). The composites written with
them (``flatten t T mT split chunk unbind tensor_split view_as ...``) follow at the end: Tensor
methods that reach these through the dispatcher, so autograd records them too.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...runtime import dtype as dt
from ..shape import _shape_arg, infer_size, normalize_dim, view_strides
from ..tensor_base import TensorBase


def view(input, *shape):
    """``Tensor.view``: the same storage seen with ``shape`` (one -1 inferred); torch's error when no strides
    can express it without a copy."""
    if len(shape) == 1 and isinstance(shape[0], dt.dtype):
        return view_dtype(input, shape[0])
    shape = infer_size(_shape_arg(shape, "view"), input.numel())
    strides = view_strides(input._shape, input._stride, shape)
    if strides is None:
        raise RuntimeError(
            f"view size {list(shape)} is not compatible with input tensor's size {list(input._shape)} and "
            f"stride {list(input._stride)} (at least one dimension spans across two contiguous subspaces). "
            "Use .reshape(...) instead."
        )
    return input._view(shape, strides)


def view_dtype(input, dtype_):
    """``Tensor.view(dtype)``: the same bytes read as ``dtype_`` (float8 codes as uint8, float32 as int32 ...).
    Between element sizes the last dimension (stride 1) scales and every other stride and the offset are
    recounted in the new elements, with torch's errors where they do not divide."""
    old, new = input.dtype.itemsize, dtype_.itemsize
    if old == new:
        out = input._view(input._shape, input._stride)
    else:
        what = f"to view {input.dtype.type_name} as {dtype_.type_name} (different element sizes)"
        if input.ndim == 0:
            raise RuntimeError(f"self.dim() cannot be 0 {what}")
        if input._stride[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {input._stride[-1]}")
        if old > new:
            r = old // new
            shape = (*input._shape[:-1], input._shape[-1] * r)
            strides, offset = (*(st * r for st in input._stride[:-1]), 1), input._offset * r
        else:
            r = new // old
            if input._shape[-1] % r:
                raise RuntimeError(f"self.size(-1) must be divisible by {r} {what}, but got {input._shape[-1]}")
            for i, st in enumerate(input._stride[:-1]):
                if st % r:
                    raise RuntimeError(f"self.stride({i}) must be divisible by {r} {what}, but got {st}")
            if input._offset % r:
                raise RuntimeError(f"self.storage_offset() must be divisible by {r} {what}, but got {input._offset}")
            shape = (*input._shape[:-1], input._shape[-1] // r)
            strides, offset = (*(st // r for st in input._stride[:-1]), 1), input._offset // r
        out = input._view(shape, strides, offset)
    out.dtype = dtype_
    return out


def reshape(input, *shape):
    """torch.reshape: a view with ``shape`` when strides can express it, else a contiguous copy."""
    shape = infer_size(_shape_arg(shape, "reshape"), input.numel())
    strides = view_strides(input._shape, input._stride, shape)
    if strides is not None:
        return input._view(shape, strides)
    return input.contiguous().view(shape)


def transpose(input, dim0: int, dim1: int):
    """torch.transpose: a view with dims ``dim0`` and ``dim1`` swapped."""
    d0, d1 = normalize_dim(dim0, input.ndim, "dim0"), normalize_dim(dim1, input.ndim, "dim1")
    shape, stride = list(input._shape), list(input._stride)
    if input.ndim:
        shape[d0], shape[d1] = shape[d1], shape[d0]
        stride[d0], stride[d1] = stride[d1], stride[d0]
    return input._view(shape, stride)


def permute(input, *dims):
    """torch.permute: a view with the dims in the order ``dims``."""
    dims = _shape_arg(dims, "dims")
    if len(dims) != input.ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
            f"of the desired ordering of dimensions i.e. input.dim() = {input.ndim} is not equal to "
            f"len(dims) = {len(dims)}".replace("(sparse_coo)", "")
        )
    nd = [normalize_dim(d, input.ndim, "dims") for d in dims]
    if len(set(nd)) != len(nd):
        raise RuntimeError(f"permute(): duplicate dims are not allowed: {list(dims)}")
    return input._view([input._shape[d] for d in nd], [input._stride[d] for d in nd])


def expand(input, *sizes):
    """``Tensor.expand``: a view with size-1 dims (and new leading ones) repeated to ``sizes`` by stride 0; -1
    keeps a size."""
    sizes = _shape_arg(sizes, "size")
    if len(sizes) < input.ndim:
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the number "
            f"of dimensions in the tensor ({input.ndim})"
        )
    lead = len(sizes) - input.ndim
    shape, stride = [], []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise RuntimeError(f"expand: -1 is not allowed in a leading, non-existing dimension {i}")
            shape.append(s)
            stride.append(0)
            continue
        n, st = input._shape[i - lead], input._stride[i - lead]
        if s == -1 or s == n:
            shape.append(n)
            stride.append(st)
        elif n == 1:
            shape.append(s)
            stride.append(0)
        else:
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size ({n}) at non-singleton "
                f"dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(input._shape)}"
            )
    return input._view(shape, stride)


def broadcast_view(x, shape):
    """``x`` as a kernel reads it with ``shape``: itself when it has that shape already, else the
    stride-0 view ``expand`` makes. Core-level (ops that call it are below autograd: the view is
    read by their kernel, never returned), so it is not dispatched."""
    return x if x._shape == shape else expand(x, shape)


def squeeze(input, dim=None):
    """torch.squeeze: a view without the size-1 dims (only those of ``dim``, an int or a tuple, when given)."""
    if dim is None:
        dims = {i for i, s in enumerate(input._shape) if s == 1}
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = {normalize_dim(d, input.ndim) for d in dims}
        dims = {d for d in dims if input.ndim and input._shape[d] == 1}
    keep = [i for i in range(input.ndim) if i not in dims]
    return input._view([input._shape[i] for i in keep], [input._stride[i] for i in keep])


def unsqueeze(input, dim: int):
    """torch.unsqueeze: a view with a size-1 dim inserted at ``dim``."""
    d = normalize_dim(dim, input.ndim + 1)
    shape, stride = list(input._shape), list(input._stride)
    new_stride = shape[d] * stride[d] if d < input.ndim else 1
    shape.insert(d, 1)
    stride.insert(d, new_stride)
    return input._view(shape, stride)


def narrow(input, dim: int, start, length: int):
    """torch.narrow: a view of ``length`` elements of dim ``dim`` from ``start``."""
    d = normalize_dim(dim, input.ndim)
    n = input._shape[d]
    start = int(start)
    if start < 0:
        start += n
    if not 0 <= start <= n or length < 0 or start + length > n:
        raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n}) of dim {d}")
    shape = list(input._shape)
    shape[d] = length
    return input._view(shape, input._stride, input._offset + start * input._stride[d])


def select(input, dim: int, index: int):
    """torch.select: a view of slice ``index`` of dim ``dim``, that dim removed."""
    d = normalize_dim(dim, input.ndim)
    n = input._shape[d]
    if not -n <= index < n:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {n}")
    index %= n
    return input._view(
        input._shape[:d] + input._shape[d + 1 :],
        input._stride[:d] + input._stride[d + 1 :],
        input._offset + index * input._stride[d],
    )


def basic_getitem(input, index):
    """``x[index]`` for basic indices only (ints, slices, None, Ellipsis): a view, as PyTorch's."""
    if not isinstance(index, tuple):
        index = (index,)
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim}")
    expanded = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (input.ndim - n_real))
        else:
            expanded.append(i)
    shape, stride, offset, d = [], [], input._offset, 0
    for i in expanded:
        if i is None:
            shape.append(1)
            stride.append(0)
            continue
        n = input._shape[d]
        if isinstance(i, TensorBase) and i.numel() == 1 and not i.dtype.is_floating_point and i.dtype is not dt.bool_:
            i = int(i.item())
        if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
            offset += (int(i) % n) * input._stride[d]
        elif isinstance(i, slice):
            start, stop, step = i.start, i.stop, 1 if i.step is None else int(i.step)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            start, stop, _ = slice(start, stop, step).indices(n)
            length = max(0, -(-(stop - start) // step))
            if length:
                offset += start * input._stride[d]
            shape.append(length)
            stride.append(input._stride[d] * step)
        else:
            raise TypeError(
                f"index: only integers, slices (`:`), ellipsis (`...`), None and integer or bool "
                f"tensors/lists are supported, got {type(i).__name__}"
            )
        d += 1
    shape += input._shape[d:]
    stride += input._stride[d:]
    return input._view(shape, stride, offset)


def unfold(input, dimension: int, size: int, step: int):
    """``Tensor.unfold``: every window of ``size`` elements along ``dimension``, ``step`` apart, as a new
    last dim of a view (no copy): that dim's stride becomes ``step`` times itself, the window's is the
    old stride."""
    nd = max(input.ndim, 1)
    d = normalize_dim(dimension, nd)
    n = input._shape[d] if input.ndim else 1
    size, step = int(size), int(step)
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    shape = list(input._shape) or [1]
    stride = list(input._stride) or [1]
    inner = stride[d]
    shape[d] = (n - size) // step + 1
    stride[d] = inner * step
    if not input.ndim:  # a 0-d tensor unfolds to its one window: shape (size,)
        return input._view((size,), (1,))
    return input._view(shape + [size], stride + [inner])


# ----- composites: Tensor methods written with the view ops above, each reached through the
# dispatcher (as a method call), so autograd records every piece and they need no derivative of
# their own. The op table lists them (``COMPOSITE_METHODS``); core/tensor.py puts them on Tensor.
def view_as(self, other) -> "Tensor":
    """``Tensor.view_as``: ``self.view(other.shape)``."""
    return self.view(other.shape)


def reshape_as(self, other) -> "Tensor":
    """``Tensor.reshape_as``: ``self.reshape(other.shape)``."""
    return self.reshape(other.shape)


def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
    """``Tensor.flatten``: dims ``start_dim`` to ``end_dim`` merged into one (a view where strides allow, a
    0-d tensor becomes (1,))."""
    if self.ndim == 0:
        return self.reshape(1)
    s, e = normalize_dim(start_dim, self.ndim, "start_dim"), normalize_dim(end_dim, self.ndim, "end_dim")
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = self._shape[:s] + (math.prod(self._shape[s : e + 1]),) + self._shape[e + 1 :]
    return self.reshape(shape)


def unflatten(self, dim: int, sizes) -> "Tensor":
    """``Tensor.unflatten``: dim ``dim`` viewed as ``sizes`` (one -1 inferred)."""
    d = normalize_dim(dim, self.ndim)
    sizes = tuple(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if -1 not in sizes and math.prod(sizes) != self._shape[d]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({self._shape[d]}) in the input tensor")
    sizes = infer_size(sizes, self._shape[d])
    return self.view(self._shape[:d] + tuple(sizes) + self._shape[d + 1 :])


def t(self) -> "Tensor":
    """``Tensor.t``: a 2-D tensor transposed; 0-d and 1-D ones as they are."""
    if self.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self.transpose(0, 1) if self.ndim == 2 else self


def T(self) -> "Tensor":
    """``Tensor.T``: every dim reversed, as a view."""
    return self.permute(*reversed(range(self.ndim)))


def mT(self) -> "Tensor":
    """``Tensor.mT``: the last two dims swapped (a batch of matrices transposed), as a view."""
    if self.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices")
    return self.transpose(-2, -1)


def expand_as(self, other) -> "Tensor":
    """``Tensor.expand_as``: ``self.expand(other.shape)``."""
    return self.expand(other.shape)


def broadcast_to(self, shape) -> "Tensor":
    """``Tensor.broadcast_to``: ``self.expand(shape)``."""
    return self.expand(shape)


def unbind(self, dim: int = 0):
    """``Tensor.unbind``: the slices along ``dim`` as a tuple of views, that dim removed."""
    d = normalize_dim(dim, self.ndim)
    return tuple(select(self, d, i) for i in range(self._shape[d]))


def split(self, split_size, dim: int = 0):
    """``Tensor.split``: views of ``split_size`` along ``dim`` (the last one shorter), or of the given sizes,
    which must add up to the dim."""
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
    """``Tensor.chunk``: at most ``chunks`` views along ``dim``, each of ceil(n / chunks) but the last."""
    d = normalize_dim(dim, self.ndim)
    return self.split(max(1, -(-self._shape[d] // chunks)), d)


def tensor_split(self, indices_or_sections, dim: int = 0):
    """Views along ``dim``: ``sections`` near-equal parts (the first ``n % sections`` one longer),
    or the parts between the given indices (Python slice rules)."""
    tensor = self
    if tensor.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = normalize_dim(dim, tensor.ndim)
    n, ios = tensor._shape[d], indices_or_sections
    if isinstance(ios, TensorBase):
        if ios.dtype is not dt.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{ios.dtype.name}")
        if ios.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {ios.ndim} dims")
        ios = int(ios.item()) if ios.ndim == 0 else ios.tolist()
    if isinstance(ios, (int, np.integer)) and not isinstance(ios, bool):
        if ios <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {ios}")
        q, r = divmod(n, int(ios))
        bounds = list(itertools.accumulate([0] + [q + 1] * r + [q] * (int(ios) - r)))
    elif isinstance(ios, (list, tuple)) and all(isinstance(i, (int, np.integer)) for i in ios):
        bounds = [0] + [min(max(i + n if i < 0 else i, 0), n) for i in ios] + [n]
    else:
        raise TypeError(f"tensor_split(): argument 'indices_or_sections' must be int, a sequence of ints or a "
                        f"Tensor, not {type(ios).__name__}")
    return tuple(tensor.narrow(d, a, max(b - a, 0)) for a, b in zip(bounds, bounds[1:]))

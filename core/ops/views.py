"""The view ops: ``view reshape transpose permute expand squeeze unsqueeze narrow select`` and basic
indexing (``x[1, :, None]``). Each computes the new shape/strides/offset over the same storage and
copies nothing (only ``reshape`` copies, when no strides can express the result).

These are the core entries of the op table (``core/ops/table.py``); the composites written with
them (``flatten t T mT split chunk unbind view_as ...``) are Tensor methods in ``core/tensor.py``
and reach these through the dispatcher, so autograd records them too.
"""
from __future__ import annotations

import numpy as np

from ...runtime import dtype as dt
from ..shape import _shape_arg, infer_size, normalize_dim, view_strides
from ..tensor_base import TensorBase


def view(input, *shape):
    if len(shape) == 1 and isinstance(shape[0], dt.dtype):
        raise NotImplementedError("view(dtype) is not supported; use .to(dtype)")
    shape = infer_size(_shape_arg(shape, "view"), input.numel())
    strides = view_strides(input._shape, input._stride, shape)
    if strides is None:
        raise RuntimeError(
            f"view size {list(shape)} is not compatible with input tensor's size {list(input._shape)} and "
            f"stride {list(input._stride)} (at least one dimension spans across two contiguous subspaces). "
            "Use .reshape(...) instead."
        )
    return input._view(shape, strides)


def reshape(input, *shape):
    shape = infer_size(_shape_arg(shape, "reshape"), input.numel())
    strides = view_strides(input._shape, input._stride, shape)
    if strides is not None:
        return input._view(shape, strides)
    return input.contiguous().view(shape)


def transpose(input, dim0: int, dim1: int):
    d0, d1 = normalize_dim(dim0, input.ndim, "dim0"), normalize_dim(dim1, input.ndim, "dim1")
    shape, stride = list(input._shape), list(input._stride)
    if input.ndim:
        shape[d0], shape[d1] = shape[d1], shape[d0]
        stride[d0], stride[d1] = stride[d1], stride[d0]
    return input._view(shape, stride)


def permute(input, *dims):
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
    if dim is None:
        dims = {i for i, s in enumerate(input._shape) if s == 1}
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = {normalize_dim(d, input.ndim) for d in dims}
        dims = {d for d in dims if input.ndim and input._shape[d] == 1}
    keep = [i for i in range(input.ndim) if i not in dims]
    return input._view([input._shape[i] for i in keep], [input._stride[i] for i in keep])


def unsqueeze(input, dim: int):
    d = normalize_dim(dim, input.ndim + 1)
    shape, stride = list(input._shape), list(input._stride)
    new_stride = shape[d] * stride[d] if d < input.ndim else 1
    shape.insert(d, 1)
    stride.insert(d, new_stride)
    return input._view(shape, stride)


def narrow(input, dim: int, start, length: int):
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

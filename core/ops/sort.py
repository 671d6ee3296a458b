"""Sorting and searching: ``sort``, ``argsort``, ``msort``, ``topk``, ``kthvalue``, ``unique``,
``searchsorted``; and the composites ``median``, ``nanmedian``, ``mode`` (a recorded sort, gathers).

PyTorch's checks, then ``triton_kernels/sort.py``: every op here is one stable sort along a dim
(``topk``/``kthvalue`` take a slice of it; ``unique`` sorts the flattened tensor and finds the
group boundaries with elementwise ops, ``cumsum`` and ``nonzero``), or the binary search of
``searchsorted``. The sort is stable whatever ``stable=`` says (PyTorch allows that). Results
are contiguous. Derivatives (of the values): ``autograd/functions/sort.py``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math
from collections import namedtuple

import numpy as np

from ...triton_kernels import sort as _k
from ...runtime import dtype as dt
from ..shape import contiguous_strides, normalize_dim, view_strides
from ..tensor_base import TensorBase
from . import copy_into, host_tensor
from . import join as _join
from .index import nonzero_coords

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

# torch.return_types.sort / topk / kthvalue: (values, indices) named tuples.
sort_result = namedtuple("sort", ["values", "indices"])
topk_result = namedtuple("topk", ["values", "indices"])
kthvalue_result = namedtuple("kthvalue", ["values", "indices"])
median_result = namedtuple("median", ["values", "indices"])
nanmedian_result = namedtuple("nanmedian", ["values", "indices"])
mode_result = namedtuple("mode", ["values", "indices"])


def _check(input, op: str, name="input") -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def _int(v, name: str, op: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(v).__name__}")
    return int(v)


def sort_along(input, d: int, descending: bool):
    """(values, int64 indices), both contiguous with ``input``'s shape, sorted stably along dim ``d``."""
    vals = TensorBase._empty(input.shape, input.dtype, input.device)
    idx = TensorBase._empty(input.shape, dt.int64, input.device)
    shape = tuple(input.shape) or (1,)
    d = d if input.ndim else 0
    dims = (math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:]))
    x = input
    xs = view_strides(x.shape, x.stride(), dims) if x.ndim else (1, 1, 1)
    if xs is None:  # the dims around ``d`` do not merge into one stride each: sort a copy
        x = x.contiguous()
        xs = contiguous_strides(dims)
    scratch = None
    if _k.merge_passes(x.dtype.itemsize, dims):
        scratch = (TensorBase._empty(input.shape, input.dtype, input.device),
                   TensorBase._empty(input.shape, dt.int64, input.device))
    _k.sort(vals, idx, x, dims, xs, descending, scratch)
    return vals, idx


def sort(input, dim=-1, descending=False, *, stable=False):
    """(values, indices) sorted along ``dim``; NaN sorts above every number (first when descending)."""
    _check(input, "sort")
    d = normalize_dim(_int(dim, "dim", "sort"), input.ndim)
    return sort_result(*sort_along(input, d, bool(descending)))


def argsort(input, dim=-1, descending=False, *, stable=False) -> Tensor:
    """The indices that sort ``input`` along ``dim``."""
    _check(input, "argsort")
    d = normalize_dim(_int(dim, "dim", "argsort"), input.ndim)
    return sort_along(input, d, bool(descending))[1]


def msort(input) -> Tensor:
    """``sort(input, dim=0).values``."""
    _check(input, "msort")
    return sort_along(input, 0, False)[0]


def _k_slice(input, k, dim, op: str):
    d = normalize_dim(_int(dim, "dim", op), input.ndim)
    k = _int(k, "k", op)
    n = input.shape[d] if input.ndim else 1
    return d, k, n


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (``largest=False``: smallest) elements along ``dim`` and their indices, in order."""
    _check(input, "topk")
    dt.refuse_barebones(input.dtype, f"topk_{input.device.type}")
    d, k, n = _k_slice(input, k, dim, "topk")
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    vals, idx = sort_along(input, d, bool(largest))
    if input.ndim == 0:  # k is 0 or 1 here; PyTorch returns the 0-d tensor itself either way
        return topk_result(vals, idx)
    return topk_result(vals.narrow(d, 0, k).contiguous(), idx.narrow(d, 0, k).contiguous())


def kthvalue(input, k, dim=-1, keepdim=False):
    """The ``k``-th smallest element along ``dim`` (k counts from 1) and its index."""
    _check(input, "kthvalue")
    dt.refuse_barebones(input.dtype, f"kthvalue_{input.device.type}")
    d, k, n = _k_slice(input, k, dim, "kthvalue")
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {d}")
    vals, idx = sort_along(input, d, False)
    if input.ndim == 0:
        return kthvalue_result(vals, idx)
    v, i = vals.narrow(d, k - 1, 1), idx.narrow(d, k - 1, 1)
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    return kthvalue_result(v.contiguous(), i.contiguous())


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements, ascending (always sorted, as PyTorch's CUDA unique); optionally the index of
    each input element in them (``return_inverse``, input-shaped) and how often each occurs."""
    _check(input, "unique")
    if dim is not None:
        return _unique_dim(input, dim, return_inverse, return_counts, consecutive=False)
    flat = input.reshape(-1)
    n = flat.numel()
    s, perm = sort_along(flat, 0, False)
    if n == 0:
        values = s
        inverse = TensorBase._empty(input.shape, dt.int64, input.device)
        counts = TensorBase._empty((0,), dt.int64, input.device)
    else:
        new = TensorBase._empty((n,), dt.bool_, input.device)
        new[:1].fill_(True)
        if n > 1:
            copy_into(new[1:], s[1:].ne(s[:-1]))
        starts = nonzero_coords(new)[0]  # the first position of each group (one host sync)
        values = s[starts] if starts.numel() != n else s
        inverse = None
        if return_inverse:
            group = new.cumsum(0).sub_(1)
            inverse = TensorBase._empty((n,), dt.int64, input.device)
            inverse[perm] = group
            inverse = inverse.view(input.shape)
        counts = None
        if return_counts:
            ends = TensorBase._empty((starts.numel() + 1,), dt.int64, input.device)
            copy_into(ends[:-1], starts)
            ends[-1:].fill_(n)
            counts = ends[1:].sub(ends[:-1])
    out = (values,)
    if return_inverse:
        out += (inverse,)
    if return_counts:
        out += (counts,)
    return out[0] if len(out) == 1 else out


def _rows(input, d: int):
    """The slices along dim ``d`` as the rows of a contiguous (n, k) matrix."""
    x = _join.movedim(input, d, 0).contiguous()
    return x.reshape(x.shape[0], math.prod(x.shape[1:])), tuple(x.shape[1:])


def _lexicographic_order(rows):
    """The stable lexicographic order of the rows: stable sorts by each column, last column first (LSD)."""
    n, k = rows.shape
    perm = host_tensor(np.arange(n, dtype=np.int64), rows.device)
    for c in reversed(range(k)):
        _, p = sort_along(rows.select(1, c)[perm], 0, False)
        perm = perm[p]
    return perm


def _unique_dim(input, dim, return_inverse, return_counts, consecutive: bool):
    """unique / unique_consecutive over the slices along ``dim``: the rows sorted lexicographically (not for
    consecutive), a row starts a group where it differs from the one before, the group starts kept."""
    d = normalize_dim(dim, max(input.ndim, 1))
    if input.ndim == 0:
        input = input.reshape(1)
    if input.numel() == 0 and input.shape[d] != 0:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    rows, rest = _rows(input, d)
    n = rows.shape[0]
    perm = None if consecutive else _lexicographic_order(rows)
    s = rows if perm is None else rows[perm]
    new = TensorBase._empty((n,), dt.bool_, input.device)
    if n:
        new[:1].fill_(True)
    if n > 1:
        copy_into(new[1:], s[1:].ne(s[:-1]).any(1))
    starts = nonzero_coords(new)[0] if n else TensorBase._empty((0,), dt.int64, input.device)
    values = _join.movedim(s[starts].reshape(starts.numel(), *rest), 0, d)
    out = (values,)
    if return_inverse:
        group = new.cumsum(0).sub_(1) if n else TensorBase._empty((0,), dt.int64, input.device)
        if perm is not None:
            inverse = TensorBase._empty((n,), dt.int64, input.device)
            if n:
                inverse[perm] = group
            group = inverse
        out += (group,)
    if return_counts:
        ends = TensorBase._empty((starts.numel() + 1,), dt.int64, input.device)
        copy_into(ends[:-1], starts)
        ends[-1:].fill_(n)
        out += (ends[1:].sub(ends[:-1]),)
    return out[0] if len(out) == 1 else out


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """The first element of every run of equal consecutive elements (or slices along ``dim``); optionally
    each element's run (``return_inverse``, input-shaped without ``dim``) and each run's length."""
    _check(input, "unique_consecutive")
    if dim is not None:
        return _unique_dim(input, dim, return_inverse, return_counts, consecutive=True)
    out = _unique_dim(input.reshape(-1), 0, return_inverse, return_counts, consecutive=True)
    if return_inverse:
        out = (out[0], out[1].view(input.shape)) + tuple(out[2:])
    return out


def bucketize(input, boundaries, *, out_int32=False, right=False) -> Tensor:
    """The bucket of each value among the 1-D ``boundaries``: i with boundaries[i-1] < x <= boundaries[i]
    (``right``: boundaries[i-1] <= x < boundaries[i]), which is ``searchsorted`` on the boundaries."""
    _check(boundaries, "bucketize", "boundaries")
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None) -> Tensor:
    """For each value of ``input``, the index where it would be inserted into the innermost dim of
    ``sorted_sequence`` to keep it sorted (``right``/``side='right'``: after equal elements)."""
    _check(sorted_sequence, "searchsorted", "sorted_sequence")
    dt.refuse_barebones(sorted_sequence.dtype, f"searchsorted_out_{sorted_sequence.device.type}")
    seq = sorted_sequence
    scalar = not isinstance(input, TensorBase)
    if scalar:
        if isinstance(input, bool) or not isinstance(input, (int, float, np.number)):
            raise TypeError(f"searchsorted(): argument 'input' must be Tensor or a number, not {type(input).__name__}")
        input = host_tensor(np.array(input), seq.device)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("side and right can't be set to opposites, got side of left while right was True")
        right = side == "right"
    if seq.ndim == 0:
        raise RuntimeError("input value can be a scalar only when boundaries tensor dimension is 1, but we got "
                           "boundaries tensor dim(0) and input value's dim(0) numel(1)")
    if seq.device != input.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{seq.device} and {input.device}!")
    if seq.ndim > 1 and (input.ndim != seq.ndim or tuple(input.shape[:-1]) != tuple(seq.shape[:-1])):
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           f"dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)} and input value tensor {list(input.shape)}")
    if sorter is not None:
        _check(sorter, "searchsorted", "sorter")
        if sorter.shape != seq.shape or sorter.dtype is not dt.int64:
            raise RuntimeError("searchsorted(): sorter must be an int64 tensor of the boundaries' shape")
        seq = seq.gather(-1, sorter)
    seq = seq.contiguous()
    vals = input.contiguous()
    if seq.ndim == 1:
        vals2 = vals.reshape(1, -1)
    else:
        vals2 = vals.reshape(-1, vals.shape[-1] if vals.ndim else 1)
    out = TensorBase._empty(input.shape, dt.int32 if out_int32 else dt.int64, input.device)
    _k.searchsorted(out.reshape(vals2.shape), seq.reshape(math.prod(seq.shape[:-1]), seq.shape[-1]), vals2, bool(right))
    return out


# ----- order statistics made of a recorded sort and gathers (composites) -------------------------------
def _along(op, input, dim):
    """(input as >= 1-d, the normalised dim), refusing an empty reduced dim as torch does."""
    _check(input, op)
    x = input.reshape(1) if input.ndim == 0 else input
    d = normalize_dim(dim, input.ndim)
    if x.shape[d] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
    return x, d


def _median(op, input, dim, keepdim, ignore_nan):
    """The lower median along ``dim`` and its index: the sorted element at (n - 1) // 2 of the
    elements counted (NaN first of all where one is there and counts: ``median``'s NaN)."""
    if isinstance(input, TensorBase):
        dt.refuse_barebones(input.dtype, f"median_{input.device.type}")
    if dim is None:
        _check(input, op)
        if keepdim:
            raise TypeError(f"{op}(): keepdim=True needs a 'dim'")
        if input.numel() == 0:
            return input.new_full((), float("nan"))
        return _median(op, input.reshape(-1), 0, False, ignore_nan).values
    x, d = _along(op, input, dim)
    s, i = x.sort(d)  # stable, NaN last
    n = x.shape[d]
    if x.dtype.is_floating_point:
        nans = x.isnan().sum(d, keepdim=True)
        if ignore_nan:  # the median of the others; all NaN: position 0 (a NaN)
            k = ((n - nans - 1) // 2).clamp_min(0)
        else:
            k = (n - nans).where(nans > 0, (n - 1) // 2)
        v, idx = s.gather(d, k), i.gather(d, k)
    else:
        v, idx = s.narrow(d, (n - 1) // 2, 1), i.narrow(d, (n - 1) // 2, 1)
    if not keepdim:
        v, idx = v.squeeze(d), idx.squeeze(d)
    if input.ndim == 0:
        v, idx = v.reshape(()), idx.reshape(())
    return (nanmedian_result if ignore_nan else median_result)(v, idx)


def median(input, dim=None, keepdim=False):
    """``median(x)``: the lower median of all elements (NaN if any is NaN); ``median(x, dim)``:
    (values, indices) along ``dim``."""
    return _median("median", input, dim, keepdim, False)


def nanmedian(input, dim=None, keepdim=False):
    """``median`` that ignores NaN (NaN only where every element is)."""
    return _median("nanmedian", input, dim, keepdim, True)


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and the index of
    its last occurrence: runs of the sorted values counted with a cumsum and a scatter_add."""
    if isinstance(input, TensorBase):
        dt.refuse_barebones(input.dtype, f"mode_{input.device.type}")
    x, d = _along("mode", input, dim)
    s, i = x.sort(d)
    n = x.shape[d]
    starts = s.narrow(d, 0, 1).new_zeros(s.narrow(d, 0, 1).shape, dtype=dt.bool_)  # the first element: run 0
    if n > 1:
        starts = _join.cat([starts, s.narrow(d, 1, n - 1).ne(s.narrow(d, 0, n - 1))], d)
    run = starts.long().cumsum(d)
    counts = run.new_zeros(run.shape).scatter_add(d, run, run.new_ones(run.shape))
    end = counts.cumsum(d).gather(d, counts.argmax(d, keepdim=True)) - 1  # the last of the longest run
    v, idx = s.gather(d, end), i.gather(d, end)
    if not keepdim:
        v, idx = v.squeeze(d), idx.squeeze(d)
    if input.ndim == 0:
        v, idx = v.reshape(()), idx.reshape(())
    return mode_result(v, idx)


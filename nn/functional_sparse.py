"""``nn.functional``'s sparse functions beyond the op table's ``embedding``: ``one_hot`` and
``embedding_bag``.

``one_hot`` is a comparison with ``arange`` (reading the largest class back only when
``num_classes=-1``); ``embedding_bag`` gathers the rows and sums or averages them per bag with
``index_add`` (``scatter_reduce`` amax for ``mode="max"``), the bag of each index found on the device
with ``searchsorted``, so no device value is read back (offsets are checked only when they are in
host memory, as torch's CPU path).
"""
from __future__ import annotations

from ..core.factories import arange, zeros
from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.tensor import Tensor
from ..runtime import dtype as dt
from .functional_checks import _tensor

__all__ = ["one_hot", "embedding_bag"]
_where = _function(_table.OPS["where"], "where")
_searchsorted = _function(_table.OPS["searchsorted"], "searchsorted")


def one_hot(tensor, num_classes: int = -1):
    """(*, num_classes) int64 tensor with a 1 at each index (num_classes=-1: max + 1, one host read)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"one_hot(): argument 'input' (position 1) must be Tensor, not {type(tensor).__name__}")
    if tensor.dtype is not dt.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if tensor.numel():
        lo, hi = int(tensor.amin().item()), int(tensor.amax().item())
        if lo < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    elif num_classes == -1:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    classes = arange(num_classes, dtype=dt.int64, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).to(dt.int64)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False, per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx=None):
    """Sum, mean or max of the embeddings of each bag: rows of a 2-D ``input``, or the runs of a 1-D
    ``input`` that ``offsets`` start. The bag of each index is found on the device
    (``searchsorted`` of the offsets), the rows gathered, then index_add (sum, mean) or
    scatter_reduce amax (max) per bag; an empty bag gives zeros, as torch."""
    fn = "embedding_bag"
    _tensor(input, fn)
    _tensor(weight, fn, "weight", 2)
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag(): max_norm, scale_grad_by_freq and sparse are not supported")
    if weight.ndim != 2:
        raise RuntimeError(f"embedding_bag(): weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.dtype not in (dt.int32, dt.int64):
        raise RuntimeError(f"embedding_bag(): expected input of dtype int32 or int64, got {input.dtype.name}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences. However, found offsets of type "
                             f"{type(offsets).__name__}")
        B, n = input.shape
        bag = arange(B, dtype=dt.int64, device=input.device).unsqueeze(1).expand(B, n).reshape(-1)
        flat = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError(f"offsets has to be a 1D Tensor but got {None if offsets is None else offsets.ndim}")
        B = offsets.shape[0] - (1 if include_last_offset else 0)
        flat = input
        if offsets.device.type == "cpu" and offsets.numel():  # host memory: torch's checks cost no sync
            o = offsets.tolist()
            if o[0] != 0:
                raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                                   f"from position 0. However, got {o[0]}")
            if o[-1] > input.shape[0]:
                raise RuntimeError(f"offsets[-1] can not be greater than input's length {input.shape[0]} but got "
                                   f"offsets[-1] of {o[-1]}")
            if any(b < a for a, b in zip(o, o[1:])):
                raise RuntimeError("embedding_bag(): offsets must be non-decreasing")
        n_idx = input.shape[0]
        if offsets.shape[0] == 0:
            B = 0
        bag = (_searchsorted(offsets.to(dt.int64), arange(n_idx, dtype=dt.int64, device=input.device), right=True)
               - 1) if n_idx else zeros((0,), dtype=dt.int64, device=input.device)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                      "on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(flat.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, "
                             f"then it must have the same shape as the input ({list(input.shape)})")
    D = weight.shape[1]
    flat = flat.to(dt.int64)
    keep = None
    if padding_idx is not None:
        pad = padding_idx % weight.shape[0] if padding_idx < 0 else padding_idx
        keep = flat != pad
    # indices before the first offset, or past the last bag (include_last_offset): dropped, as torch
    # drops the latter (the former are an error there, which would need the offsets on the host)
    valid = (bag >= 0) & (bag < B)
    keep = valid if keep is None else keep & valid
    bag = _where(keep, bag, 0)
    rows = weight.index_select(0, flat) if flat.numel() else zeros((0, D), dtype=weight.dtype, device=weight.device)
    mask = keep.to(weight.dtype).unsqueeze(1)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.to(weight.dtype).unsqueeze(1)
    out = zeros((B, D), dtype=weight.dtype, device=weight.device)
    if mode == "max":
        rows = _where(keep.unsqueeze(1), rows, float("-inf"))
        out = out.scatter_reduce(0, bag.unsqueeze(1).expand(bag.shape[0], D), rows, reduce="amax",
                                 include_self=False)
        counts = zeros((B,), dtype=weight.dtype, device=weight.device).index_add(0, bag, mask.squeeze(1))
        return _where(counts.unsqueeze(1) > 0, out, 0.0)
    out = out.index_add(0, bag, rows * mask)
    if mode == "mean":
        counts = zeros((B,), dtype=weight.dtype, device=weight.device).index_add(0, bag, mask.squeeze(1))
        out = out / counts.clamp_min(1.0).unsqueeze(1)
    return out

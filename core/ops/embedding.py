"""``embedding``: rows of a weight table picked by integer indices (``nn.Embedding``,
``F.embedding``), with torch's ``padding_idx``, ``max_norm`` (the picked rows renormalised in
place first, as ``torch.embedding_renorm_``) and checks.

The forward is one gather kernel (``index_select`` of the weight's rows: ``triton_kernels/index.py``);
its derivative (``autograd/functions/embedding.py``) one scatter-add of the gradient rows into
zeros with the padding rows masked out.

Indices in host memory are bounds-checked on the host before any kernel (IndexError "index out
of range in self", raised by the op). Indices in device memory are checked by the gather kernel
itself, as torch's device-side assert does: the lookup never waits for the device and can be
captured into a CUDA graph; a bad index reads nothing (its row comes out as zeros) and the
IndexError is raised at the next synchronisation (``.item()``, ``.cpu()``,
``tritensor.cuda.synchronize()`` ...; ``runtime/device_asserts.py``). ``max_norm`` keeps a host
path: renormalising needs the set of rows looked up, so the indices are copied to the host (a
sync per call, not capturable), as before.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...runtime import device_asserts
from ...runtime import dtype as dt
from ...runtime.dtype_policy import FLOAT_COMPUTE
from ..tensor_base import TensorBase
from . import host_tensor
from . import index as _ix


def check_embedding(input, weight, padding_idx, max_norm, norm_type, sparse):
    """PyTorch's checks; returns padding_idx made non-negative (or None)."""
    if not isinstance(input, TensorBase):
        raise TypeError(f"embedding(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not isinstance(weight, TensorBase):
        raise TypeError(f"embedding(): argument 'weight' must be Tensor, not {type(weight).__name__}")
    if input.dtype not in (dt.int64, dt.int32):
        got = dt.tensor_type_name(input.dtype, input.device.type)
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {got} instead (while checking arguments for embedding)")
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got a {weight.ndim}-D tensor")
    if input.device != weight.device:
        raise RuntimeError(f"embedding(): input is on {input.device} but weight is on {weight.device}")
    if sparse:
        raise NotImplementedError("embedding(): sparse=True is not supported (tritensor has no sparse tensors)")
    n = weight.shape[0]
    if padding_idx is not None:
        if isinstance(padding_idx, bool) or not isinstance(padding_idx, numbers.Integral):
            raise TypeError(f"embedding(): argument 'padding_idx' must be int, not {type(padding_idx).__name__}")
        if padding_idx > 0 and padding_idx >= n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        if padding_idx < 0 and padding_idx < -n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = int(padding_idx) % n
    if max_norm is not None and (isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real)):
        raise TypeError(f"embedding(): argument 'max_norm' must be a number, not {type(max_norm).__name__}")
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real):
        raise TypeError(f"embedding(): argument 'norm_type' must be a number, not {type(norm_type).__name__}")
    return padding_idx


def _host_indices(input: TensorBase, n: int) -> np.ndarray:
    idx = input._to_host_array().reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError("index out of range in self")
    return idx


def renorm_(weight, idx: np.ndarray, max_norm: float, norm_type: float) -> None:
    """``torch.embedding_renorm_``: each row of ``weight`` picked by ``idx`` whose ``norm_type``-norm
    exceeds ``max_norm`` is scaled by ``max_norm / (norm + 1e-7)``, in place (never recorded)."""
    uniq = np.unique(idx)
    if uniq.size == 0:
        return
    w = weight.detach()
    u = host_tensor(uniq.astype(np.int64), weight.device)
    rows = w.index_select(0, u)
    acc = rows.to(FLOAT_COMPUTE[rows.dtype])
    p = float(norm_type)
    if math.isinf(p):
        norms = acc.abs().amax(1)
    elif p == 1.0:
        norms = acc.abs().sum(1)
    else:
        norms = (acc.abs() ** p).sum(1) ** (1.0 / p)
    scale = (max_norm / (norms + 1e-7)).where(norms > max_norm, 1.0)
    w[u] = (acc * scale.unsqueeze(1)).to(w.dtype)


def embedding_rows(input, weight, max_norm, norm_type):
    """The lookup itself, after the checks: (out, flat int64 indices)."""
    check = None
    if input.device.type == "cpu" or max_norm is not None:
        idx = _host_indices(input, weight.shape[0])
        if max_norm is not None:
            renorm_(weight, idx, float(max_norm), float(norm_type))
    else:
        check = _ix.device_check(input, weight.shape[0], 0, False, site=device_asserts.EMBEDDING)
    flat = input.reshape(-1)
    flat = flat if flat.dtype is dt.int64 else flat.to(dt.int64)
    out = _ix.take(weight, 0, flat, check)
    return out.reshape(tuple(input.shape) + (weight.shape[1],)), flat


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """``torch.nn.functional.embedding``: ``weight[input]``, shape ``input.shape + (embedding_dim,)``."""
    check_embedding(input, weight, padding_idx, max_norm, norm_type, sparse)
    return embedding_rows(input, weight, max_norm, norm_type)[0]

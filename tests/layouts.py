"""The same logical tensor in several memory layouts, for tests of kernels that read strides.

A kernel that walks strides can be right on contiguous memory and wrong on anything else, so
the reduction/softmax/layer_norm tests run each case on every layout here:

- ``contiguous``: row-major;
- ``transposed``: built with the dims reversed and permuted back (every stride "wrong");
- ``sliced``: every dim taken with step 2 from an offset of 1 (strides > 1, nonzero offset);
- ``expanded``: dim 0 broadcast from size 1 (stride 0: the same memory read many times).

The tensors are made on the default device (``tt.tensor``, not ``from_numpy``, which is always
the cpu), so the device-tensor variant (TRITENSOR_TEST_DEVICE=cuda) reads device memory.
"""
import numpy as np

import tritensor as tt
from tolerances import NP

LAYOUTS = ("contiguous", "transposed", "sliced", "expanded")


def make(shape, dtype, layout, values):
    """``(tensor, reference)``: a tritensor of ``shape``/``dtype`` laid out as ``layout`` and a
    float64 NumPy array of the very same (already rounded to ``dtype``) values.

    ``values(shape)`` returns a float64 array of the requested shape. The reference is always
    C-contiguous: NumPy sums a strided axis sequentially but a contiguous one pairwise, and
    the sequential sum of a few thousand terms is *less* accurate than the kernels.
    """
    t, ref = _make(tuple(shape), dtype, layout, values)
    return t, np.array(ref, dtype=np.float64, order="C")  # (ascontiguousarray would make 0-d 1-d)


def _make(shape, dtype, layout, values):
    nd = len(shape)
    if layout == "contiguous" or nd == 0:
        base = np.asarray(values(shape)).astype(NP[dtype])
        return tt.tensor(base), base.astype(np.float64)
    if layout == "transposed":
        base = values(shape[::-1]).astype(NP[dtype])
        perm = tuple(reversed(range(nd)))
        return tt.tensor(base).permute(perm), base.transpose(perm).astype(np.float64)
    if layout == "sliced":
        base = values(tuple(2 * n + 1 for n in shape)).astype(NP[dtype])
        index = (slice(1, None, 2),) * nd
        return tt.tensor(base)[index], base[index].astype(np.float64)
    if layout == "expanded":
        base = values((1,) + shape[1:]).astype(NP[dtype])
        return tt.tensor(base).expand(shape), np.broadcast_to(base, shape).astype(np.float64)
    raise ValueError(f"unknown layout {layout!r}")


def check_layout(t, layout):
    """Guard against a helper that silently stopped producing the layout it names."""
    if layout == "contiguous" or t.ndim == 0 or t.numel() <= 1:
        return
    if layout == "expanded":
        assert t.shape[0] <= 1 or t.stride(0) == 0, (layout, t.shape, t.stride())
    elif layout == "sliced" or sum(n > 1 for n in t.shape) >= 2:
        assert not t.is_contiguous(), (layout, t.shape, t.stride())

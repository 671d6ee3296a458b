"""AMP kernels: the fused multi-tensor unscale-and-check, and the loss-scale update.

``unscale``: one launch over every gradient of one dtype and device (PyTorch's
``_amp_foreach_non_finite_check_and_unscale_``). The launch gets a *block table*
(``runtime/launch.py: AddressTable``), an int64 array of three columns per program: the address of
the gradient's first element as the kernel sees it, the offset of the program's block inside it,
and the gradient's element count. A program loads its row, turns the
address into a pointer of the gradients' dtype, loads BLOCK values, computes in fp32: a value that
is not finite sets ``found_inf[0] = 1`` (a plain store of 1.0: every writer writes the same), and
every value is multiplied by ``inv_scale[0]`` and stored back in place. Nothing is read back on the
host: found_inf and inv_scale stay device tensors. Without ``inv_scale`` (``UNSCALE=False``) the
launch only checks and writes nothing but the flag: the pass ``GradScaler.step`` makes before a
fused optimizer step, which unscales inside its own kernel.

``update_scale``: one program (PyTorch's ``_amp_update_scale_``): on found_inf the scale backs
off and the growth tracker resets; otherwise the tracker counts, and on reaching growth_interval
the scale grows (kept only if finite) and the tracker resets.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import AddressTable, launch
from ._common import per_mode

# Elements per program. The interpreter pays per program: wide blocks there.
UNSCALE_BLOCK = per_mode(8192, 2048)


@triton.jit
def _unscale_kernel(table, found_inf, inv_scale, DTYPE: tl.constexpr, UNSCALE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    addr = tl.load(table + pid * 3)
    start = tl.load(table + pid * 3 + 1)
    n = tl.load(table + pid * 3 + 2)
    ptr = addr.to(tl.pointer_type(DTYPE))
    offs = start + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < n
    v = tl.load(ptr + offs, mask=mask, other=0).to(tl.float32)
    bad = (v != v) | (tl.abs(v) == float("inf"))
    nbad = tl.sum(tl.where(mask & bad, 1, 0), axis=0)
    if UNSCALE:
        inv = tl.load(inv_scale)
        tl.store(ptr + offs, (v * inv).to(DTYPE), mask=mask)
    if nbad > 0:
        tl.store(found_inf, 1.0)


@triton.jit
def _update_scale_kernel(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    s = tl.load(scale)
    t = tl.load(growth_tracker)
    inf = tl.load(found_inf)
    if inf > 0:
        tl.store(scale, s * backoff_factor)
        tl.store(growth_tracker, t * 0)
    else:
        succ = t + 1
        if succ == growth_interval:
            grown = s * growth_factor
            if tl.abs(grown) < float("inf"):
                tl.store(scale, grown)
            tl.store(growth_tracker, t * 0)
        else:
            tl.store(growth_tracker, succ)


def unscale(grads, found_inf, inv_scale, dtype_name: str) -> None:
    """Unscale in place every contiguous tensor of ``grads`` (one dtype, one device; ``inv_scale=None``:
    only check them), one launch through a block table; see the module doc."""
    table = AddressTable(grads, UNSCALE_BLOCK)
    if len(table) == 0:
        return
    launch(_unscale_kernel, (len(table),), table, found_inf, found_inf if inv_scale is None else inv_scale,
           DTYPE=getattr(tl, dtype_name), UNSCALE=inv_scale is not None, BLOCK=UNSCALE_BLOCK)


def update_scale(scale, growth_tracker, found_inf, growth_factor: float, backoff_factor: float,
                 growth_interval: int) -> None:
    """One program updating ``scale`` (fp32, 1 element) and ``growth_tracker`` (int32, 1) in place."""
    launch(_update_scale_kernel, (1,), scale, growth_tracker, found_inf, float(growth_factor),
           float(backoff_factor), int(growth_interval))

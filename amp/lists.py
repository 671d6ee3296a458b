"""Which op autocasts to what, per device type: the one place the autocast layer asks.

* ``"cuda"`` regions: the op table's own category (``Op.autocast`` in ``core/ops/table.py``),
  which is PyTorch's CUDA autocast lists restricted to tritensor's ops and is checked against
  them by ``tests/test_op_table.py`` (its ``AUTOCAST`` lists).
* ``"cpu"`` regions: :data:`CPU` below, PyTorch's CPU lists restricted to tritensor's ops (the
  seed's CPU lists, completed from PyTorch's current ``autocast_mode.cpp`` where the seed is cut
  short). Everything not named is ``"none"``: on CPU softmax, log_softmax, layer_norm, exp, log,
  sum, cumsum and pow are not autocast ops and run in their inputs' dtype (bf16 stays bf16).

An in-place op (``exp_``) is never cast, in either list.
"""
from __future__ import annotations

# PyTorch CPU: lower_precision_fp = conv1d/2d/3d, bmm, mm, baddbmm, addmm, addbmm, linear, matmul, ...;
# fp32 = prod, mse_loss, nll_loss, cross_entropy_loss, ... ; promote = stack, cat, index_copy.
CPU = {
    "matmul": "lower", "mm": "lower", "bmm": "lower", "linear": "lower", "conv2d": "lower", "conv_transpose2d": "lower",
    "scaled_dot_product_attention": "lower",
    "prod": "fp32", "mse_loss": "fp32", "nll_loss": "fp32", "cross_entropy": "fp32", "ctc_loss": "fp32",
}

DEVICE_TYPES = ("cuda", "cpu")


def category(op, device_type: str) -> str:
    """The autocast category of ``op`` (an ``Op`` record) in a ``device_type`` region."""
    if op.inplace_of or not op.kernel:
        return "none"
    if device_type == "cuda":
        return op.autocast
    if device_type == "cpu":
        return CPU.get(op.name, "none")
    raise ValueError(f"autocast: unknown device_type {device_type!r}; expected one of {DEVICE_TYPES}")

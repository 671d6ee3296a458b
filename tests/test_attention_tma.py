"""The Hopper TMA attention forward (triton_kernels/attention_tma.py) against float64 NumPy, in
Triton's interpreter.

On a GPU ``core/ops/attention.py`` selects this kernel only on compute capability 9.x
(``attention_tma.usable``); CPU mode never selects it. The interpreter emulates TMA descriptors
(rows past L or S load as zeros, the O store is clipped), so these tests call the kernel's
launcher directly, in CPU mode and on an sm_90 GPU alike: head dims 64 and 128, fp16 and bf16, ragged lengths over several key blocks,
L != S with both causal alignments (rows that see no key give 0 and an infinite log-sum-exp),
grouped-query heads, a strided (batch, L, heads, D) layout, and no batch dim. The log-sum-exp,
which the backward kernels read, must equal the general kernel's; the output uses the
"attention" profile, as tests/test_attention.py does.
"""
import math

import numpy as np
import pytest

import tritensor as tt
from test_attention import reference, rounded
from tolerances import NP, assert_close
from tritensor.core.ops import attention as core_attn
from tritensor.runtime import mode
from tritensor.triton_kernels import attention_tma

# CPU mode: the interpreter. GPU mode: the same tests on an sm_90 device (TMA is Hopper's).
pytestmark = pytest.mark.skipif(mode.GPU and tt.cuda.get_device_capability()[0] != 9, reason="TMA needs sm_90")
DEV = "cuda" if mode.GPU else "cpu"

rng = np.random.default_rng(2024)


def _operand(shape, dtype, seq_major=False):
    """(tensor, its values in float64); ``seq_major``: a (B, L, H, D) buffer viewed as (B, H, L, D)."""
    x = rng.standard_normal(shape)
    if not seq_major:
        return tt.tensor(x.astype(NP[dtype]), device=DEV), rounded(x, dtype)
    t = tt.tensor(np.ascontiguousarray(np.swapaxes(x, 1, 2)).astype(NP[dtype]), device=DEV).transpose(1, 2)
    return t, rounded(x, dtype)


def _run(q, k, v, causal_offset=None, scale=None):
    """The TMA kernel's (out, lse) and the general kernel's lse for the same call."""
    H, L, D = q.shape[-3], q.shape[-2], q.shape[-1]
    group = H // k.shape[-3]
    sc = 1 / math.sqrt(D) if scale is None else scale
    out = tt.empty(*q.shape, dtype=q.dtype, device=DEV)
    lse = tt.empty(math.prod(q.shape[:-2]), L, dtype=tt.float32, device=DEV)
    attention_tma.forward(out, lse, q, k, v, group, sc, causal_offset or 0, causal_offset is not None)
    q2, k2, v2, mask, plan = core_attn.prepare(q, k, v, None, 0.0, False, sc, group > 1, causal_offset=causal_offset)
    attention_tma.ENABLED = False  # on an sm_90 GPU the core entry would pick the TMA kernel itself
    try:
        _, lse_general = core_attn.forward(q2, k2, v2, mask, plan)
    finally:
        attention_tma.ENABLED = True
    return out, lse, lse_general.cpu()


@pytest.mark.parametrize("dtype", [tt.float16, tt.bfloat16])
@pytest.mark.parametrize("D", attention_tma.HEAD_DIMS)
@pytest.mark.parametrize("B,H,Hk,L,S,causal", [
    (2, 2, 2, 70, 90, None),  # ragged tails of several key blocks
    (1, 4, 2, 96, 80, 0),     # GQA, PyTorch's is_causal (upper left) with L > S
    (1, 2, 1, 40, 100, 60),   # causal_lower_right (offset S - L), one key head for two query heads
    (1, 1, 1, 90, 50, -40),   # lower right with L > S: rows 0..39 see no key at all
])
def test_tma_forward_matches_float64(dtype, D, B, H, Hk, L, S, causal):
    q, q64 = _operand((B, H, L, D), dtype)
    k, k64 = _operand((B, Hk, S, D), dtype)
    v, v64 = _operand((B, Hk, S, D), dtype)
    out, lse, lse_general = _run(q, k, v, causal)
    assert_close(out, reference(q64, k64, v64, causal_offset=causal, group=H // Hk), dtype, "attention", k=S)
    assert_close(lse, lse_general.numpy(), tt.float32)  # what the backward kernels read
    if causal is not None and causal < 0:
        assert np.isinf(lse.cpu().numpy()[:, :-causal]).all() and (out.float().cpu().numpy()[:, :, :-causal] == 0).all()


@pytest.mark.parametrize("dtype", [tt.float16, tt.bfloat16])
def test_strided_layout_and_no_batch_dim(dtype):
    # (batch, L, heads, D) buffers seen as (batch, heads, L, D): the rows of a head are H·D apart
    q, q64 = _operand((2, 3, 33, 64), dtype, seq_major=True)
    k, k64 = _operand((2, 3, 65, 64), dtype, seq_major=True)
    v, v64 = _operand((2, 3, 65, 64), dtype, seq_major=True)
    assert q.stride() == (33 * 3 * 64, 64, 3 * 64, 1)
    out, lse, lse_general = _run(q, k, v, scale=0.2)
    assert_close(out, reference(q64, k64, v64, scale=0.2), dtype, "attention", k=65)
    assert_close(lse, lse_general.numpy(), tt.float32)
    # 3-D operands (heads, L, D): no batch dim
    q3, k3, v3 = q[1].contiguous(), k[1].contiguous(), v[1].contiguous()
    out3, lse3, lse3_general = _run(q3, k3, v3, causal_offset=0)
    assert_close(out3, reference(q64[1], k64[1], v64[1], causal_offset=0), dtype, "attention", k=65)
    assert_close(lse3, lse3_general.numpy(), tt.float32)


def test_selected_on_hopper_only():
    q = tt.ones(1, 2, 256, 64, dtype=tt.float16, device=DEV)
    assert attention_tma.usable(tt.empty(1, 2, 256, 64, dtype=tt.float16, device=DEV), q, q, q, None, 0.0) == mode.GPU

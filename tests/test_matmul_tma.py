"""The Hopper TMA matmul (triton_kernels/matmul_tma.py) against float64 NumPy, in Triton's interpreter.

On a GPU the launcher selects this kernel only on compute capability 9.x (``usable``); CPU mode
never selects it. The interpreter emulates TMA descriptor loads (zero fill past the edges) and
stores (clipped at the edges), so these tests call the kernel's launcher directly, in CPU mode
and on an sm_90 GPU alike: ragged M, N, K
inside padded rows (the 16-byte stride rule), every transposed layout, more tiles than programs
(the persistent loop), and the padding of the output left untouched by the clipped stores.
Tolerances: the ``accumulate`` profile (fp32 accumulation, one rounding on store).
"""
import numpy as np
import pytest

import tritensor as tt
from tolerances import NP, assert_close
from tritensor.runtime import mode
from tritensor.triton_kernels import matmul_tma

# CPU mode: the interpreter. GPU mode: the same tests on an sm_90 device (TMA is Hopper's).
pytestmark = pytest.mark.skipif(mode.GPU and tt.cuda.get_device_capability()[0] != 9, reason="TMA needs sm_90")
DEV = "cuda" if mode.GPU else "cpu"

rng = np.random.default_rng(90)
PAD = 8  # fp16/bf16 elements: rows padded to a multiple of 16 bytes, as TMA requires


def _operand(rows, cols, dtype, transposed):
    """A (rows, cols) operand whose unit-stride dim is padded; column-major when ``transposed``."""
    r, c = (cols, rows) if transposed else (rows, cols)
    store = np.full((r, -(-c // PAD) * PAD), np.nan, np.float64)
    store[:, :c] = rng.standard_normal((r, c))
    base = tt.tensor(store, device=DEV).to(dtype)
    view = base[:, :c]
    return (view.t() if transposed else view), base


@pytest.mark.parametrize("dtype", [tt.float16, tt.bfloat16])
@pytest.mark.parametrize("a_t,b_t", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("M,N,K", [
    (64, 64, 64),   # whole 32-tiles: two programs walk 4 tiles
    (70, 45, 50),   # ragged in every dim: loads zero-filled, stores clipped
    (33, 100, 17),  # K below one tile, 2 x 4 tiles
])
def test_tma_matmul_matches_float64(dtype, a_t, b_t, M, N, K):
    a, _ = _operand(M, K, dtype, a_t)
    b, _ = _operand(K, N, dtype, b_t)
    out, out_base = _operand(M, N, dtype, False)
    assert matmul_tma._tma_layout(a) == ("t" if a_t else "n") and matmul_tma._tma_layout(b) == ("t" if b_t else "n")
    assert matmul_tma._tma_layout(out) == "n"
    tiles = -(-M // 32) * -(-N // 32)
    assert tiles > matmul_tma.INTERPRET_PROGRAMS  # every program loops over several tiles
    matmul_tma.matmul(out, a, b, allow_tf32=False)
    a64, b64 = (a.to(tt.float64).cpu().numpy(), b.to(tt.float64).cpu().numpy())
    assert_close(out, a64 @ b64, dtype, "accumulate", k=K)
    padding = out_base.to(tt.float64).cpu().numpy()[:, N:]
    assert np.isnan(padding).all()  # the stores were clipped at column N: the padding is untouched


def test_exact_products_are_exact():
    # small integers: every product and partial sum is exact in fp32, so the result is too
    a = tt.tensor(rng.integers(-3, 4, (48, 40)).astype(np.float64), device=DEV).to(tt.float16)
    b = tt.tensor(rng.integers(-3, 4, (40, 56)).astype(np.float64), device=DEV).to(tt.float16)
    out = tt.empty(48, 56, dtype=tt.float16, device=DEV)
    matmul_tma.matmul(out, a, b, allow_tf32=False)
    want = a.cpu().numpy().astype(np.float64) @ b.cpu().numpy().astype(np.float64)
    np.testing.assert_array_equal(out.cpu().numpy(), want.astype(NP[tt.float16]))


def test_selected_on_hopper_only():
    a = tt.ones(512, 512, dtype=tt.float16, device=DEV)
    assert matmul_tma.usable(tt.empty(512, 512, dtype=tt.float16, device=DEV), a, a) == mode.GPU

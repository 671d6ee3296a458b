"""matmul / @ / mm / bmm / linear (triton_kernels/matmul.py) against float64 NumPy, and their
derivatives (autograd/functions/matmul.py) by gradcheck/gradgradcheck in float64.

Inputs are drawn in float64, rounded to the dtype under test, and the reference is computed in
float64 from the *rounded* values, so the only error measured is the kernel's (fp32
accumulation, one rounding on store). Tolerances: the ``accumulate`` profile of tests/tolerances.py.
"""
import math

import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, NP, assert_close
from grad_inputs import leaf, noncontig
from tritensor import nn
from tritensor.autograd import gradcheck, gradgradcheck
from tritensor.core import ops as _ops
from tritensor.triton_kernels import autotune as _autotune
from tritensor.triton_kernels import _common as _kcommon
from tritensor.triton_kernels import matmul as _kmatmul
from tritensor.triton_kernels import matmul_splitk as _ksplitk

rng = np.random.default_rng(1234)
# conftest.py: fresh float outputs start as NaN, so an element a kernel forgets to write fails.
pytestmark = pytest.mark.usefixtures("poison_allocations")




def rand(shape, dtype):
    """(host array rounded to dtype, float64 copy of it)."""
    x = rng.standard_normal(shape).astype(NP[dtype])
    return x, x.astype(np.float64)


def T(x):
    return tt.tensor(np.ascontiguousarray(x))


# 1x1x1, primes, K not a multiple of the interpreter's BLOCK_K (64), more than one tile in M and N.
SHAPES = [(1, 1, 1), (7, 13, 5), (3, 97, 2), (67, 131, 71), (64, 64, 64)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("mkn", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_2d(dtype, mkn):
    M, K, N = mkn
    a, a64 = rand((M, K), dtype)
    b, b64 = rand((K, N), dtype)
    out = tt.matmul(T(a), T(b))
    assert out.dtype is dtype and out.shape == (M, N)
    assert_close(out, a64 @ b64, dtype, "accumulate", k=K)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_empty_and_k_zero(dtype):
    a, _ = rand((0, 5), dtype)
    b, _ = rand((5, 3), dtype)
    assert tt.matmul(T(a), T(b)).shape == (0, 3)
    assert tt.matmul(T(b.T), T(a.T)).shape == (3, 0)
    # K == 0: the empty sum is 0 (and the epilogue still adds the bias).
    a0, b0 = np.zeros((4, 0), NP[dtype]), np.zeros((0, 3), NP[dtype])
    np.testing.assert_array_equal(tt.matmul(T(a0), T(b0)).numpy().astype(np.float64), np.zeros((4, 3)))
    bias, bias64 = rand((3,), dtype)
    assert_close(tt.linear(T(a0), T(b0.T), T(bias)), np.broadcast_to(bias64, (4, 3)), dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shapes", [
    ((2, 1, 5, 7), (3, 7, 4)),      # batch broadcast both ways
    ((5, 7), (2, 7, 3)),            # 2-D @ 3-D
    ((2, 3, 5, 7), (7, 4)),         # batch folded into M (one big GEMM)
    ((1, 9, 70), (4, 70, 66)),      # batch of one broadcast, K > one block
    ((7,), (7,)), ((7,), (7, 3)), ((3, 7), (7,)), ((2, 3, 7), (7,)), ((7,), (2, 7, 3)),
], ids=lambda s: f"{s[0]}@{s[1]}".replace(" ", ""))
def test_matmul_broadcast_and_vectors(dtype, shapes):
    sa, sb = shapes
    a, a64 = rand(sa, dtype)
    b, b64 = rand(sb, dtype)
    out = T(a) @ T(b)
    expected = np.matmul(a64, b64)
    assert out.shape == expected.shape and out.dtype is dtype
    assert_close(out, expected, dtype, "accumulate", k=sa[-1])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_transposed_and_sliced_operands_read_in_place(dtype, monkeypatch):
    big_a, big_a64 = rand((40, 90), dtype)
    big_b, big_b64 = rand((60, 80), dtype)
    a = T(big_a)[::2, 3:76]          # (20, 73), row stride 180: not contiguous
    b = T(big_b).T[3:76, ::3]        # (73, 20): a transposed view, sliced both ways
    assert not a.is_contiguous() and not b.is_contiguous()
    a64 = big_a64[::2, 3:76]
    b64 = big_b64.T[3:76, ::3]

    def no_copy(*args, **kwargs):
        raise AssertionError("matmul copied an operand instead of reading it through its strides")

    monkeypatch.setattr(_ops, "copy_into", no_copy)
    out = tt.matmul(a, b)
    assert_close(out, a64 @ b64, dtype, "accumulate", k=a.shape[1])
    # Batched, with the batch dim innermost in memory (permuted view).
    x, x64 = rand((6, 5, 3), dtype)
    y, y64 = rand((3, 6, 4), dtype)
    xv = T(x).permute(2, 1, 0)  # (3, 5, 6)
    out = tt.bmm(xv, T(y))
    assert_close(out, np.matmul(x64.transpose(2, 1, 0), y64), dtype, "accumulate", k=6)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_mm_bmm_and_methods(dtype):
    a, a64 = rand((4, 9, 11), dtype)
    b, b64 = rand((4, 11, 6), dtype)
    assert_close(tt.bmm(T(a), T(b)), a64 @ b64, dtype, "accumulate", k=11)
    assert_close(T(a).bmm(T(b)), a64 @ b64, dtype, "accumulate", k=11)
    assert_close(T(a[0]).mm(T(b[1])), a64[0] @ b64[1], dtype, "accumulate", k=11)
    assert_close(tt.mm(T(a[2]), T(b[3])), a64[2] @ b64[3], dtype, "accumulate", k=11)
    assert_close(T(a).matmul(T(b)), a64 @ b64, dtype, "accumulate", k=11)


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
def test_linear_fused_epilogue(dtype, activation):
    x, x64 = rand((3, 5, 70), dtype)
    w, w64 = rand((33, 70), dtype)
    bias_full, bias_full64 = rand((66,), dtype)
    bias, bias64 = T(bias_full)[::2], bias_full64[::2]  # strided bias
    ref = x64 @ w64.T + bias64
    ref = {None: ref, "relu": np.maximum(ref, 0), "gelu": _gelu(ref)}[activation]
    out = _ops.matmul.fused_linear(T(x), T(w), bias, activation=activation)
    assert out.shape == (3, 5, 33) and out.dtype is dtype
    assert_close(out, ref, dtype, "accumulate", k=70)
    if activation is None:
        assert_close(tt.linear(T(x), T(w), bias), ref, dtype, "accumulate", k=70)
        assert_close(tt.linear(T(x[0, 0]), T(w)), x64[0, 0] @ w64.T, dtype, "accumulate", k=70)
        # An input that cannot be viewed as (rows, in_features) takes the batched path (weight broadcast).
        xp = T(x).permute(1, 0, 2)
        assert_close(tt.linear(xp, T(w), bias), x64.transpose(1, 0, 2) @ w64.T + bias64, dtype,
                     "accumulate", k=70)


# ----- split-K (triton_kernels/matmul_splitk.py): few output tiles, long K ---------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("mkn", [(1, 1000, 1), (3, 777, 5), (70, 1500, 20), (17, 2048, 1)],
                         ids=lambda s: "x".join(map(str, s)))
def test_split_k(dtype, mkn, monkeypatch):
    # The shapes are written for the interpreter's least chunk (256); a GPU takes at least 1,024 of K
    # per program, so K scales with the mode's chunk and the same shapes split in both.
    M, K, N = mkn
    K = K * _ksplitk.MIN_CHUNK // 256
    assert _ksplitk.plan(M, N, K, 1) > 1  # this mode's thresholds split these shapes
    calls = []
    real = _ksplitk.matmul
    monkeypatch.setattr(_ksplitk, "matmul", lambda *a, **k: (calls.append(a[5]), real(*a, **k)))
    a, a64 = rand((M, K), dtype)
    b, b64 = rand((K, N), dtype)
    assert_close(tt.matmul(T(a), T(b)), a64 @ b64, dtype, "accumulate", k=K)
    # operands read through their strides: a transposed, b a strided column slice
    bt, bt64 = rand((N, 2 * K), dtype)
    bv = T(bt).T[::2]
    assert_close(tt.matmul(T(a.T.copy()).T, bv), a64 @ bt64.T[::2], dtype, "accumulate", k=K)
    # the epilogue after the partials are summed: bias (strided) and activation
    bias_full, bias_full64 = rand((2 * N,), dtype)
    ref = a64 @ b64 + bias_full64[::2]
    out = _ops.matmul.fused_linear(T(a), T(b.T.copy()), T(bias_full)[::2], activation="relu")
    assert_close(out, np.maximum(ref, 0), dtype, "accumulate", k=K)
    assert len(calls) == 3 and all(s > 1 for s in calls)


def test_split_k_vectors_gradients_and_determinism():
    # x.dot(y), matrix-vector and x.T @ x (the products split-K is for), their gradients, and the
    # same bits on every call (the partials are summed in a fixed order, no atomics).
    x64 = rng.standard_normal(1200)
    y64 = rng.standard_normal(1200)
    x, y = tt.tensor(x64, requires_grad=True), tt.tensor(y64, requires_grad=True)
    d = x.dot(y)
    assert_close(d.detach(), x64 @ y64, tt.float64, "accumulate", k=1200)
    d.backward()
    assert_close(x.grad, y64, tt.float64, "exact")
    X64 = rng.standard_normal((1100, 6)).astype(np.float32).astype(np.float64)  # fp32-exact values
    X = tt.tensor(X64, dtype=tt.float32)
    g = X.T @ X
    assert_close(g, X64.T @ X64, tt.float32, "accumulate", k=1100)
    assert all(np.array_equal((X.T @ X).numpy(), g.numpy()) for _ in range(2))
    v64 = x64[:1100].astype(np.float32).astype(np.float64)
    assert_close(X.T @ tt.tensor(v64, dtype=tt.float32), X64.T @ v64, tt.float32, "accumulate", k=1100)
    W = tt.tensor(rng.standard_normal((4, 600)), requires_grad=True)
    u = tt.tensor(rng.standard_normal((600, 2)), requires_grad=True)
    assert gradcheck(lambda W, u: W @ u, (W, u), fast_mode=True)  # v^T J u: the full Jacobian is 3,600 columns


def test_split_k_plan():
    # Batched, many-tile or short-K products keep the general kernel.
    assert _ksplitk.plan(1, 1, 100, 1) == 0
    assert _ksplitk.plan(1, 1, 100000, 2) == 0
    assert _ksplitk.plan(64 * 100, 64 * 100, 100000, 1) == 0
    split = _ksplitk.plan(1, 1, 100000, 1)
    assert 2 <= split <= _ksplitk.TARGET_PROGRAMS
    chunk = -(-100000 // split)
    assert chunk >= _ksplitk.MIN_CHUNK


# ----- bad input: a clear error naming the arguments, raised before any kernel runs ---------------
def test_inner_dimension_mismatch_names_both_shapes(no_launch):
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        tt.zeros(2, 3) @ tt.zeros(4, 5)
    with pytest.raises(RuntimeError, match=r"\[2, 3, 4\] and \[2, 5, 6\].*\(4\).*\(5\)"):
        tt.matmul(tt.zeros(2, 3, 4), tt.zeros(2, 5, 6))
    with pytest.raises(RuntimeError, match=r"expected tensor \[3\] and src \[4\]"):
        tt.matmul(tt.zeros(3), tt.zeros(4))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        tt.mm(tt.zeros(2, 3), tt.zeros(4, 5))
    with pytest.raises(RuntimeError, match=r"bmm\(\): input and mat2 shapes.*\[2, 3, 4\] and \[3, 4, 5\]"):
        tt.bmm(tt.zeros(2, 3, 4), tt.zeros(3, 4, 5))
    with pytest.raises(RuntimeError, match=r"cannot be multiplied \(6x4 and 5x3\)"):
        tt.linear(tt.zeros(2, 3, 4), tt.zeros(3, 5))


def test_other_bad_input(no_launch):
    with pytest.raises(RuntimeError, match=r"same dtype, but got: float32 != float16"):
        tt.zeros(2, 3) @ tt.zeros(3, 2, dtype=tt.float16)
    with pytest.raises(RuntimeError, match="floating-point dtype.*int64"):
        tt.zeros(2, 3, dtype=tt.int64) @ tt.zeros(3, 2, dtype=tt.int64)
    with pytest.raises(RuntimeError, match="at least 1D, but they are 0D and 2D"):
        tt.matmul(tt.tensor(1.0), tt.zeros(2, 2))
    with pytest.raises(RuntimeError, match=r"batch dimensions.*\[2, 3, 4\].*\[5, 4, 2\]"):
        tt.matmul(tt.zeros(2, 3, 4), tt.zeros(5, 4, 2))
    with pytest.raises(RuntimeError, match="mm\\(\\): mat2 must be a matrix"):
        tt.mm(tt.zeros(2, 3), tt.zeros(3))
    with pytest.raises(RuntimeError, match="batch1 \\(input\\) must be a 3D tensor"):
        tt.bmm(tt.zeros(2, 3), tt.zeros(2, 3, 4))
    with pytest.raises(TypeError, match="argument 'other' must be a Tensor"):
        tt.matmul(tt.zeros(2, 2), [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(RuntimeError, match=r"bias must have shape \[5\]"):
        tt.linear(tt.zeros(2, 3), tt.zeros(5, 3), tt.zeros(4))
    with pytest.raises(ValueError, match="activation must be one of"):
        _ops.matmul.fused_linear(tt.zeros(2, 3), tt.zeros(5, 3), activation="tanh")


def test_tf32_switch():
    flags = tt.backends.cuda.matmul
    assert flags.allow_tf32 is False  # PyTorch's default since 1.12: fp32 matmul is IEEE fp32
    assert tt.backends.cudnn.allow_tf32 is True  # PyTorch's default for convolutions
    with pytest.raises(TypeError, match="allow_tf32: expected a bool"):
        flags.allow_tf32 = 1
    with pytest.raises(AttributeError, match="no setting 'allow_fp64'"):
        flags.allow_fp64 = True
    # The switch selects tl.dot's precision for fp32 only, and only when compiling for a GPU.
    assert _kmatmul.input_precision("float16", True) == "ieee"
    assert _kmatmul.input_precision("float32", False) == "ieee"
    assert _kmatmul.input_precision("float32", True) == ("tf32" if _kcommon.GPU_SHAPES else "ieee")


def test_event_timer_quantiles_match_numpy():
    times = sorted(rng.uniform(0, 5, 37).tolist())
    for q in (0.0, 0.2, 0.5, 0.8, 1.0):
        assert _autotune._quantile(times, q) == pytest.approx(np.quantile(times, q))


# ----- derivatives: gradcheck in float64 -----------------------------------------------------
MATMULS = {
    "2d": ((3, 4), (4, 2)), "batched_broadcast": ((2, 3, 4), (4, 2)), "batched_both": ((2, 1, 2, 3), (3, 3, 2)),
    "vec_mat": ((4,), (4, 2)), "mat_vec": ((3, 4), (4,)), "dot": ((4,), (4,)),
}


@pytest.mark.parametrize("name", sorted(MATMULS))
def test_matmul_gradcheck(name):
    sa, sb = MATMULS[name]
    assert gradcheck(lambda a, b: a @ b, (leaf(*sa), leaf(*sb)), fast_mode=name == "batched_both")


def test_matmul_noncontiguous_mm_bmm_and_second_derivative():
    assert gradcheck(lambda a, b: tt.mm(a, b), (noncontig(3, 4), noncontig(4, 2)), fast_mode=True)
    assert gradcheck(lambda a, b: tt.bmm(a, b), (leaf(2, 2, 3), leaf(2, 3, 2)), fast_mode=True)
    assert gradgradcheck(lambda a, b: (a @ b).tanh(), (leaf(2, 3), leaf(3, 2)), fast_mode=True)
    assert gradgradcheck(lambda a, b: a @ b, (leaf(2, 2), leaf(2, 2)))  # full Jacobian, once


def test_linear_gradcheck():
    assert gradcheck(lambda a, ww, bb: tt.linear(a, ww, bb), (leaf(2, 3), leaf(2, 3), leaf(2)))
    x, w, b = leaf(2, 3, 4), leaf(5, 4), leaf(5)
    assert gradcheck(lambda a, ww, bb: tt.linear(a, ww, bb), (x, w, b), fast_mode=True)
    assert gradcheck(lambda a, ww: nn.functional.linear(a, ww), (leaf(4), w), fast_mode=True)
    assert gradgradcheck(lambda a, ww, bb: tt.linear(a, ww, bb), (leaf(2, 4), w, b), fast_mode=True)


def test_configurations_are_pruned_to_what_fits_the_dtype():
    # tools/sm90_report.py found 128x256x64 at 3 stages (the first configuration, the one a pinned
    # run takes) needing 288 KB of shared memory with fp32 tiles (sm_90 has 227 KB), and two 4-warp
    # TF32 tiles spilling; the GPU autotuner prunes them for 4-byte operands, keeps them for fp16.
    class _Arg:
        def __init__(self, dtype):
            self.dtype = dtype

    def kept(dtype):
        return _kmatmul.fitting_configs(_kmatmul.CONFIGS, {"a_ptr": _Arg(dtype)})

    assert kept(tt.float16) == kept(tt.bfloat16) == _kmatmul.CONFIGS
    for dtype in (tt.float32, tt.float64):
        configs = kept(dtype)
        assert configs and configs[0] is not _kmatmul.CONFIGS[0]
        for c in configs:
            m, n, k = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
            assert (m + n) * k * dtype.itemsize * c.num_stages <= _kmatmul.SMEM_BYTES
            assert m * n // (32 * c.num_warps) <= 64
    if _autotune.INTERPRET:  # the record tools/sm90_compile.py reads
        assert _autotune.GPU_PRUNES["tritensor.triton_kernels.matmul:_matmul_kernel"] is _kmatmul.fitting_configs
    else:  # on a GPU, Triton's autotuner itself prunes with it
        tuner = _kmatmul._matmul_kernel
        want = kept(tt.float32)[:1] if _autotune.PINNED else kept(tt.float32)
        assert tuner.early_config_prune(tuner.configs, {"a_ptr": _Arg(tt.float32)}) == want


# ----- mv, addmv, addmm, baddbmm: composites of the products and one add --------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_mv_addmv_addmm_baddbmm_match_numpy(dtype):
    a, a64 = rand((5, 7), dtype)
    v, v64 = rand((7,), dtype)
    b, b64 = rand((7, 3), dtype)
    c, c64 = rand((5, 3), dtype)
    r, r64 = rand((3,), dtype)
    x, x64 = rand((2, 5, 7), dtype)
    y, y64 = rand((2, 7, 3), dtype)
    at = tt.tensor(np.ascontiguousarray(a.T)).T  # a transposed operand, read in place
    assert not at.is_contiguous()
    # one product accumulated over 7 terms in fp32, then the add rounds in the dtype
    assert_close(tt.mv(at, T(v)), a64 @ v64, dtype, "accumulate", k=7)
    assert_close(T(a).mv(T(v)), a64 @ v64, dtype, "accumulate", k=7)
    d, d64 = rand((5,), dtype)
    assert_close(tt.addmv(T(d), at, T(v), beta=0.5, alpha=2), 0.5 * d64 + 2 * (a64 @ v64), dtype, "rounded_terms", k=3)
    assert_close(tt.addmm(T(c), at, T(b)), c64 + a64 @ b64, dtype, "rounded_terms", k=2)
    assert_close(T(r).addmm(T(a), T(b), beta=-1.5, alpha=0.25), -1.5 * r64 + 0.25 * (a64 @ b64), dtype,
                 "rounded_terms", k=3)  # a broadcast row
    assert_close(tt.baddbmm(T(r), T(x), T(y), alpha=3), r64 + 3 * (x64 @ y64), dtype, "rounded_terms", k=2)
    assert_close(tt.addmm(T(c)[:0], T(a)[:0], T(b)), np.zeros((0, 3)), dtype)  # empty
    nan = tt.full((5, 3), float("nan"), dtype=dtype)
    assert_close(tt.addmm(nan, T(a), T(b), beta=0), a64 @ b64, dtype, "accumulate", k=7)  # beta 0: input unread
    z = T(c)  # the in-place forms: input has the product's shape
    assert z.addmm_(at, T(b), beta=0.5, alpha=2) is z and z._version > 0
    assert_close(z, 0.5 * c64 + 2 * (a64 @ b64), dtype, "rounded_terms", k=3)
    assert_close(nan.addmm_(T(a), T(b), beta=0), a64 @ b64, dtype, "accumulate", k=7)
    zv = T(d)
    assert_close(zv.addmv_(T(a), T(v), alpha=-1), d64 - a64 @ v64, dtype, "rounded_terms", k=2)
    zb = tt.zeros(2, 5, 3, dtype=dtype)
    assert_close(zb.baddbmm_(T(x), T(y), beta=3), x64 @ y64, dtype, "accumulate", k=7)
    with pytest.raises(RuntimeError, match=r"Bad in-place call: input tensor size \[3\] and output tensor size"):
        T(r).addmm_(T(a), T(b))


def test_mv_addmm_errors(no_launch):
    m, v = tt.ones(2, 3), tt.ones(4)
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"):
        tt.mv(m, v)
    with pytest.raises(RuntimeError, match="vector \\+ matrix @ vector expected, got 1, 3, 1"):
        tt.mv(tt.ones(2, 3, 1), tt.ones(3))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x4 and 5x3\)"):
        tt.addmm(tt.ones(2, 3), tt.ones(2, 4), tt.ones(5, 3))
    with pytest.raises(RuntimeError, match="The expanded size of the tensor"):
        tt.addmm(tt.ones(4, 3), tt.ones(2, 4), tt.ones(4, 3))
    with pytest.raises(RuntimeError, match="self and mat2 must have the same dtype, but got Double and Float"):
        tt.addmm(tt.ones(2, 3, dtype=tt.float64), tt.ones(2, 4), tt.ones(4, 3))
    with pytest.raises(RuntimeError, match="mat1 must be a matrix, got 3-D tensor"):
        tt.addmm(tt.ones(3), tt.ones(2, 4, 1), tt.ones(4, 3))
    with pytest.raises(RuntimeError, match=r"batch2 tensor to be: \[2, 4\] but got: \[3, 4\]"):
        tt.baddbmm(tt.ones(3), tt.ones(2, 2, 4), tt.ones(3, 4, 3))
    with pytest.raises(TypeError, match="argument 'beta' must be Number"):
        tt.addmv(tt.ones(2), tt.ones(2, 4), tt.ones(4), beta="x")


def test_mv_addmv_addmm_baddbmm_gradcheck():
    a, v, d = leaf(2, 3), leaf(3), leaf(2)
    assert gradcheck(tt.mv, (noncontig(2, 3), v))
    assert gradcheck(lambda i, m, x: tt.addmv(i, m, x, beta=0.5, alpha=-2), (d, a, v))
    b, c = leaf(3, 2), leaf(2, 2)
    assert gradcheck(lambda i, m1, m2: tt.addmm(i, m1, m2, beta=2, alpha=0.5), (c, a, b))
    assert gradcheck(lambda i, m1, m2: tt.addmm(i, m1, m2), (leaf(2), a, b))  # a broadcast row
    x, y = leaf(2, 2, 3), leaf(2, 3, 2)
    assert gradcheck(lambda i, b1, b2: tt.baddbmm(i, b1, b2, alpha=1.5), (leaf(2, 1), x, y))
    assert gradcheck(lambda i, m1, m2: (i * 1).addmm_(m1, m2, beta=0.5, alpha=2), (c, a, b))
    assert gradcheck(lambda i, m, x: (i * 1).addmv_(m, x, beta=0), (d, a, v))
    assert gradcheck(lambda i, b1, b2: (i * 1).baddbmm_(b1, b2), (leaf(2, 2, 2), x, y))

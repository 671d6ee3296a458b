"""scaled_dot_product_attention (triton_kernels/attention.py, attention_bwd.py; core/ops/attention.py)
against a float64 NumPy softmax(Q Kᵀ·scale + mask)·V and its gradients.

Covered: dtypes (fp32/fp64/fp16/bf16), head dims 16..256 and unequal E/Ev, lengths 1/17/127
(several key blocks and ragged tails), L ≠ S with causal masking (``is_causal``: PyTorch's upper-left alignment;
``nn.attention.bias.causal_lower_right``: the lower-right one), boolean and additive masks of
several broadcast shapes (and the additive mask's gradient), fully masked rows, GQA and a single
broadcast key/value head, non-contiguous and batch-broadcast inputs, empty shapes, dropout
(statistics and forward/backward mask consistency for a fixed seed), determinism, fp64 gradcheck,
autocast, and the argument errors.

Tolerances: profiles of tests/tolerances.py. The forward's output (a convex combination of V
rows, computed in fp32 and rounded once) uses "attention" with k = S keys: "accumulate" in
fp32/fp64, and in fp16/bf16 the default widened by 2u absolute, because on a GPU the
probabilities are cast to the input dtype before P·V (FlashAttention's design, the tensor cores
need it): one more rounding of relative size u on each weight. Gradients are sums of L or S
products whose terms are themselves rounded to the input dtype in fp16/bf16 (dS, P before the
tensor-core dots), so "attention_grad" compares them relative to the gradient's own scale:
|err| <= c·u·max|ref|. fp64 paths without dropout rounding use the default.
"""
import warnings

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from tritensor.autograd import gradcheck
from tritensor.core.ops import attention as core_attn
from tritensor.nn.attention.bias import CausalBias, CausalVariant, causal_lower_right, causal_upper_left
from tolerances import NP, assert_close

f16, bf16, f32, f64 = tt.float16, tt.bfloat16, tt.float32, tt.float64


def rounded(a, dtype):
    """``a`` rounded to ``dtype`` and back to float64 (the values the kernel really sees)."""
    return np.asarray(a).astype(NP[dtype]).astype(np.float64)


def tensor(a, dtype, requires_grad=False):
    t = tt.tensor(np.asarray(a).astype(NP[dtype]))
    t.requires_grad = requires_grad
    return t


def reference(q, k, v, mask=None, causal_offset=None, scale=None, group=1, do=None, keep=None, p_drop=0.0):
    """float64 attention (and its gradients when ``do`` is given) on NumPy arrays (..., H, L, E).

    ``keep``: the dropout keep-mask (..., H, L, S); kept probabilities are scaled by 1/(1-p).
    Fully masked rows give 0 (PyTorch's math path). Returns out or (out, dq, dk, dv, ds).
    """
    kk, vv = (np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)) if group > 1 else (k, v)
    sc = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(kk, -1, -2) * sc
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    if causal_offset is not None:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), bool), causal_offset), s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m)
    tot = p.sum(-1, keepdims=True)
    p = p / np.where(tot == 0, 1, tot)
    z = np.ones_like(p) if keep is None else keep / (1 - p_drop)
    out = (p * z) @ vv
    if do is None:
        return out
    dv = np.swapaxes(p * z, -1, -2) @ do
    dp = (do @ np.swapaxes(vv, -1, -2)) * z
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq, dk = ds @ kk * sc, np.swapaxes(ds, -1, -2) @ q * sc
    if group > 1:
        dk = dk.reshape(dk.shape[:-3] + (-1, group) + dk.shape[-2:]).sum(-3)
        dv = dv.reshape(dv.shape[:-3] + (-1, group) + dv.shape[-2:]).sum(-3)
    return out, dq, dk, dv, ds


def assert_grad_close(actual, expected, dtype, what):
    """|err| <= c·u·max|ref| (+ the dtype's atol in fp16/bf16): the "attention_grad" profile."""
    scale = np.abs(expected).max(initial=0.0)
    assert_close(actual, expected, dtype, "attention_grad", k=scale, err_msg=f"{what}, max|ref| {scale:g}")


def randn(rng, *shape):
    return rng.standard_normal(shape)


# ----- forward ---------------------------------------------------------------------------------------
CASES = [  # B, H, L, S, E, Ev, causal
    (2, 2, 17, 17, 32, 32, False),
    (1, 2, 127, 70, 64, 64, True),  # several key blocks, ragged tails, L > S causal
    (1, 1, 1, 33, 32, 48, False),  # one query, E != Ev (not a power of two)
    (1, 3, 20, 90, 16, 16, True),  # L < S causal (upper-left: row i sees keys 0..i)
]


@pytest.mark.parametrize("dtype", [f32, f64, f16, bf16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}H{}L{}S{}E{}Ev{}{}".format(*c[:6], "c" * c[6]))
def test_forward_against_float64(dtype, case):
    B, H, L, S, E, Ev, causal = case
    rng = np.random.default_rng(hash(case) % 2**32)
    q, k, v = (rounded(randn(rng, B, H, n, d), dtype) for n, d in ((L, E), (S, E), (S, Ev)))
    out = F.scaled_dot_product_attention(tensor(q, dtype), tensor(k, dtype), tensor(v, dtype), is_causal=causal)
    assert out.dtype is dtype and tuple(out.shape) == (B, H, L, Ev)
    ref = reference(q, k, v, causal_offset=0 if causal else None)
    assert_close(out, ref, dtype, "attention", k=S)


@pytest.mark.parametrize("E", [64, 128, 256])
def test_head_dims(E):
    rng = np.random.default_rng(E)
    q, k, v = (rounded(randn(rng, 1, 2, 19, E), f16) for _ in range(3))
    out = F.scaled_dot_product_attention(tensor(q, f16), tensor(k, f16), tensor(v, f16), scale=0.3)
    assert_close(out, reference(q, k, v, scale=0.3), f16, "attention", k=19)


@pytest.mark.parametrize("dtype", [f64, f16], ids=str)
@pytest.mark.parametrize("L,S", [(9, 70), (40, 17), (17, 17)])
def test_causal_lower_right_bias(L, S, dtype):
    """``attn_mask=causal_lower_right(L, S)`` (tritensor.nn.attention.bias): the triangle anchored
    at the lower-right corner, key j visible from query i when j <= i + S - L, forward and
    backward; with L > S the first L - S rows see nothing and give 0 (PyTorch's kernels: NaN, and a
    warning says so)."""
    rng = np.random.default_rng(L + S)
    q, k, v, do = (rounded(randn(rng, 1, 2, n, 32), dtype) for n in (L, S, S, L))
    tq, tk, tv = (tensor(a, dtype, True) for a in (q, k, v))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bias = causal_lower_right(L, S)
    assert len(caught) == (L > S) and (L <= S or "attend to no key" in str(caught[0].message))
    assert bias.variant is CausalVariant.LOWER_RIGHT and (bias.seq_len_q, bias.seq_len_kv) == (L, S)
    np.testing.assert_array_equal(bias._materialize().numpy(), np.tril(np.ones((L, S), bool), S - L))
    out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=bias)
    out.backward(tensor(do, dtype))
    ro, dq, dk, dv, _ = reference(q, k, v, causal_offset=S - L, do=do)
    assert_close(out.detach(), ro, dtype, "attention", k=S)
    for got, ref, what in ((tq.grad, dq, "dq"), (tk.grad, dk, "dk"), (tv.grad, dv, "dv")):
        assert_grad_close(got, ref, dtype, what)
    if L > S:
        assert np.all(out.detach().float().numpy()[:, :, : L - S] == 0)
    # The same attention as the materialised boolean mask, bit for bit (both run the same kernel).
    mat = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=bias._materialize())
    np.testing.assert_array_equal(out.detach().float().numpy(), mat.detach().float().numpy())


def test_causal_upper_left_bias_is_is_causal():
    rng = np.random.default_rng(4)
    tq, tk, tv = (tensor(randn(rng, 2, 3, n, 16), f32) for n in (11, 30, 30))
    a = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=causal_upper_left(11, 30))
    b = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(causal_upper_left((11, 30))._materialize().numpy(), np.tril(np.ones((11, 30), bool)))
    assert "True" in repr(causal_upper_left(2, 3))  # the materialised mask's repr, as torch prints it


def test_causal_bias_errors():
    q = tt.zeros(1, 1, 4, 8)
    k = tt.zeros(1, 1, 6, 8)
    with pytest.raises(ValueError, match="CausalBias should not be used with causal=True"):
        F.scaled_dot_product_attention(q, k, k, attn_mask=causal_lower_right(4, 6), is_causal=True)
    with pytest.raises(RuntimeError, match="causal bias of 4 x 5 but query has 4 rows and key 6"):
        F.scaled_dot_product_attention(q, k, k, attn_mask=causal_lower_right(4, 5))
    with pytest.raises(ValueError, match="only supports 2D"):
        causal_lower_right(1, 4, 6)
    with pytest.raises(TypeError, match="seq_len_kv must be a non-negative int"):
        causal_upper_left(4, -1)
    with pytest.raises(TypeError, match="variant must be a CausalVariant"):
        CausalBias(2, 4, 6)


@pytest.mark.parametrize("mshape", [(7, 33), (2, 1, 7, 33), (1, 3, 1, 33), (33,)], ids=str)
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_masks_broadcast(kind, mshape):
    rng = np.random.default_rng(len(mshape))
    q, k, v = randn(rng, 2, 3, 7, 32), randn(rng, 2, 3, 33, 32), randn(rng, 2, 3, 33, 32)
    if kind == "bool":
        mask = rng.random(mshape) > 0.4
        tm = tt.tensor(mask)
    else:
        mask = rounded(randn(rng, *mshape), f32)
        tm = tensor(mask, f32)
    out = F.scaled_dot_product_attention(tensor(q, f32), tensor(k, f32), tensor(v, f32), attn_mask=tm)
    assert_close(out, reference(q, k, v, mask=mask), f32, "accumulate", k=33)


def test_fully_masked_rows_give_zero_and_float_mask_with_half_query():
    rng = np.random.default_rng(5)
    q, k, v = (rounded(randn(rng, 1, 1, 6, 16), f16) for _ in range(3))
    mask = np.ones((6, 6), bool)
    mask[2] = False
    out = F.scaled_dot_product_attention(tensor(q, f16), tensor(k, f16), tensor(v, f16), attn_mask=tt.tensor(mask))
    assert np.all(out.float().numpy()[0, 0, 2] == 0) and np.isfinite(out.float().numpy()).all()
    add = np.where(mask, 0.0, -np.inf).astype(np.float32)  # an fp32 additive mask with an fp16 query: allowed
    out2 = F.scaled_dot_product_attention(tensor(q, f16), tensor(k, f16), tensor(v, f16), attn_mask=tt.tensor(add))
    np.testing.assert_array_equal(out2.float().numpy(), out.float().numpy())
    assert_close(out, reference(q, k, v, mask=mask), f16, "attention", k=6)


def test_gqa_and_single_kv_head_broadcast():
    rng = np.random.default_rng(7)
    q, k, v = randn(rng, 2, 6, 11, 32), randn(rng, 2, 2, 13, 32), randn(rng, 2, 2, 13, 32)
    out = F.scaled_dot_product_attention(tensor(q, f32), tensor(k, f32), tensor(v, f32), enable_gqa=True)
    assert_close(out, reference(q, k, v, group=3), f32, "accumulate", k=13)
    k1, v1 = k[:, :1], v[:, :1]  # one key/value head broadcasts over the query heads (as torch's matmul would)
    out = F.scaled_dot_product_attention(tensor(q, f32), tensor(k1, f32), tensor(v1, f32))
    assert_close(out, reference(q, k1, v1, group=6), f32, "accumulate", k=13)


def test_strided_and_batch_broadcast_inputs_and_ranks():
    """(B, L, H, E) storage seen as (B, H, L, E) through transpose (multi-head attention's layout),
    a key broadcast over the batch, 3-D and 2-D inputs."""
    rng = np.random.default_rng(11)
    qb, kb, vb = randn(rng, 2, 9, 3, 32), randn(rng, 1, 12, 3, 32), randn(rng, 1, 12, 3, 32)
    tq, tk, tv = (tensor(a, f32).transpose(1, 2) for a in (qb, kb, vb))
    assert not tq.is_contiguous()
    out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    q, k, v = (np.swapaxes(a, 1, 2) for a in (qb, kb, vb))
    assert tuple(out.shape) == (2, 3, 9, 32)
    assert_close(out, reference(q, np.broadcast_to(k, (2, 3, 12, 32)), np.broadcast_to(v, (2, 3, 12, 32)),
                                causal_offset=0), f32, "accumulate", k=12)
    out3 = F.scaled_dot_product_attention(tensor(q[0], f32), tensor(k[0], f32), tensor(v[0], f32))
    assert tuple(out3.shape) == (3, 9, 32)
    assert_close(out3, reference(q[0], k[0], v[0]), f32, "accumulate", k=12)
    out2 = F.scaled_dot_product_attention(tensor(q[0, 0], f32), tensor(k[0, 0], f32), tensor(v[0, 0], f32))
    assert tuple(out2.shape) == (9, 32)
    assert_close(out2, reference(q[0, 0], k[0, 0], v[0, 0]), f32, "accumulate", k=12)


def test_empty_shapes():
    z = tt.zeros
    assert tuple(F.scaled_dot_product_attention(z(0, 2, 5, 16), z(0, 2, 7, 16), z(0, 2, 7, 16)).shape) == (0, 2, 5, 16)
    assert tuple(F.scaled_dot_product_attention(z(1, 2, 0, 16), z(1, 2, 7, 16), z(1, 2, 7, 8)).shape) == (1, 2, 0, 8)
    out = F.scaled_dot_product_attention(tt.ones(1, 2, 3, 16), z(1, 2, 0, 16), z(1, 2, 0, 16))
    assert tuple(out.shape) == (1, 2, 3, 16) and np.all(out.numpy() == 0)  # nothing to attend to: 0
    q = tt.ones(1, 1, 3, 16, requires_grad=True)
    k = tt.ones(1, 1, 0, 16, requires_grad=True)
    F.scaled_dot_product_attention(q, k, k).sum().backward()
    assert np.all(q.grad.numpy() == 0) and tuple(k.grad.shape) == (1, 1, 0, 16)


# ----- backward --------------------------------------------------------------------------------------
BWD_CASES = [  # B, H, Hk, L, S, E, causal, mask
    (1, 2, 2, 127, 70, 32, True, None),
    (2, 4, 2, 17, 33, 32, False, "bool"),
    (1, 2, 1, 9, 40, 64, False, "additive"),
]


@pytest.mark.parametrize("dtype", [f32, f16, bf16], ids=str)
@pytest.mark.parametrize("case", BWD_CASES, ids=lambda c: "L{}S{}H{}Hk{}{}{}".format(c[3], c[4], c[1], c[2],
                                                                                   "c" * c[6], c[7] or ""))
def test_backward_against_float64(dtype, case):
    B, H, Hk, L, S, E, causal, mk = case
    rng = np.random.default_rng(L * S)
    q, k, v = rounded(randn(rng, B, H, L, E), dtype), rounded(randn(rng, B, Hk, S, E), dtype), rounded(
        randn(rng, B, Hk, S, E), dtype)
    do = rounded(randn(rng, B, H, L, E), dtype)
    mask, tm = None, None
    if mk == "bool":
        mask = rng.random((L, S)) > 0.3
        tm = tt.tensor(mask)
    elif mk == "additive":
        mask = rounded(randn(rng, 1, H, L, S), dtype)
        tm = tensor(mask, dtype, requires_grad=True)
    tq, tk, tv = tensor(q, dtype, True), tensor(k, dtype, True), tensor(v, dtype, True)
    out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, is_causal=causal, enable_gqa=H != Hk)
    out.backward(tensor(do, dtype))
    ro, dq, dk, dv, ds = reference(q, k, v, mask=mask, causal_offset=0 if causal else None, group=H // Hk, do=do)
    assert tq.grad.dtype is dtype and tuple(tk.grad.shape) == (B, Hk, S, E)
    for got, ref, what in ((tq.grad, dq, "dq"), (tk.grad, dk, "dk"), (tv.grad, dv, "dv")):
        assert_grad_close(got, ref, dtype, what)
    if mk == "additive":  # the mask was broadcast over the batch: its gradient sums dS over it
        assert_grad_close(tm.grad, ds.sum(0, keepdims=True), dtype, "dmask")


def test_backward_is_deterministic():
    rng = np.random.default_rng(13)
    args = [randn(rng, 1, 4, 40, 32) for _ in range(3)]
    grads = []
    for _ in range(2):
        ts = [tensor(a, f32, True) for a in args]
        F.scaled_dot_product_attention(*ts[:1], *ts[1:], enable_gqa=True, is_causal=True).sum().backward()
        grads.append([t.grad.numpy().copy() for t in ts])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


def test_gradcheck_float64():
    rng = np.random.default_rng(17)

    def leaf(*shape):
        return tt.tensor(randn(rng, *shape), requires_grad=True)

    q, k, v = leaf(1, 2, 3, 4), leaf(1, 1, 5, 4), leaf(1, 1, 5, 3)
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True, scale=0.7), (q, k, v))
    m = leaf(2, 3, 5)  # an additive mask broadcast over the batch, with its own gradient
    assert gradcheck(lambda a, b, c, d: F.scaled_dot_product_attention(a, b, c, attn_mask=d), (q, k, v, m))
    kg, vg = leaf(1, 1, 5, 4), leaf(1, 1, 5, 4)
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, enable_gqa=True), (q, kg, vg))


# ----- dropout ---------------------------------------------------------------------------------------
def _dropout_keep_mask(shape_q, S, p, seed):
    """The kernel's keep-mask for one call: with V = I (S = Ev) the output *is* P∘Z/(1-p)."""
    B, H, L, E = shape_q
    tt.manual_seed(seed)
    eye = tt.tensor(np.broadcast_to(np.eye(S), (B, H, S, S)).copy())
    out = F.scaled_dot_product_attention(tt.zeros(B, H, L, E, dtype=f64), tt.zeros(B, H, S, E, dtype=f64), eye,
                                         dropout_p=p)
    o = out.numpy()
    kept = o != 0
    if p < 1:
        # uniform P = 1/S, scaled by 1/(1-p): a few-ulp function of exact inputs, away from zero
        assert_close(o[kept], 1.0 / S / (1 - p), f64, "ulps")
    return kept


def test_dropout_statistics():
    p = 0.3
    kept = _dropout_keep_mask((2, 4, 64, 8), 64, p, seed=1)
    frac = 1 - kept.mean()  # 32768 Bernoulli draws: std 0.0025
    assert abs(frac - p) < 0.015, frac
    again = _dropout_keep_mask((2, 4, 64, 8), 64, p, seed=1)
    np.testing.assert_array_equal(kept, again)  # same seed: same mask
    assert (kept != _dropout_keep_mask((2, 4, 64, 8), 64, p, seed=2)).any()
    assert not _dropout_keep_mask((1, 1, 4, 8), 16, 1.0, seed=3).any()  # p = 1 drops everything


def test_dropout_forward_and_backward_use_the_same_mask():
    B, H, L, S, E, p, seed = 1, 2, 21, 37, 16, 0.4, 123
    kept = _dropout_keep_mask((B, H, L, E), S, p, seed)
    rng = np.random.default_rng(19)
    q, k, v, do = randn(rng, B, H, L, E), randn(rng, B, H, S, E), randn(rng, B, H, S, E), randn(rng, B, H, L, E)
    tq, tk, tv = (tensor(a, f64, True) for a in (q, k, v))
    tt.manual_seed(seed)  # the same counters as the probe above (same B·H·L·S draw)
    out = F.scaled_dot_product_attention(tq, tk, tv, dropout_p=p, is_causal=False)
    out.backward(tensor(do, f64))
    ro, dq, dk, dv, _ = reference(q, k, v, do=do, keep=kept, p_drop=p)
    assert_close(out.detach(), ro, f64)
    for got, ref in ((tq.grad, dq), (tk.grad, dk), (tv.grad, dv)):
        assert_close(got, ref, f64)


# ----- autocast and errors ---------------------------------------------------------------------------
def test_autocast_runs_attention_in_lower_precision():
    q = tt.ones(1, 1, 4, 16)
    with tt.autocast(q.device.type, dtype=bf16):  # the tensors' device: a region of another leaves them alone
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=tt.zeros(4, 4))
    assert out.dtype is bf16


def test_errors_name_the_argument():
    q = tt.ones(1, 2, 4, 16)
    sdpa = F.scaled_dot_product_attention
    with pytest.raises(TypeError, match="'query' must be Tensor"):
        sdpa(np.ones((1, 2, 4, 16)), q, q)
    with pytest.raises(RuntimeError, match="same dtype"):
        sdpa(q, q.half(), q)
    with pytest.raises(RuntimeError, match="floating point"):
        sdpa(*(tt.ones(1, 2, 4, 16, dtype=tt.int32),) * 3)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        sdpa(tt.ones(16), q, q)
    with pytest.raises(RuntimeError, match="key's last dimension"):
        sdpa(q, tt.ones(1, 2, 4, 8), q)
    with pytest.raises(RuntimeError, match="same sequence length"):
        sdpa(q, q, tt.ones(1, 2, 5, 16))
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        sdpa(q, q, q, attn_mask=tt.ones(4, 4, dtype=tt.bool), is_causal=True)
    with pytest.raises(RuntimeError, match="attn_mask dtype to be bool or float"):
        sdpa(q.half(), q.half(), q.half(), attn_mask=tt.ones(4, 4, dtype=tt.float64))
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        sdpa(q, q, q, attn_mask=tt.ones(3, 4, dtype=tt.bool))
    with pytest.raises(RuntimeError, match="must divide"):
        sdpa(tt.ones(1, 3, 4, 16), q, q, enable_gqa=True)
    with pytest.raises(RuntimeError, match="enable_gqa=True"):
        sdpa(tt.ones(1, 4, 4, 16), q, q)
    with pytest.raises(ValueError, match="dropout probability"):
        sdpa(q, q, q, dropout_p=1.5)
    with pytest.raises(TypeError, match="'is_causal' must be bool"):
        sdpa(q, q, q, is_causal=1)
    with pytest.raises(TypeError, match="'attn_mask' must be Tensor"):
        sdpa(q, q, q, attn_mask=np.ones((4, 4)))

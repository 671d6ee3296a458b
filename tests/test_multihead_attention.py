"""nn.MultiheadAttention, nn.TransformerEncoderLayer / TransformerEncoder (nn/modules/activation.py, nn/modules/transformer.py)
against a NumPy re-implementation of PyTorch's formulas (torch.nn.functional.multi_head_attention_forward
and TransformerEncoderLayer.forward) given the same parameters, in float64.

Covered: both paths (need_weights=True: unfused, weights returned, averaged or per head;
need_weights=False: the fused kernel), batch_first, unbatched inputs, kdim/vdim (separate
projection weights), bool and float key_padding_mask / attn_mask (2-D and 3-D), the is_causal
hint, PyTorch's parameter names and initialisation, a fp64 gradcheck through the module, the
encoder layer in post- and pre-norm form with relu/gelu, the stacked encoder with a final norm,
and the errors.
"""
import math

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.autograd import gradcheck
from tolerances import assert_close

f64 = tt.float64


def P(t):
    return None if t is None else t.detach().numpy().astype(np.float64)


def softmax(s):
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    return e / e.sum(-1, keepdims=True)


def np_mha(mha, query, key, value, attn_mask=None, key_padding_mask=None):
    """PyTorch's multi_head_attention_forward on (L, N, E) arrays; masks already additive floats.
    Returns (out (L, N, E), weights (N, H, L, S))."""
    L, N, E = query.shape
    S = key.shape[0]
    H = mha.num_heads
    Dh = E // H
    if mha._qkv_same_embed_dim:
        W = P(mha.in_proj_weight)
        Wq, Wk, Wv = W[:E], W[E:2 * E], W[2 * E:]
    else:
        Wq, Wk, Wv = P(mha.q_proj_weight), P(mha.k_proj_weight), P(mha.v_proj_weight)
    b = P(mha.in_proj_bias)
    bq, bk, bv = (b[:E], b[E:2 * E], b[2 * E:]) if b is not None else (0, 0, 0)
    q = (query @ Wq.T + bq).reshape(L, N * H, Dh).transpose(1, 0, 2)
    k = (key @ Wk.T + bk).reshape(S, N * H, Dh).transpose(1, 0, 2)
    v = (value @ Wv.T + bv).reshape(S, N * H, Dh).transpose(1, 0, 2)
    s = (q * math.sqrt(1.0 / Dh)) @ k.transpose(0, 2, 1)
    if attn_mask is not None:
        s = s + (attn_mask[None] if attn_mask.ndim == 2 else attn_mask)
    if key_padding_mask is not None:
        s = s + np.broadcast_to(key_padding_mask.reshape(N, 1, 1, S), (N, H, 1, S)).reshape(N * H, 1, S)
    p = softmax(s)
    o = (p @ v).transpose(1, 0, 2).reshape(L, N, E)
    out = o @ P(mha.out_proj.weight).T + (P(mha.out_proj.bias) if mha.out_proj.bias is not None else 0)
    return out, p.reshape(N, H, L, S)


def additive(bool_mask):
    return np.where(bool_mask, -np.inf, 0.0)


def T(a, requires_grad=False):
    t = tt.tensor(np.asarray(a))
    t.requires_grad = requires_grad
    return t


def test_parameter_names_shapes_and_init():
    m = nn.MultiheadAttention(8, 2)
    assert [n for n, _ in m.named_parameters()] == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                     "out_proj.bias"]
    assert tuple(m.in_proj_weight.shape) == (24, 8) and tuple(m.out_proj.weight.shape) == (8, 8)
    w = P(m.in_proj_weight)
    bound = math.sqrt(6.0 / (24 + 8))  # xavier_uniform_ on the (3E, E) matrix
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.5 * bound
    assert not P(m.in_proj_bias).any() and not P(m.out_proj.bias).any()
    m2 = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, bias=False)
    assert sorted(m2.state_dict()) == ["k_proj_weight", "out_proj.weight", "q_proj_weight", "v_proj_weight"]
    assert tuple(m2.k_proj_weight.shape) == (8, 5) and tuple(m2.v_proj_weight.shape) == (8, 3)


@pytest.mark.parametrize("average", [True, False])
def test_need_weights_path_with_masks(average):
    rng = np.random.default_rng(0)
    L, S, N, E, H = 5, 7, 2, 16, 4
    m = nn.MultiheadAttention(E, H, dtype=f64)
    with tt.no_grad():
        m.in_proj_bias.copy_(T(rng.standard_normal(3 * E)))
        m.out_proj.bias.copy_(T(rng.standard_normal(E)))
    q, k, v = rng.standard_normal((L, N, E)), rng.standard_normal((S, N, E)), rng.standard_normal((S, N, E))
    am = rng.standard_normal((L, S))
    kpm = np.zeros((N, S), bool)
    kpm[1, -2:] = True
    out, w = m(T(q), T(k), T(v), key_padding_mask=T(kpm), attn_mask=T(am), average_attn_weights=average)
    ro, rw = np_mha(m, q, k, v, attn_mask=am, key_padding_mask=additive(kpm))
    assert_close(out.detach(), ro, f64)
    assert_close(w.detach(), rw.mean(1) if average else rw, f64)
    assert np.all(w.detach().numpy()[1, ..., -2:] == 0)  # padded keys get no weight


def test_fused_path_batch_first_kdim_vdim_and_3d_bool_mask():
    rng = np.random.default_rng(1)
    L, S, N, E, H = 6, 9, 2, 16, 2
    m = nn.MultiheadAttention(E, H, kdim=5, vdim=3, batch_first=True, dtype=f64)
    q, k, v = rng.standard_normal((N, L, E)), rng.standard_normal((N, S, 5)), rng.standard_normal((N, S, 3))
    bm = rng.random((N * H, L, S)) > 0.7
    bm[:, :, 0] = False  # every query keeps one key
    out, w = m(T(q), T(k), T(v), attn_mask=T(bm), need_weights=False)
    assert w is None and tuple(out.shape) == (N, L, E)
    ro, _ = np_mha(m, *(a.transpose(1, 0, 2) for a in (q, k, v)), attn_mask=additive(bm))
    assert_close(out.detach(), ro.transpose(1, 0, 2), f64)


def test_is_causal_hint_and_unbatched_input():
    rng = np.random.default_rng(2)
    L, E, H = 7, 8, 2
    m = nn.MultiheadAttention(E, H, dtype=f64)
    x = rng.standard_normal((L, E))
    causal = T(np.triu(np.ones((L, L), bool), 1))
    out, _ = m(T(x), T(x), T(x), attn_mask=causal, is_causal=True, need_weights=False)  # mask dropped, kernel masks
    out_w, w = m(T(x), T(x), T(x), attn_mask=causal, is_causal=True)  # unfused: the mask itself
    ro, rw = np_mha(m, x[:, None], x[:, None], x[:, None], attn_mask=additive(np.triu(np.ones((L, L), bool), 1)))
    assert tuple(out.shape) == (L, E) and tuple(w.shape) == (L, L)
    assert_close(out.detach(), ro[:, 0], f64)
    assert_close(out_w.detach(), ro[:, 0], f64)
    assert_close(w.detach(), rw[0].mean(0), f64)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(T(x), T(x), T(x), is_causal=True)


def test_gradcheck_through_the_module_float64():
    rng = np.random.default_rng(3)
    m = nn.MultiheadAttention(4, 2, dtype=f64)
    x = T(rng.standard_normal((3, 1, 4)), requires_grad=True)
    kpm = T(np.array([[False, False, True]]))
    assert gradcheck(lambda a: m(a, a, a, key_padding_mask=kpm, need_weights=False)[0], (x,))
    out, _ = m(x, x, x, need_weights=False)
    out.sum().backward()
    assert m.in_proj_weight.grad is not None and m.out_proj.bias.grad is not None


def test_errors():
    with pytest.raises(AssertionError, match="divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(NotImplementedError, match="add_bias_kv"):
        nn.MultiheadAttention(8, 2, add_bias_kv=True)
    m = nn.MultiheadAttention(8, 2)
    x = tt.ones(3, 2, 8)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        m(x, x, x, attn_mask=tt.zeros(3, 4))
    with pytest.raises(AssertionError, match="key_padding_mask shape"):
        m(x, x, x, key_padding_mask=tt.zeros(3, 3, dtype=tt.bool))
    with pytest.raises(AssertionError, match="embedding dimension of 8"):
        m(tt.ones(3, 2, 6), x, x)


# ----- Transformer encoder ---------------------------------------------------------------------------
def np_layer_norm(x, ln):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + ln.eps) * P(ln.weight) + P(ln.bias)


def np_encoder_layer(layer, x, mask=None, gelu=False):
    """TransformerEncoderLayer.forward on (L, N, E), dropout off."""
    def sa(y):
        return np_mha(layer.self_attn, y, y, y, attn_mask=mask)[0]

    def act(y):
        if gelu:
            from math import erf
            return 0.5 * y * (1 + np.vectorize(erf)(y / math.sqrt(2)))
        return np.maximum(y, 0)

    def ff(y):
        h = act(y @ P(layer.linear1.weight).T + P(layer.linear1.bias))
        return h @ P(layer.linear2.weight).T + P(layer.linear2.bias)

    if layer.norm_first:
        x = x + sa(np_layer_norm(x, layer.norm1))
        return x + ff(np_layer_norm(x, layer.norm2))
    x = np_layer_norm(x + sa(x), layer.norm1)
    return np_layer_norm(x + ff(x), layer.norm2)


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_encoder_layer_matches_numpy(norm_first, activation):
    rng = np.random.default_rng(4)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.1, activation=activation,
                                       norm_first=norm_first, dtype=f64).eval()
    x = rng.standard_normal((6, 2, 16))
    mask = nn.Transformer.generate_square_subsequent_mask(6, dtype=f64)
    out = layer(T(x), src_mask=mask, is_causal=True)
    ref = np_encoder_layer(layer, x, mask=mask.numpy(), gelu=activation == "gelu")
    assert_close(out.detach(), ref, f64)


def test_encoder_stack_batch_first_state_dict_and_training_step():
    rng = np.random.default_rng(5)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, dtype=f64)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8, dtype=f64))
    keys = list(enc.state_dict())
    assert "layers.0.self_attn.in_proj_weight" in keys and "layers.1.linear2.bias" in keys and "norm.weight" in keys
    assert enc.layers[0].self_attn.in_proj_weight.data_ptr() != enc.layers[1].self_attn.in_proj_weight.data_ptr()
    x = rng.standard_normal((2, 5, 8))
    out = enc(T(x))
    y = x.transpose(1, 0, 2)
    for lay in enc.layers:
        y = np_encoder_layer(lay, y)
    ref = np_layer_norm(y, enc.norm).transpose(1, 0, 2)
    assert_close(out.detach(), ref, f64)
    out.sum().backward()
    assert all(p.grad is not None for p in enc.parameters())


def test_charlm_example_uses_nn_embedding():
    """Its docstring once said tritensor had no nn.Embedding and it carried a stand-in."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "train_charlm.py"
    spec = importlib.util.spec_from_file_location("train_charlm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "no ``nn.Embedding``" not in mod.__doc__ and not hasattr(mod, "Embedding")
    model = mod.CharGPT(context=4, dim=8, heads=2, layers=1, dropout=0.0)
    assert type(model.tok) is nn.Embedding and model.tok.weight.shape == (mod.VOCAB, 8)
    assert model(tt.zeros(2, 4, dtype=tt.int64)).shape == (2, 4, mod.VOCAB)


@pytest.mark.slow
def test_charlm_example_runs_and_learns(capsys):
    """examples/train_charlm.py: a few steps of the CPU configuration lower the held-out loss below a uniform guess."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "train_charlm.py"
    spec = importlib.util.spec_from_file_location("train_charlm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--steps", "6", "--log-every", "6", "--sample", "4", "--text-bytes", "50000"]) == 0
    out = capsys.readouterr().out
    held = float(out.split("held-out")[1].split()[0])
    assert held < math.log(128) and "--- sample ---" in out


# ----- Transformer decoder and nn.Transformer ---------------------------------------------------------
def np_decoder_layer(layer, x, mem, tgt_mask=None):
    """TransformerDecoderLayer.forward on (L, N, E), dropout off."""
    def sa(y):
        return np_mha(layer.self_attn, y, y, y, attn_mask=tgt_mask)[0]

    def ca(y):
        return np_mha(layer.multihead_attn, y, mem, mem)[0]

    def ff(y):
        h = np.maximum(y @ P(layer.linear1.weight).T + P(layer.linear1.bias), 0)
        return h @ P(layer.linear2.weight).T + P(layer.linear2.bias)

    if layer.norm_first:
        x = x + sa(np_layer_norm(x, layer.norm1))
        x = x + ca(np_layer_norm(x, layer.norm2))
        return x + ff(np_layer_norm(x, layer.norm3))
    x = np_layer_norm(x + sa(x), layer.norm1)
    x = np_layer_norm(x + ca(x), layer.norm2)
    return np_layer_norm(x + ff(x), layer.norm3)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_numpy(norm_first):
    rng = np.random.default_rng(6)
    layer = nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, dropout=0.1, norm_first=norm_first,
                                       dtype=f64).eval()
    x, mem = rng.standard_normal((5, 2, 16)), rng.standard_normal((7, 2, 16))
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=f64)
    out = layer(T(x), T(mem), tgt_mask=mask, tgt_is_causal=True)
    assert_close(out.detach(), np_decoder_layer(layer, x, mem, tgt_mask=mask.numpy()), f64)
    keys = set(layer.state_dict())
    assert {"multihead_attn.in_proj_weight", "norm3.bias", "linear2.weight"} <= keys


def test_transformer_matches_numpy_and_trains():
    rng = np.random.default_rng(7)
    model = nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16, dropout=0.0,
                           batch_first=True, dtype=f64)
    w = model.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(w).max() <= np.sqrt(6 / (8 + 16))  # xavier_uniform_, as torch's _reset_parameters
    src, tgt = rng.standard_normal((2, 6, 8)), rng.standard_normal((2, 4, 8))
    mask = model.generate_square_subsequent_mask(4, dtype=f64)
    out = model(T(src), T(tgt), tgt_mask=mask)
    mem = src.transpose(1, 0, 2)
    for lay in model.encoder.layers:
        mem = np_encoder_layer(lay, mem)
    mem = np_layer_norm(mem, model.encoder.norm)
    y = np_decoder_layer(model.decoder.layers[0], tgt.transpose(1, 0, 2), mem, tgt_mask=mask.numpy())
    ref = np_layer_norm(y, model.decoder.norm).transpose(1, 0, 2)
    assert_close(out.detach(), ref, f64)
    out.square().sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        model(T(src), T(tgt[:1]))
    with pytest.raises(RuntimeError, match="equal to d_model"):
        model(T(src[..., :4]), T(tgt[..., :4]))

    class Custom(nn.Transformer):  # subclassable, as scripts do
        def forward(self, src, tgt):
            return super().forward(src, tgt).mean()

    assert Custom(8, 2, 1, 1, 16, dtype=f64)(T(src[:, :, :8].transpose(1, 0, 2)), T(tgt.transpose(1, 0, 2))).ndim == 0


@pytest.mark.parametrize("batch_first", [False, True])
def test_packed_in_projection_for_self_and_key_value_attention(batch_first, monkeypatch):
    """As torch's _in_projection_packed: query is key is value projects once with the whole weight,
    key is value projects k and v together, distinct tensors once each; every way gives the NumPy
    reference's output and the same gradients."""
    from tritensor.nn import functional_attention as fa

    rng = np.random.default_rng(7)
    m = nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=f64)
    x_np, y_np = rng.standard_normal((3, 2, 8)), rng.standard_normal((4, 2, 8))  # (L, N, E)
    if batch_first:
        x_np, y_np = x_np.transpose(1, 0, 2), y_np.transpose(1, 0, 2)
    real, calls = fa._linear, []
    monkeypatch.setattr(fa, "_linear", lambda *a: calls.append(a[1].shape[0]) or real(*a))
    grads = []
    for case in ("self", "kv", "distinct"):
        calls.clear()
        m.zero_grad()
        x, y = T(x_np, requires_grad=True), T(y_np)
        q, k, v = {"self": (x, x, x), "kv": (x, y, y), "distinct": (x, y, y.clone())}[case]
        out, _ = m(q, k, v, need_weights=False)
        assert calls == {"self": [24, 8], "kv": [8, 16, 8], "distinct": [8, 8, 8, 8]}[case]
        def tm(a):
            return a.transpose(1, 0, 2) if batch_first else a
        qn, kn = tm(x_np), tm(x_np if case == "self" else y_np)
        assert_close(out.detach(), tm(np_mha(m, qn, kn, kn)[0]), f64)
        out.square().sum().backward()
        grads.append([m.in_proj_weight.grad.numpy(), m.in_proj_bias.grad.numpy()])
        # the heads are views of the projection here; the need_weights path reshapes them as torch does
        fused = [m.in_proj_weight.grad.numpy().copy(), x.grad.numpy().copy()]
        m.zero_grad()
        x.grad = None
        q, k, v = {"self": (x, x, x), "kv": (x, y, y), "distinct": (x, y, y.clone())}[case]
        m(q, k, v, need_weights=True)[0].square().sum().backward()
        for got, want in zip(fused, [m.in_proj_weight.grad, x.grad]):
            assert_close(T(got), want.numpy(), f64)
    # the same weights get gradients in every case; kv and distinct see the same inputs
    for a, b in zip(grads[1], grads[2]):
        assert_close(T(a), b, f64)

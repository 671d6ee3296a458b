"""Every differentiable op's backward checked by gradcheck in float64 (central differences),
full Jacobians on tiny inputs and, where inputs are larger (conv, pooling, second
derivatives), PyTorch's fast mode: v^T J u for random u, v, which a wrong Jacobian fails with
probability 1 at a fraction of the cost in the interpreter;
including broadcasting, non-contiguous inputs, in-place variants and conv2d with
stride/padding/dilation/groups; second derivatives (gradgradcheck) for the elementwise,
reduction and matmul ops; and gradients in fp32/fp16/bf16 against float64 NumPy references.
"""
import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.autograd import gradcheck, gradgradcheck

from tolerances import FLOAT_DTYPES, NP, TOL, assert_close

F64 = tt.float64
RNG = np.random.default_rng(1234)


def leaf(*shape, lo=-1.0, hi=1.0, positive=False):
    a = RNG.uniform(0.2 if positive else lo, hi + (1.0 if positive else 0.0), size=shape)
    return tt.tensor(a, dtype=F64, requires_grad=True)


def noncontig(*shape, positive=False):
    """A float64 leaf that is a transposed (non-contiguous) view of its storage."""
    base = RNG.uniform(0.2 if positive else -1.0, 2.0 if positive else 1.0, size=shape[::-1])
    t = tt.from_numpy(np.ascontiguousarray(base)).permute(*reversed(range(len(shape))))
    assert not t.is_contiguous()
    t.requires_grad_()
    return t


# ----- elementwise -------------------------------------------------------------------------
UNARY = {
    "neg": {}, "abs": {}, "exp": {}, "exp2": {}, "expm1": {}, "log": dict(positive=True),
    "log2": dict(positive=True), "log1p": dict(positive=True), "sqrt": dict(positive=True),
    "rsqrt": dict(positive=True), "sin": {}, "cos": {}, "tanh": {}, "sigmoid": {}, "relu": {}, "gelu": {},
    "gelu_tanh": {}, "silu": {}, "erf": {}, "reciprocal": dict(positive=True), "square": {},
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_gradcheck(op):
    x = leaf(2, 3, **UNARY[op])
    assert gradcheck(lambda t: getattr(t, op)(), (x,))


@pytest.mark.parametrize("op", ["floor", "ceil", "trunc", "sign"])
def test_piecewise_constant_ops_have_zero_gradient(op):
    x = leaf(4)
    y = getattr(x, op)()
    assert y.requires_grad
    y.sum().backward()
    assert_close(x.grad, np.zeros(4), F64)


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "pow": lambda a, b: a ** b, "maximum": tt.maximum, "minimum": tt.minimum,
    "remainder": lambda a, b: a % b,
}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_gradcheck_with_broadcasting(op):
    a = leaf(2, 3, positive=op in ("pow", "div", "remainder"))
    b = leaf(3, positive=op in ("pow", "div", "remainder")) if op != "remainder" else \
        tt.tensor([0.7, 1.3, 2.9], dtype=F64, requires_grad=True)  # away from the jumps of a % b
    assert gradcheck(BINARY[op], (a, b))
    c = leaf(2, 1, positive=op in ("pow", "div", "remainder"))
    assert gradcheck(BINARY[op], (a, c))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
def test_binary_with_python_scalars_both_sides(op):
    x = leaf(3, positive=True)
    assert gradcheck(lambda t: BINARY[op](t, 1.5), (x,))
    assert gradcheck(lambda t: BINARY[op](1.5, t), (x,))


def test_binary_noncontiguous_inputs():
    a, b = noncontig(2, 3), noncontig(2, 3)
    assert gradcheck(lambda x, y: x * y + x / (y * y + 1), (a, b))


def test_maximum_splits_ties_evenly():
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    b = tt.tensor([1.0, 0.0], requires_grad=True)
    tt.maximum(a, b).sum().backward()
    assert_close(a.grad, [0.5, 1.0], tt.float32)
    assert_close(b.grad, [0.5, 0.0], tt.float32)


def test_where_and_clamp():
    x, y = leaf(2, 3), leaf(2, 3)
    cond = tt.tensor([[True, False, True], [False, True, False]])
    assert gradcheck(lambda a, b: tt.where(cond, a, b), (x, y))
    assert gradcheck(lambda a: tt.where(cond, a, 0.5), (x,))
    assert gradcheck(lambda a: a.clamp(-0.3, 0.4), (x,))
    assert gradcheck(lambda a: a.clamp(min=-0.3), (x,))
    lo = tt.tensor([-0.5, 0.0, 0.25], dtype=F64, requires_grad=True)
    assert gradcheck(lambda a, m: a.clamp(min=m), (x, lo))


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
def test_inplace_binary_on_nonleaf(op):
    a, b = leaf(2, 3), leaf(3, positive=True)

    def f(x, y):
        z = x * 1
        getattr(z, op)(y)
        return z

    assert gradcheck(f, (a, b))


@pytest.mark.parametrize("op", ["exp_", "sigmoid_", "tanh_", "relu_", "sin_"])
def test_inplace_unary_on_nonleaf(op):
    x = leaf(5)

    def f(t):
        z = t * 2
        return getattr(z, op)()

    assert gradcheck(f, (x,))



# ----- every in-place and alias form the op table declares (tests/test_op_table.py) ------------
@pytest.mark.parametrize("op", sorted(UNARY))
def test_inplace_unary_gradcheck_every_op(op):
    x = leaf(2, 3, **UNARY[op])

    def f(t):
        z = t * 1
        return getattr(z, op + "_")()

    assert gradcheck(f, (x,))


@pytest.mark.parametrize("op", sorted(BINARY))
def test_inplace_binary_gradcheck_every_op(op):
    positive = op in ("pow", "div", "remainder")
    a = leaf(2, 3, positive=positive)
    b = leaf(3, positive=positive) if op != "remainder" else tt.tensor([0.7, 1.3, 2.9], dtype=F64, requires_grad=True)

    def f(x, y):
        z = x * 1
        return getattr(z, op + "_")(y)

    assert gradcheck(f, (a, b))


@pytest.mark.parametrize("op", ["floor_", "ceil_", "trunc_", "sign_", "floor_divide", "floor_divide_"])
def test_piecewise_constant_forms_have_zero_gradient(op):
    x, d = leaf(4), leaf(4, positive=True)
    z = x * 1
    y = getattr(z, op)(d) if op.startswith("floor_divide") else getattr(z, op)()
    assert y.requires_grad
    y.sum().backward()
    assert_close(x.grad, np.zeros(4), F64)
    if op.startswith("floor_divide"):
        assert_close(d.grad, np.zeros(4), F64)


def test_clamp_forms_gradcheck():
    x = leaf(2, 3)
    lo = tt.tensor([-0.5, 0.0, 0.25], dtype=F64, requires_grad=True)
    assert gradcheck(lambda a: tt.clip(a, -0.3, 0.4), (x,))
    assert gradcheck(lambda a: a.clamp_min(-0.3), (x,))
    assert gradcheck(lambda a: a.clamp_max(0.4), (x,))
    assert gradcheck(lambda a, m: (a * 1).clamp_(min=m, max=0.6), (x, lo))
    assert gradcheck(lambda a: (a * 1).clip_(-0.3, 0.4), (x,))


def test_fill_gradcheck():
    x = leaf(2, 3)
    assert gradcheck(lambda a: (a * 1)[0].fill_(0.5) + a[1], (x,))  # the filled part gets no gradient
    assert gradcheck(lambda a: (a * 2).zero_() + a, (x,))

# ----- views and indexing ------------------------------------------------------------------
VIEWS = {
    "view": lambda t: t.view(3, 4), "reshape": lambda t: t.reshape(2, -1), "flatten": lambda t: t.flatten(),
    "transpose": lambda t: t.transpose(0, 2), "permute": lambda t: t.permute(2, 0, 1), "t": lambda t: t[0].t(),
    "T": lambda t: t.T, "mT": lambda t: t.mT, "expand": lambda t: t[:, :1].expand(3, 2, 3, 2),
    "squeeze": lambda t: t[:, :1].squeeze(1), "unsqueeze": lambda t: t.unsqueeze(1),
    "narrow": lambda t: t.narrow(2, 1, 1), "select": lambda t: t.select(1, 1), "getitem": lambda t: t[1, ::2, None],
    "ellipsis": lambda t: t[..., 1], "split": lambda t: t.split(1, dim=2)[1] * 2 + t.split(1, dim=2)[0],
    "chunk": lambda t: t.chunk(2, 0)[0], "unbind": lambda t: t.unbind(1)[0] - t.unbind(1)[1],
    "unflatten": lambda t: t.flatten().unflatten(0, (4, 3)), "expand_as": lambda t: t[:1].expand_as(t),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_gradcheck(name):
    x = leaf(2, 3, 2)
    assert gradcheck(VIEWS[name], (x,))


def test_view_of_noncontiguous_and_reshape_that_copies():
    x = noncontig(3, 4)
    assert gradcheck(lambda t: t.reshape(12) * 2, (x,))  # must copy: the result is not a view
    assert gradcheck(lambda t: t.contiguous().view(2, 6), (x,))


def test_setitem_gradcheck():
    x, v = leaf(3, 4), leaf(2)

    def f(a, b):
        z = a * 1
        z[1, 1:3] = b * 3
        return z

    assert gradcheck(f, (x, v))


def test_inplace_through_strided_views_gradcheck():
    def unary_on_slice(t):
        z = t * 1
        z[1:3].exp_()  # saves its output, which lives in z's storage
        return z

    def binary_on_transposed_row(t, u):
        z = t * 1
        z.t()[1].mul_(u)  # a strided column of z, written in place
        return z.sin()

    assert gradcheck(unary_on_slice, (leaf(4, 2),))
    assert gradcheck(binary_on_transposed_row, (leaf(3, 2), leaf(3)))


def test_view_second_derivative():
    x = leaf(2, 3)
    assert gradgradcheck(lambda t: (t[:, 1:] * t.T[1:, :].T).exp(), (x,), fast_mode=True)


# ----- casts and copies --------------------------------------------------------------------
def test_casts_and_copies():
    x = leaf(2, 3)
    # a float32 round trip quantises f to ~6e-8: eps=1e-3 keeps the difference quotient's error ~1e-4
    assert gradcheck(lambda t: t.to(tt.float32).to(F64) * 1, (x,), eps=1e-3, atol=1e-3)
    assert gradcheck(lambda t: t.clone() * t, (x,))

    def copy_into(t):
        z = tt.zeros(2, 3, dtype=F64)
        z.copy_(t[:, :1])  # broadcast
        return z

    assert gradcheck(copy_into, (x,))


def test_cast_gradient_dtype():
    x = tt.ones(3, requires_grad=True)
    x.half().float().sum().backward()
    assert x.grad.dtype is tt.float32
    assert_close(x.grad, np.ones(3), tt.float32)


# ----- reductions and normalizations -------------------------------------------------------
REDUCTIONS = {
    "sum": lambda t: t.sum(), "sum_dim": lambda t: t.sum(1), "sum_dims_keep": lambda t: t.sum((0, 2), keepdim=True),
    "mean": lambda t: t.mean(), "mean_dim": lambda t: t.mean(-1, keepdim=True), "amax": lambda t: t.amax(1),
    "amin": lambda t: t.amin((0, 1)), "max": lambda t: t.max(), "max_dim": lambda t: t.max(2).values,
    "min_dim": lambda t: t.min(0, keepdim=True)[0], "var": lambda t: t.var(1), "std": lambda t: t.std(),
    "var_corr0": lambda t: t.var((1, 2), correction=0), "prod": lambda t: t.prod(1),
    "softmax": lambda t: t.softmax(1), "log_softmax": lambda t: t.log_softmax(-1),
    "softmax_dtype": lambda t: tt.softmax(t, 0, dtype=F64),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_gradcheck(name):
    x = leaf(2, 3, 2, positive=name == "prod")
    assert gradcheck(REDUCTIONS[name], (x,))


@pytest.mark.parametrize("name", ["sum_dim", "mean_dim", "max_dim", "var", "softmax", "log_softmax"])
def test_reduction_gradcheck_noncontiguous(name):
    x = noncontig(2, 3, 2)
    assert gradcheck(REDUCTIONS[name], (x,))


@pytest.mark.parametrize("name", ["sum_dim", "mean", "amax", "var", "std", "softmax", "log_softmax"])
def test_reduction_second_derivative(name):
    x = leaf(2, 3, 2)
    assert gradgradcheck(REDUCTIONS[name], (x,), fast_mode=True)


def test_max_dim_gradient_goes_to_returned_index():
    x = tt.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    v, i = x.max(1)
    assert not i.requires_grad
    v.sum().backward()
    assert_close(x.grad, [[0.0, 1.0, 0.0]] if int(i.item()) == 1 else [[0.0, 0.0, 1.0]], tt.float32)


def _with_zeros(nzeros, shape=(2, 3)):
    """A float64 leaf with ``nzeros`` zeros in every row (at different columns per row)."""
    a = RNG.uniform(0.5, 1.5, size=shape) * RNG.choice([-1.0, 1.0], size=shape)
    for r in range(shape[0]):
        a[r, [(r + k) % shape[1] for k in range(nzeros)]] = 0.0
    return tt.tensor(a, dtype=F64, requires_grad=True)


def _prod_grad_ref(a, axis):
    """d prod / dx_i = product of the other entries of the slice, by brute force."""
    a = a.reshape(1, -1) if axis is None else np.moveaxis(a, axis, -1)
    ref = np.empty_like(a)
    for i in range(a.shape[-1]):
        ref[..., i] = np.prod(np.delete(a, i, axis=-1), axis=-1)
    return ref


@pytest.mark.parametrize("nzeros", [0, 1, 2])
@pytest.mark.parametrize("over", ["dim", "all"])
def test_prod_gradient_with_zeros(nzeros, over):
    # per row of a (2, 3) input: 0, 1 or 2 zeros; over all dims the whole tensor has 2 * nzeros
    fn = {"dim": lambda t: t.prod(-1, keepdim=True), "all": lambda t: t.prod()}[over]
    x = _with_zeros(nzeros)
    assert gradcheck(fn, (x,))
    a = x.detach().numpy()
    fn(x).sum().backward()
    expected = _prod_grad_ref(a, 1) if over == "dim" else _prod_grad_ref(a, None).reshape(a.shape)
    assert_close(x.grad, expected, F64)


@pytest.mark.parametrize("nzeros", [1, 2])
def test_prod_second_derivative_with_zeros(nzeros):
    # the backward is written to be differentiable again at zeros too (fast mode: the full
    # second-order Jacobian costs far more in the interpreter)
    assert gradgradcheck(lambda t: t.prod(0), (_with_zeros(nzeros, (3, 2)),), fast_mode=True)


def test_prod_gradient_with_one_zero_over_all_dims_and_low_precision():
    x = tt.tensor([[1.5, 0.0, 2.0], [0.5, -1.0, 3.0]], requires_grad=True)  # fp32, one zero in the tensor
    x.prod().backward()
    assert_close(x.grad, [[0.0, -4.5, 0.0], [0.0, 0.0, 0.0]], tt.float32)
    y = tt.tensor([[2.0, 0.0], [0.0, 0.0]], dtype=tt.bfloat16, requires_grad=True)
    y.prod(0).sum().backward()
    assert y.grad.dtype is tt.bfloat16
    assert_close(y.grad, [[0.0, 0.0], [2.0, 0.0]], tt.bfloat16)


def test_layer_norm_gradcheck():
    x, w, b = leaf(2, 3), leaf(3), leaf(3)
    assert gradcheck(lambda a, ww, bb: tt.layer_norm(a, (3,), ww, bb), (x, w, b))
    assert gradcheck(lambda a: tt.layer_norm(a, (3, 4)), (leaf(2, 3, 4),), fast_mode=True)
    assert gradcheck(lambda a, ww: tt.layer_norm(a, (4,), ww), (noncontig(3, 4), leaf(4)), fast_mode=True)
    out, mean, rstd = tt.native_layer_norm(x, (3,), w, b)
    assert out.requires_grad and not mean.requires_grad and not rstd.requires_grad
    assert gradcheck(lambda a: tt.native_layer_norm(a, (3,))[0], (x,))
    with pytest.raises(NotImplementedError, match="double backward"):
        tt.autograd.grad(tt.layer_norm(x, (3,)).sum(), x, create_graph=True)


# ----- matmul ------------------------------------------------------------------------------
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


# ----- convolution and pooling (fast mode: v^T J u, one backward per check) --------------------
CONVS = {
    "plain": dict(), "stride_pad": dict(stride=2, padding=1), "dilation": dict(dilation=2, padding=2),
    "groups": dict(groups=2, padding=1), "depthwise": dict(groups=4, stride=(1, 2)),
    "asym": dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv2d_gradcheck(name):
    kw = CONVS[name]
    g = kw.get("groups", 1)
    x, w, b = leaf(2, 4, 6, 5), leaf(4, 4 // g, 3, 3), leaf(4)
    assert gradcheck(lambda a, ww, bb: tt.conv2d(a, ww, bb, **kw), (x, w, b), fast_mode=True)


def test_conv2d_full_jacobian_small_and_noncontiguous_and_unbatched():
    # the full Jacobian once, on a tiny case, besides the projections above
    assert gradcheck(lambda a, ww: tt.conv2d(a, ww, stride=2, padding=1), (leaf(1, 1, 3, 3), leaf(2, 1, 2, 2)))
    x = noncontig(5, 4, 2, 1).permute(3, 2, 1, 0)  # (1, 2, 4, 5) non-contiguous
    assert gradcheck(lambda a, ww: tt.conv2d(a, ww, padding=1), (x, leaf(3, 2, 3, 3)), fast_mode=True)
    assert gradcheck(lambda a, ww: tt.conv2d(a, ww), (leaf(2, 4, 4), leaf(3, 2, 2, 2)), fast_mode=True)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, stride=1, dilation=2, ceil_mode=True)])
def test_max_pool2d_gradcheck(kw):
    x = tt.tensor(RNG.permutation(2 * 2 * 5 * 5).reshape(2, 2, 5, 5) / 10.0, dtype=F64, requires_grad=True)  # no ties
    assert gradcheck(lambda a: tt.max_pool2d(a, **kw), (x,), fast_mode=True)
    small = tt.tensor(RNG.permutation(9).reshape(1, 1, 3, 3) / 10.0, dtype=F64, requires_grad=True)
    assert gradcheck(lambda a: tt.max_pool2d(a, **{**kw, "kernel_size": 2}), (small,))
    assert gradcheck(lambda a: tt.max_pool2d_with_indices(a, **kw)[0], (x,), fast_mode=True)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True)])
def test_avg_pool2d_gradcheck(kw):
    assert gradcheck(lambda a: tt.avg_pool2d(a, **kw), (leaf(1, 2, 5, 5),), fast_mode=True)
    assert gradcheck(lambda a: tt.avg_pool2d(a, **kw), (leaf(1, 1, 3, 3),))


def test_conv_double_backward_raises():
    x, w = leaf(1, 1, 3, 3), leaf(1, 1, 2, 2)
    (g,) = tt.autograd.grad(tt.conv2d(x, w).sum(), x, create_graph=False)
    with pytest.raises(NotImplementedError, match="double backward"):
        tt.autograd.grad(tt.conv2d(x, w).sum(), x, create_graph=True)


# ----- losses ------------------------------------------------------------------------------
def test_cross_entropy_and_friends_gradcheck():
    x = leaf(4, 5)
    t = tt.tensor([0, 4, -100, 2])
    for red in ("mean", "sum", "none"):
        assert gradcheck(lambda a: nn.functional.cross_entropy(a, t, reduction=red), (x,))
    x4, t4 = leaf(2, 3, 2, 2), tt.tensor([[[0, 1], [2, 1]], [[1, 1], [0, 2]]])
    assert gradcheck(lambda a: nn.functional.cross_entropy(a, t4), (x4,), fast_mode=True)
    assert gradcheck(lambda a: nn.functional.nll_loss(a.log_softmax(1), t4), (x4,), fast_mode=True)
    assert gradcheck(lambda a: nn.functional.cross_entropy(a, tt.tensor(3)), (leaf(5),))
    y = leaf(4, 5)
    assert gradcheck(lambda a, b: nn.functional.mse_loss(a, b), (x, y))


def test_dropout_gradient_matches_mask():
    tt.manual_seed(3)
    x = tt.ones(200, requires_grad=True)
    y = nn.functional.dropout(x, 0.25)
    y.sum().backward()
    kept = y.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy()[kept], 1 / 0.75, rtol=1e-6)
    assert (x.grad.numpy()[~kept] == 0).all() and 0.6 < kept.mean() < 0.9


# ----- gradients in every float dtype against float64 NumPy --------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_gradients_in_each_dtype(dtype):
    a64 = RNG.uniform(0.5, 1.5, size=(3, 5))
    b64 = RNG.uniform(0.5, 1.5, size=(5,))
    a = tt.tensor(a64.astype(NP[dtype]), dtype=dtype, requires_grad=True)
    b = tt.tensor(b64.astype(NP[dtype]), dtype=dtype, requires_grad=True)
    ((a * b).exp() / (b + 1)).sum().backward()
    ar, br = a64.astype(NP[dtype]).astype(np.float64), b64.astype(NP[dtype]).astype(np.float64)
    e = np.exp(ar * br)
    ga = e * br / (br + 1)
    gb = (e * ar / (br + 1) - e / (br + 1) ** 2).sum(0)
    assert a.grad.dtype is dtype and b.grad.dtype is dtype
    # a few chained roundings in the gradient's dtype: 4x the one-op tolerance
    tol = {k: 4 * v for k, v in TOL[dtype].items()}
    assert_close(a.grad, ga, dtype, **tol)
    assert_close(b.grad, gb, dtype, **{k: v * 5 for k, v in tol.items()})  # plus a 3-term sum


def test_empty_tensors_backward():
    x = tt.zeros(0, 3, requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.shape == (0, 3)

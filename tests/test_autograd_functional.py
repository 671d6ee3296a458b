"""autograd.functional (jacobian, hessian, vjp, jvp, vhp, hvp) against float64 NumPy derivatives.

The functions are chosen so the derivatives have closed forms: f(x) = sin(x) * x (elementwise,
Jacobian diagonal cos(x) * x + sin(x)), g(A, x) = A @ x (Jacobians x-shaped rows and A), and the
scalar s(x) = sum(x**3) + x0 * x1 (Hessian diag(6x) plus the off-diagonal pair).
"""
import numpy as np
import pytest

import tritensor as tt
from tritensor.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp
from layouts import LAYOUTS, make
from tolerances import FLOAT_DTYPES, NP, assert_close

RNG = np.random.default_rng(0)


def _vals(shape):
    return RNG.uniform(-1.5, 1.5, shape)


def f(x):
    return x.sin() * x


def f_jac(x):  # d f_i / d x_j for a flattened x
    d = np.cos(x) * x + np.sin(x)
    return np.diag(d.reshape(-1)).reshape(x.shape + x.shape)


def s(x):
    flat = x.reshape(-1)
    return (x ** 3).sum() + flat[0] * flat[1]


def s_hess(x):
    n = x.size
    h = np.diag(6 * x.reshape(-1))
    h[0, 1] += 1
    h[1, 0] += 1
    return h.reshape(x.shape + x.shape)


def _np(t):
    return t.detach().cpu().numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_jacobian_elementwise(dtype, layout):
    x, ref = make((2, 3), dtype, layout, _vals)
    j = jacobian(f, x)
    assert j.shape == (2, 3, 2, 3) and j.dtype is dtype and not j.requires_grad
    # The derivative rounds twice (cos(x)*x and sin(x), each stored in the dtype), then adds.
    assert_close(_np(j), f_jac(ref), dtype, "rounded_terms", k=3)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64])
def test_jacobian_tuple_inputs_and_outputs(dtype):
    A = tt.tensor(_vals((3, 2)).astype(NP[dtype]))
    x = tt.tensor(_vals((2,)).astype(NP[dtype]))
    (jA, jx), (kA, kx) = jacobian(lambda a, b: (a @ b, (b * b).sum()), (A, x))
    a, b = _np(A), _np(x)
    ref_jA = np.zeros((3, 3, 2))
    for i in range(3):
        ref_jA[i, i, :] = b
    assert jA.shape == (3, 3, 2) and jx.shape == (3, 2) and kA.shape == (3, 2) and kx.shape == (2,)
    assert_close(_np(jA), ref_jA, dtype)
    assert_close(_np(jx), a, dtype)
    assert_close(_np(kA), np.zeros((3, 2)), dtype)  # independent of A: zeros (strict=False)
    assert_close(_np(kx), 2 * b, dtype)
    # A tuple of one input keeps its tuple; a single Tensor does not.
    (only,) = jacobian(f, (x,))
    assert only.shape == (2, 2)


def test_jacobian_vectorize_and_forward_mode_give_the_same_values():
    x = tt.tensor(_vals((4,)))
    base = _np(jacobian(f, x))
    assert_close(_np(jacobian(f, x, vectorize=True)), base, tt.float64, "exact")
    assert_close(_np(jacobian(f, x, vectorize=True, strategy="forward-mode")), base, tt.float64, "exact")
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        jacobian(f, x, strategy="forward-mode")
    with pytest.raises(NotImplementedError, match="`create_graph=True` and `strategy=\"forward-mode\"`"):
        jacobian(f, x, create_graph=True, vectorize=True, strategy="forward-mode")
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True`"):
        jacobian(f, x, strict=True, vectorize=True)
    with pytest.raises(AssertionError, match="Expected strategy"):
        jacobian(f, x, strategy="sideways")


def test_jacobian_empty_and_scalar():
    e = tt.zeros(0, dtype=tt.float64)
    j = jacobian(f, e)
    assert j.shape == (0, 0)
    x = tt.tensor(0.5, dtype=tt.float64)
    assert_close(_np(jacobian(f, x)), f_jac(np.array(0.5)), tt.float64)


def test_jacobian_create_graph_is_differentiable():
    x = tt.tensor(_vals((3,)), requires_grad=True)
    j = jacobian(lambda a: a ** 3, x, create_graph=True)
    assert j.requires_grad
    (g,) = tt.autograd.grad(j.sum(), x)  # d/dx sum(diag(3x^2)) = 6x
    assert_close(_np(g), 6 * _np(x), tt.float64)


def test_jacobian_strict():
    x = tt.tensor(_vals((2,)))
    y = tt.tensor(_vals((2,)))
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent of input 1"):
        jacobian(lambda a, b: a * 2, (x, y), strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients"):
        jacobian(lambda a: tt.ones(2, dtype=tt.float64), x, strict=True)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64])
def test_hessian(dtype):
    x = tt.tensor(_vals((2, 2)).astype(NP[dtype]))
    h = hessian(s, x)
    assert h.shape == (2, 2, 2, 2)
    assert_close(_np(h), s_hess(_np(x)), dtype)
    a, b = tt.tensor(_vals((2,)).astype(NP[dtype])), tt.tensor(_vals((3,)).astype(NP[dtype]))
    (haa, hab), (hba, hbb) = hessian(lambda u, v: (u.sum() * v.sum()) + (u ** 2).sum(), (a, b))
    assert_close(_np(haa), 2 * np.eye(2), dtype)
    assert_close(_np(hab), np.ones((2, 3)), dtype)
    assert_close(_np(hba), np.ones((3, 2)), dtype)
    assert_close(_np(hbb), np.zeros((3, 3)), dtype)


def test_hessian_errors():
    x = tt.tensor(_vals((3,)))
    with pytest.raises(RuntimeError, match="should contain a single element"):
        hessian(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        hessian(lambda a: (a.sum(), a.sum()), x)
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with respect to input 0"):
        hessian(lambda a: a.sum(), x, strict=True)  # linear: the Jacobian is constant


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_vjp_and_jvp(dtype):
    x, ref = make((3,), dtype, "sliced", _vals)
    v = tt.tensor(_vals((3,)).astype(NP[dtype]))
    out, g = vjp(f, x, v)
    jac = f_jac(ref)
    assert_close(_np(out), np.sin(ref) * ref, dtype, "rounded_terms", k=2)
    assert_close(_np(g), _np(v) @ jac, dtype, "rounded_terms", k=4)
    out2, jv = jvp(f, x, v)
    assert_close(_np(jv), jac @ _np(v), dtype, "rounded_terms", k=4)
    assert not g.requires_grad and not jv.requires_grad and not out.requires_grad


def test_vjp_jvp_tuples_and_v_none():
    A = tt.tensor(_vals((2, 3)))
    x = tt.tensor(_vals((3,)))
    vA, vx = tt.tensor(_vals((2, 3))), tt.tensor(_vals((3,)))
    out, (jA, jx) = vjp(lambda a, b: a @ b, (A, x), tt.ones(2, dtype=tt.float64))
    assert_close(_np(jA), np.tile(_np(x), (2, 1)), tt.float64)
    assert_close(_np(jx), _np(A).sum(0), tt.float64)
    out, jv = jvp(lambda a, b: a @ b, (A, x), (vA, vx))
    assert_close(_np(jv), _np(vA) @ _np(x) + _np(A) @ _np(vx), tt.float64)
    one = tt.tensor([0.3], dtype=tt.float64)
    out, g = vjp(lambda a: (a * a).sum(), one)  # v may be left out for a one-element output
    assert_close(_np(g), np.array([0.6]), tt.float64)
    out, g = jvp(lambda a: a * a, one)
    assert_close(_np(g), np.array([0.6]), tt.float64)


def test_vjp_errors():
    x = tt.tensor(_vals((3,)))
    with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided function returns"):
        vjp(f, x)
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be tritensor.Size\(\[3\]\) but got tritensor.Size\(\[2\]\)."):
        vjp(f, x, tt.ones(2, dtype=tt.float64))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but got 1."):
        jvp(lambda a, b: a * b, (x, x), (x,))
    with pytest.raises(TypeError, match="The inputs given to vjp must be either a Tensor or a tuple of Tensors but "
                                        "the value at index 1 has type <class 'int'>."):
        vjp(f, (x, 3))
    with pytest.raises(TypeError, match="The outputs of the user-provided function given to jvp must be"):
        jvp(lambda a: 3, x, x)
    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 1"):
        vjp(lambda a, b: a * 2, (x, x.clone()), x, strict=True)
    # strict=False: an unused input gets zeros
    _, (g0, g1) = vjp(lambda a, b: a * 2, (x, x.clone()), x)
    assert_close(_np(g1), np.zeros(3), tt.float64)


@pytest.mark.parametrize("fn", [vhp, hvp])
@pytest.mark.parametrize("dtype", [tt.float32, tt.float64])
def test_vhp_hvp(fn, dtype):
    x = tt.tensor(_vals((3,)).astype(NP[dtype]))
    v = tt.tensor(_vals((3,)).astype(NP[dtype]))
    out, r = fn(s, x, v)
    xs = _np(x)
    assert_close(_np(out), np.array((xs ** 3).sum() + xs[0] * xs[1]), dtype, "accumulate", k=4)
    assert_close(_np(r), s_hess(xs) @ _np(v), dtype, "rounded_terms", k=2)
    with pytest.raises(RuntimeError, match=f"The function given to {fn.__name__} should return a single Tensor"):
        fn(lambda a: (a.sum(),), x, v)
    with pytest.raises(RuntimeError, match="The vector v can only be None if the input to the user-provided"):
        fn(s, x)


def test_create_graph_keeps_history_of_the_callers_inputs():
    x = tt.tensor(_vals((3,)), requires_grad=True)
    v = tt.ones(3, dtype=tt.float64)
    _, g = vjp(lambda a: (a ** 3), x, v, create_graph=True)
    assert g.requires_grad
    (gg,) = tt.autograd.grad(g.sum(), x)
    assert_close(_np(gg), 6 * _np(x), tt.float64)
    _, h = hvp(lambda a: (a ** 4).sum(), x, v, create_graph=True)
    (hh,) = tt.autograd.grad(h.sum(), x)
    assert_close(_np(hh), 24 * _np(x), tt.float64)

"""``optim.Muon`` against a float64 NumPy rewrite of torch's rule, step by step: the momentum
buffer (fp32/fp64 exact to the default tolerance) and the Newton-Schulz update, computed in
bfloat16 as torch computes it (each matmul and each addmm rounded to bf16 once, as a bf16 GEMM does), so the update is
compared as the bf16 tensor it is; the parameter's weight decay and shape-scaled learning rate;
torch's defaults, checks and state key."""
import math

import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
from tolerances import assert_close

rng = np.random.default_rng(3)
A_, B_, C_ = 3.4445, -4.7750, 2.0315


def bf16(a):
    return np.asarray(a, dtype=np.float64).astype(ml_dtypes.bfloat16).astype(np.float64)


def ref_newton_schulz(g, steps=5, coeffs=(A_, B_, C_), eps=1e-7):
    a, b, c = coeffs
    x = bf16(g)
    tall = g.shape[0] > g.shape[1]
    if tall:
        x = x.T
    x = bf16(x / max(bf16(np.linalg.norm(x)), eps))
    for _ in range(steps):
        gram = bf16(x @ x.T)
        upd = bf16(b * gram + c * (gram @ gram))  # a bf16 addmm rounds once
        x = bf16(a * x + upd @ x)
    return x.T if tall else x


def ref_adjust(lr, fn, shape):
    A, B = shape
    if fn in (None, "original"):
        return lr * math.sqrt(max(1, A / B))
    return lr * 0.2 * math.sqrt(max(A, B))


@pytest.mark.parametrize("shape,nesterov,adjust,dtype", [((6, 4), True, None, tt.float32),
                                                         ((3, 7), False, "match_rms_adamw", tt.float64),
                                                         ((5, 5), True, "original", tt.float32)])
def test_steps_match_torchs_rule(shape, nesterov, adjust, dtype):
    lr, wd, mu = 0.02, 0.1, 0.9
    p0 = rng.standard_normal(shape)
    p = tt.nn.Parameter(tt.tensor(p0, dtype=dtype))
    opt = tt.optim.Muon([p], lr=lr, weight_decay=wd, momentum=mu, nesterov=nesterov, adjust_lr_fn=adjust)
    pr, buf = p.detach().numpy().astype(np.float64), np.zeros(shape)
    for _ in range(2):
        g = rng.standard_normal(shape)
        p.grad = tt.tensor(g, dtype=dtype)
        before = p.detach().numpy().astype(np.float64).copy()
        opt.step()
        buf = buf + (1 - mu) * (g - buf)
        assert_close(opt.state[p]["momentum_buffer"], buf, dtype)
        update = g + mu * (buf - g) if nesterov else buf
        o = ref_newton_schulz(update)
        adj = ref_adjust(lr, adjust, shape)
        got = (p.detach().numpy().astype(np.float64) - before * (1 - lr * wd)) / -adj
        # the update is a bf16 tensor; it reaches the parameter through one fp32 (fp64) add
        assert_close(got, o, tt.bfloat16)
        pr = pr * (1 - lr * wd) - adj * o
    assert_close(p.detach(), pr, tt.bfloat16)
    assert list(opt.state[p]) == ["momentum_buffer"]


def test_newton_schulz_orthogonalises():
    g = rng.standard_normal((8, 5))
    p = tt.nn.Parameter(tt.zeros(8, 5))
    opt = tt.optim.Muon([p], lr=1.0, weight_decay=0.0, momentum=0.0, nesterov=False)
    p.grad = tt.tensor(g.astype(np.float32))
    opt.step()
    o = -p.detach().numpy().astype(np.float64) / math.sqrt(8 / 5)
    # singular values pushed into about (0.5, 1.5): Keller Jordan's quintic, not an exact UV^T
    s = np.linalg.svd(o, compute_uv=False)
    assert s.min() > 0.5 and s.max() < 1.5, s


def test_defaults_and_errors_as_torch():
    p = tt.nn.Parameter(tt.zeros(2, 3))
    d = tt.optim.Muon([p]).defaults
    assert d == {"lr": 1e-3, "weight_decay": 0.1, "momentum": 0.95, "nesterov": True,
                 "ns_coefficients": (A_, B_, C_), "eps": 1e-7, "ns_steps": 5, "adjust_lr_fn": None}
    with pytest.raises(ValueError, match=r"Muon only supports 2D parameters whereas we found a parameter with size"):
        tt.optim.Muon([tt.nn.Parameter(tt.zeros(3))])
    with pytest.raises(ValueError, match="Learning rate should be >= 0 but is: -1"):
        tt.optim.Muon([p], lr=-1)
    with pytest.raises(ValueError, match="momentum should be >= 0 but is: -0.5"):
        tt.optim.Muon([p], momentum=-0.5)
    with pytest.raises(ValueError, match="weight decay should be >= 0 but is: -0.1"):
        tt.optim.Muon([p], weight_decay=-0.1)
    with pytest.raises(ValueError, match="Adjust learning rate function sqrt is not supported"):
        tt.optim.Muon([p], adjust_lr_fn="sqrt")
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        tt.optim.Muon([p], lr=tt.tensor([0.1, 0.2]))
    opt = tt.optim.Muon([p], ns_steps=100)
    p.grad = tt.ones(2, 3)
    with pytest.raises(ValueError, match="Number of steps must be less than 100"):
        opt.step()

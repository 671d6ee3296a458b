"""nn.utils: clip_grad_norm_ (one multi-tensor norm launch and one scale launch per dtype, no host
sync) against float64 NumPy for norm types 2/1/inf/0/3 over fp32/fp16/bf16/fp64, non-contiguous
and empty gradients, tensors spanning several blocks; clip_grad_value_; parameters_to_vector and
vector_to_parameters."""
import math

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.core.ops import foreach
from tritensor.core.tensor import Tensor

from tolerances import NP, assert_close


def _params(rng, specs):
    """specs: (shape, dtype, transposed) -> leaf params whose .grad is set (maybe non-contiguous)."""
    ps, refs = [], []
    for shape, dtype, transposed in specs:
        p = tt.zeros(shape, dtype=dtype, requires_grad=True)
        g = (rng.standard_normal(shape[::-1] if transposed else shape) * 3).astype(NP[dtype])
        gt = tt.tensor(g)
        if transposed:
            gt = gt.T
            g = g.T
        p.grad = gt
        ps.append(p)
        refs.append(g.astype(np.float64))
    return ps, refs


SPECS = [((7, 3), tt.float32, True), ((9000,), tt.float32, False), ((5,), tt.float16, False),
         ((4, 2), tt.bfloat16, True), ((0, 3), tt.float32, False), ((6,), tt.float64, False)]


def _norm(refs, p):
    flat = np.concatenate([r.reshape(-1) for r in refs])
    if math.isinf(p):
        return np.abs(flat).max()
    if p == 0:
        return float(np.count_nonzero(flat))
    return (np.abs(flat) ** p).sum() ** (1 / p)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 0.0, 3.0])
def test_clip_grad_norm_against_float64(norm_type):
    rng = np.random.default_rng(0)
    ps, refs = _params(rng, SPECS)
    total = _norm(refs, norm_type)
    max_norm = total / 4
    got = nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    assert got.ndim == 0 and got.dtype is tt.float32
    assert_close(got, total, tt.float32, "fp32_norm")  # fp32 sums over ~9000 terms
    coef = min(max_norm / (total + 1e-6), 1.0)
    for p, r in zip(ps, refs):
        # The coefficient is an fp32 tensor (the total norm of mixed dtypes is fp32, as torch's),
        # so fp64 gradients are scaled to fp32 precision; fp16/bf16 keep their default numbers.
        assert_close(p.grad, r * coef, p.dtype, "fp32_norm")
    if norm_type == 2.0:  # clipped to max_norm
        assert_close(nn.utils.get_total_norm([p.grad for p in ps]), max_norm, tt.float32, "clipped_norm")


def test_no_clipping_below_max_norm_and_single_tensor():
    p = tt.zeros(3, requires_grad=True)
    p.grad = tt.tensor([0.3, 0.4, 0.0])
    n = nn.utils.clip_grad_norm_(p, 1.0)
    assert_close(n, 0.5, tt.float32)
    assert_close(p.grad, [0.3, 0.4, 0.0], tt.float32)
    q = tt.zeros(2, requires_grad=True)  # no grad at all: norm 0, nothing touched
    assert nn.utils.clip_grad_norm_([q], 1.0).item() == 0.0


def test_one_launch_per_dtype_and_no_host_sync(monkeypatch):
    rng = np.random.default_rng(1)
    ps, _ = _params(rng, [((20000,), tt.float32, False), ((5, 5), tt.float32, False), ((3,), tt.float16, False)])
    calls = {"norm": 0, "scale": 0}
    real_norm, real_scale = foreach._k.norm_partials, foreach._k.scale_
    monkeypatch.setattr(foreach._k, "norm_partials", lambda *a, **k: (calls.__setitem__("norm", calls["norm"] + 1),
                                                                        real_norm(*a, **k)))
    monkeypatch.setattr(foreach._k, "scale_", lambda *a, **k: (calls.__setitem__("scale", calls["scale"] + 1),
                                                               real_scale(*a, **k)))

    def no_sync(*a, **k):
        raise AssertionError("clip_grad_norm_ synchronised with the host")

    for name in ("item", "numpy", "tolist", "_to_host_array", "__float__", "__bool__"):
        monkeypatch.setattr(Tensor, name, no_sync)
    nn.utils.clip_grad_norm_(ps, 0.1)
    assert calls == {"norm": 2, "scale": 2}  # fp32 group and fp16 group


def test_nonfinite_norm():
    p = tt.zeros(2, requires_grad=True)
    p.grad = tt.tensor([float("nan"), 1.0])
    assert math.isnan(nn.utils.clip_grad_norm_([p], 1.0).item())
    p.grad = tt.tensor([float("inf"), 1.0])
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    with pytest.raises(TypeError, match="'max_norm' must be a number"):
        nn.utils.clip_grad_norm_([p], "1")


def test_clip_grad_value():
    rng = np.random.default_rng(2)
    ps, refs = _params(rng, [((4, 3), tt.float32, True), ((5,), tt.bfloat16, False)])
    nn.utils.clip_grad_value_(ps, 0.5)
    for p, r in zip(ps, refs):
        assert_close(p.grad, np.clip(r, -0.5, 0.5), p.dtype)


def test_parameters_to_vector_and_back():
    lin = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(lin.parameters())
    expected = np.concatenate([lin.weight.detach().numpy().reshape(-1), lin.bias.detach().numpy()])
    assert_close(vec.detach(), expected, tt.float32)
    (vec * tt.arange(8.0)).sum().backward()  # differentiable, as torch's (built with cat)
    assert_close(lin.weight.grad, np.arange(6.0).reshape(2, 3), tt.float32)
    assert_close(lin.bias.grad, [6.0, 7.0], tt.float32)
    nn.utils.vector_to_parameters(tt.arange(8.0), lin.parameters())
    assert lin.weight.detach().numpy().tolist() == [[0, 1, 2], [3, 4, 5]] and lin.bias.tolist() == [6, 7]
    with pytest.raises(RuntimeError, match="must be 1-D with 8 elements"):
        nn.utils.vector_to_parameters(tt.zeros(7), lin.parameters())
    with pytest.raises(TypeError, match="expected torch.Tensor"):
        nn.utils.vector_to_parameters([0.0] * 8, lin.parameters())


def test_all_float64_grads_keep_float64_precision():
    rng = np.random.default_rng(3)
    ps, refs = _params(rng, [((5, 4), tt.float64, True), ((7,), tt.float64, False)])
    total = _norm(refs, 2.0)
    got = nn.utils.clip_grad_norm_(ps, 1.0)
    assert got.dtype is tt.float64
    assert_close(got, total, tt.float64)
    for p, r in zip(ps, refs):
        assert_close(p.grad, r * (1.0 / (total + 1e-6)), tt.float64)


def test_fp64_norm_with_an_exponent_fp32_cannot_hold():
    # p = 0.3 is not an fp32 number: as an fp32 kernel argument it would be 0.30000001192...,
    # which moves an fp64 norm by ~1e-8 relative. The exponent reaches the kernel as fp64.
    rng = np.random.default_rng(3)
    g = rng.standard_normal(2000) * 3
    total = foreach.multi_tensor_norm([tt.tensor(g)], 0.3)
    assert total.dtype is tt.float64
    assert_close(total, (np.abs(g) ** 0.3).sum() ** (1 / 0.3), tt.float64, "accumulate", k=2000)

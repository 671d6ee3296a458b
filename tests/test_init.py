"""nn.init: kaiming_normal_, xavier_normal_, trunc_normal_, orthogonal_ (and the fan/mode rules)
checked statistically against their defining distributions, over fp32/fp16/bf16/fp64."""
import math

import numpy as np
import pytest

import tritensor as tt
from tritensor.nn import init

from tolerances import assert_close


def _arr(t):
    return t.float().numpy().astype(np.float64) if t.dtype in (tt.float16, tt.bfloat16) else t.numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16])
def test_kaiming_and_xavier_normal_std(dtype):
    tt.manual_seed(0)
    w = tt.empty(256, 64, 3, dtype=dtype)  # fan_in 192, fan_out 768
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    a = _arr(w)
    std = math.sqrt(2.0) / math.sqrt(768)
    n = a.size  # 49152 draws: the sample std is within 1% of the truth (5 standard errors)
    assert abs(a.std() / std - 1) < 5 / math.sqrt(2 * n) + 0.004 and abs(a.mean()) < 5 * std / math.sqrt(n)
    init.kaiming_normal_(w, a=0.1)  # leaky_relu gain, fan_in
    assert abs(_arr(w).std() / (math.sqrt(2 / 1.01) / math.sqrt(192)) - 1) < 0.03
    init.xavier_normal_(w, gain=2.0)
    assert abs(_arr(w).std() / (2.0 * math.sqrt(2.0 / (192 + 768))) - 1) < 0.03
    with pytest.raises(ValueError, match="Mode fan_avg not supported, please use one of fan_in, fan_out"):
        init.kaiming_normal_(w, mode="fan_avg")
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed"):
        init.xavier_normal_(tt.empty(3))


def _trunc_moments(mu, s, a, b):
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    Phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))
    al, be = (a - mu) / s, (b - mu) / s
    Z = Phi(be) - Phi(al)
    mean = mu + s * (phi(al) - phi(be)) / Z
    var = s * s * (1 + (al * phi(al) - be * phi(be)) / Z - ((phi(al) - phi(be)) / Z) ** 2)
    return mean, var


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.bfloat16])
def test_trunc_normal_bounds_and_moments(dtype):
    tt.manual_seed(1)
    w = tt.empty(200, 150, dtype=dtype)
    init.trunc_normal_(w, mean=0.5, std=2.0, a=-1.0, b=1.5)
    a = _arr(w)
    assert a.min() >= -1.0 and a.max() <= 1.5
    m, v = _trunc_moments(0.5, 2.0, -1.0, 1.5)
    se = math.sqrt(v / a.size)
    assert abs(a.mean() - m) < 5 * se + (0.01 if dtype is tt.bfloat16 else 0)  # bf16 rounding shifts it a little
    assert abs(a.var() / v - 1) < 0.03
    with pytest.raises(ValueError, match="expected a < b"):
        init.trunc_normal_(w, a=1.0, b=0.0)


@pytest.mark.parametrize("shape,dtype", [((5, 8), tt.float32), ((8, 3, 2), tt.float64), ((6, 6), tt.float16)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape, dtype):
    tt.manual_seed(2)
    w = tt.empty(*shape, dtype=dtype)
    init.orthogonal_(w, gain=3.0)
    m = _arr(w).reshape(shape[0], -1)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    assert_close(gram, 9.0 * np.eye(gram.shape[0]), dtype, "orthonormal", k=9.0)  # gain² = 9
    w2 = tt.empty(*shape, dtype=dtype)
    init.orthogonal_(w2)
    assert not np.allclose(_arr(w2), _arr(w) / 3)  # random, not a fixed matrix
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(tt.empty(4))

"""Gradients that are no single op's: a composite's (dropout) against its mask, a chain of ops in
fp32/fp16/bf16 against float64 NumPy, and backward through empty tensors.

Each op's own derivative is gradchecked beside its forward checks in its family's test file
(``tests/test_<family>.py``, listed by op in ``tests/test_op_table.py``), with the inputs of
``tests/grad_inputs.py``.
"""
import numpy as np
import pytest

import tritensor as tt
from tritensor import nn

from grad_inputs import RNG
from tolerances import FLOAT_DTYPES, NP, assert_close


def test_dropout_gradient_matches_mask():
    tt.manual_seed(3)
    x = tt.ones(200, requires_grad=True)
    y = nn.functional.dropout(x, 0.25)
    y.sum().backward()
    kept = y.detach().numpy() != 0
    assert_close(x.grad.numpy()[kept], 1 / 0.75, tt.float32, "ulps")
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
    assert_close(a.grad, ga, dtype, "rounded_terms", k=4)
    assert_close(b.grad, gb, dtype, "rounded_terms", k=4 * 5)  # plus a 3-term sum


def test_empty_tensors_backward():
    x = tt.zeros(0, 3, requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.shape == (0, 3)

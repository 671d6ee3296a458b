"""Inputs for gradcheck: float64 leaves, contiguous or a transposed (non-contiguous) view.

Every family test file checks its ops' derivatives beside their forward checks (CONTRIBUTING.md:
"an op named X ... tests/test_X.py"); they share these helpers so each draws its inputs the same way.
"""
import numpy as np

import tritensor as tt

F64 = tt.float64
RNG = np.random.default_rng(1234)


def leaf(*shape, lo=-1.0, hi=1.0, positive=False):
    a = RNG.uniform(0.2 if positive else lo, hi + (1.0 if positive else 0.0), size=shape)
    return tt.tensor(a, dtype=F64, requires_grad=True)


def noncontig(*shape, positive=False):
    """A float64 leaf that is a transposed (non-contiguous) view of its storage."""
    base = RNG.uniform(0.2 if positive else -1.0, 2.0 if positive else 1.0, size=shape[::-1])
    t = tt.tensor(np.ascontiguousarray(base)).permute(*reversed(range(len(shape))))
    assert not t.is_contiguous()
    t.requires_grad_()
    return t

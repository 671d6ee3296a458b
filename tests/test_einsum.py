"""einsum (core/ops/einsum.py): no kernel and no derivative of its own. The equation is planned
into diagonals, sums, permutes, reshapes and batched matmuls, each a dispatched op, so these tests
check the plan: against float64 NumPy over fp32/fp16/bf16 (a transposed first operand), the
equation forms (explicit and implicit output, ``...`` broadcasting, repeated subscripts, chains of
three operands), promotion, integers and empty extents, the errors, and the gradients recorded
piece by piece (gradcheck, gradgradcheck, a non-contiguous leaf).
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import make
from tolerances import assert_close

DTYPES = [tt.float32, tt.float16, tt.bfloat16]


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _normal(shape):
    return RNG.standard_normal(shape) * 3


EINSUM = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("i,i->", [(7,), (7,)]),
          ("i,j->ij", [(3,), (4,)]), ("ij->ji", [(3, 5)]), ("ij->", [(3, 5)]), ("abc,cb", [(2, 3, 4), (4, 3)]),
          ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
          ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("i,ij->j", [(1,), (3, 4)]), ("ijk->kji", [(2, 3, 4)]),
          ("ab,cd->", [(2, 3), (4, 5)]), ("i...->...", [(3, 2, 2)]), ("bii->b", [(2, 3, 3)]), ("ii", [(4, 4)]),
          ("bii,ij->bj", [(2, 3, 3), (3, 4)])]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_matches_numpy(eq, shapes, dtype):
    ts, refs = zip(*(make(s, dtype, "transposed" if k == 0 else "contiguous", _normal) for k, s in enumerate(shapes)))
    out = tt.einsum(eq, *ts)
    expected = np.einsum(eq, *refs)
    assert out.dtype is dtype and out.shape == expected.shape
    # at most 60 terms meet in one output element in these cases: "accumulate" over 64
    profile, k = "accumulate", 64
    if len(shapes) > 2 and dtype is not tt.float32:
        # the pairwise product is rounded to fp16/bf16 before the next contraction: bounded by the
        # magnitudes of the terms, element by element, not by the (possibly cancelling) result
        profile, k = "product_chain", np.einsum(eq, *(np.abs(r.astype(np.float64)) for r in refs))
    assert_close(out, expected, dtype, profile, k=k)
    assert_close(tt.einsum(eq, list(ts)), expected, dtype, profile, k=k)


def test_einsum_promotes_and_handles_integers_and_empty():
    a, b = tt.arange(6).reshape(2, 3), tt.arange(3.0)
    assert tt.einsum("ij,j->i", a, b).dtype is tt.float32
    np.testing.assert_array_equal(tt.einsum("ij,kj->ik", a, a).numpy(), np.einsum("ij,kj->ik", a.numpy(), a.numpy()))
    assert tt.einsum("ij,jk->ik", tt.zeros(0, 3), tt.zeros(3, 2)).shape == (0, 2)
    assert tt.einsum("ij,jk->ik", tt.zeros(2, 0), tt.zeros(0, 2)).tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_errors_name_the_argument(no_launch):
    x = tt.zeros(2, 3)
    with pytest.raises(RuntimeError, match="number of subscripts"):
        tt.einsum("ijk,jk->i", x, x)
    with pytest.raises(ValueError, match="operands"):
        tt.einsum("ij,jk->ik", x)
    with pytest.raises(ValueError, match="output subscript z"):
        tt.einsum("ij->z", x)
    with pytest.raises(RuntimeError, match="broadcast"):
        tt.einsum("ij,ij->i", x, tt.zeros(2, 4))
    with pytest.raises(RuntimeError, match="subscript i is repeated for operand 0 but the sizes don't match"):
        tt.einsum("ii->i", tt.zeros(3, 4))


def test_einsum_gradcheck():
    x = tt.tensor(RNG.standard_normal((3, 4))).requires_grad_()
    nc = tt.tensor(RNG.standard_normal((4, 3))).T.requires_grad_()  # a non-contiguous leaf
    v = tt.tensor(RNG.standard_normal(5)).requires_grad_()
    cases = [(lambda a, b: tt.einsum("ij,kj->ik", a, b), (x, nc)),
             (lambda a, b: tt.einsum("ij,j,k->ik", a, b[:4], b), (x, v)),
             (lambda a: tt.einsum("ii->i", a[:, :3]), (x,))]
    for f, args in cases:
        assert tt.autograd.gradcheck(f, args)
    f, args = cases[0]
    assert tt.autograd.gradgradcheck(f, args)

"""ctc_loss (triton_kernels/ctc.py; core/ops/ctc.py; autograd/functions/ctc.py) against a float64
NumPy dynamic program: padded and concatenated targets, repeated labels, every reduction,
zero_infinity, infeasible alignments, empty targets and inputs, unbatched input, strided
log_probs; torch's errors; gradients by gradcheck through a log_softmax (torch's gradient for
log_probs is exact there) and CTCLoss's repr."""
import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from layouts import make
from tolerances import assert_close
from tritensor.autograd import gradcheck

rng = np.random.default_rng(11)


def _log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _lse(*xs):
    m = max(xs)
    if m == -np.inf:
        return -np.inf
    return m + np.log(sum(np.exp(x - m) for x in xs))


def _ctc_ref(lp, targets, in_lens):
    """-log p(target | lp) per sample, by the alpha recursion in float64 (lp (T, N, C))."""
    out = []
    for b, (tgt, Tb) in enumerate(zip(targets, in_lens)):
        ext = [0]
        for lab in tgt:
            ext += [int(lab), 0]
        S = len(ext)
        if Tb == 0:
            out.append(0.0 if not tgt else np.inf)
            continue
        alpha = np.full(S, -np.inf)
        alpha[0] = lp[0, b, ext[0]]
        if S > 1:
            alpha[1] = lp[0, b, ext[1]]
        for t in range(1, Tb):
            new = np.full(S, -np.inf)
            for s in range(S):
                terms = [alpha[s]]
                if s >= 1:
                    terms.append(alpha[s - 1])
                if s >= 2 and ext[s] != 0 and ext[s] != ext[s - 2]:
                    terms.append(alpha[s - 2])
                new[s] = _lse(*terms) + lp[t, b, ext[s]]
            alpha = new
        out.append(-_lse(alpha[-1], alpha[-2] if S > 1 else -np.inf))
    return np.array(out)


def _logits(T, N, C):
    return lambda shape: _log_softmax(rng.standard_normal(shape))


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("dtype", [tt.float32, tt.float64], ids=str)
def test_ctc_loss_matches_numpy(dtype, layout):
    T, N, C = 7, 3, 5
    lp, ref_lp = make((T, N, C), dtype, layout, _logits(T, N, C))
    targets = [[1, 2, 2], [3, 4], [4, 4, 4]]  # repeated labels need a blank between them
    in_lens = [7, 6, 7]
    padded = tt.tensor([[1, 2, 2], [3, 4, 0], [4, 4, 4]])
    ref = _ctc_ref(ref_lp, targets, in_lens)
    none = F.ctc_loss(lp, padded, in_lens, [3, 2, 3], reduction="none")
    assert none.shape == (3,) and none.dtype is dtype
    # a log-sum-exp chain over T steps, each in fp32 (fp64): T roundings of terms of size |nll|
    assert_close(none, ref, dtype, "log_sum")
    concat = tt.tensor([1, 2, 2, 3, 4, 4, 4, 4])
    lens = tt.tensor([3, 2, 3])
    assert_close(F.ctc_loss(lp, concat, tt.tensor(in_lens), lens, reduction="none"), ref, dtype, "log_sum")
    assert_close(F.ctc_loss(lp, padded, in_lens, [3, 2, 3], reduction="sum"), ref.sum(), dtype, "log_sum")
    # torch's mean: each loss over its target length, then the batch mean
    assert_close(F.ctc_loss(lp, padded, tuple(in_lens), (3, 2, 3)), (ref / [3, 2, 3]).mean(), dtype, "log_sum")
    # the module, with another blank index
    lp2, ref2 = make((4, 2, 3), dtype, layout, _logits(4, 2, 3))
    shifted = _ctc_ref(ref2[..., [2, 0, 1]], [[1], [2, 1]], [4, 3])  # blank 2 moved to index 0
    out = tt.nn.CTCLoss(blank=2, reduction="none")(lp2, tt.tensor([[0, 0], [1, 0]]), [4, 3], [1, 2])
    assert_close(out, shifted, dtype, "log_sum")


def test_ctc_loss_edge_cases():
    T, N, C = 5, 4, 3
    ref_lp = _log_softmax(rng.standard_normal((T, N, C)))
    lp = tt.tensor(ref_lp)
    targets = [[1, 1, 1], [], [2], [1, 2]]  # three repeats need 5 steps; empty; short; with no input
    padded = tt.tensor([[1, 1, 1], [0, 0, 0], [2, 0, 0], [1, 2, 0]])
    in_lens = [4, 5, 1, 0]
    ref = _ctc_ref(ref_lp, targets, in_lens)
    assert np.isinf(ref[0]) and np.isinf(ref[3]) and np.isfinite(ref[1:3]).all()
    out = F.ctc_loss(lp, padded, in_lens, [3, 0, 1, 2], reduction="none")
    assert_close(out, ref, tt.float64)
    zeroed = F.ctc_loss(lp, padded, in_lens, [3, 0, 1, 2], reduction="none", zero_infinity=True)
    assert_close(zeroed, np.where(np.isinf(ref), 0.0, ref), tt.float64)
    # a sample with no input and no target has probability 1; an empty target divides by 1 in the mean
    empty = F.ctc_loss(lp[:, :2], tt.tensor([[1], [0]]), [0, 3], [0, 0], reduction="mean")
    assert_close(empty, _ctc_ref(ref_lp[:, :2], [[], []], [0, 3]).mean(), tt.float64)
    # unbatched (T, C) with a 1-D target
    one = F.ctc_loss(lp[:, 2], tt.tensor([2]), tt.tensor([3]), tt.tensor([1]), reduction="none")
    assert one.shape == () and one.dtype is tt.float64
    assert_close(one, _ctc_ref(ref_lp[:, 2:3], [[2]], [3])[0], tt.float64)
    # an empty batch
    assert F.ctc_loss(lp[:, :0], tt.zeros(0, 2, dtype=tt.int64), [], [], reduction="none").shape == (0,)


def test_ctc_loss_errors():
    lp = tt.tensor(_log_softmax(rng.standard_normal((6, 2, 4))))
    tg = tt.tensor([[1, 2, 3], [1, 2, 3]])
    with pytest.raises(NotImplementedError, match="not implemented for 'Half'"):
        F.ctc_loss(lp.half(), tg, [6, 6], [3, 2])
    with pytest.raises(NotImplementedError, match="not implemented for 'BFloat16'"):
        F.ctc_loss(lp.bfloat16(), tg, [6, 6], [3, 2])
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 6, but got value 7"):
        F.ctc_loss(lp, tg, [7, 6], [3, 2])
    with pytest.raises(RuntimeError, match="Expected tensor to have size at least 4 at dimension 1"):
        F.ctc_loss(lp, tg, [6, 6], [4, 2])
    with pytest.raises(RuntimeError, match="input_lengths must be of size batch_size"):
        F.ctc_loss(lp, tg, [6], [3, 2])
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(lp, tg, [6, 6], [3, 2], blank=4)
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        F.ctc_loss(lp, tg, [6, 6], [3, 2], reduction="bad")
    with pytest.raises(RuntimeError, match="Expected target_lengths to have value at least 0, but got value -1"):
        F.ctc_loss(lp, tg, [6, 6], [3, -1])
    with pytest.raises(RuntimeError, match="input_lengths must be integral"):
        F.ctc_loss(lp, tg, tt.tensor([6.0, 6.0]), [3, 2])
    with pytest.raises(TypeError, match="'input_lengths' must be a Tensor or a tuple of ints"):
        F.ctc_loss(lp, tg, 6, [3, 2])
    with pytest.raises(TypeError, match="argument 'log_probs' must be Tensor"):
        F.ctc_loss(np.zeros((6, 2, 4)), tg, [6, 6], [3, 2])
    assert repr(tt.nn.CTCLoss()) == "CTCLoss()"


def test_ctc_loss_gradcheck():
    """Through a log_softmax of free logits (where torch's gradient for log_probs is exact), with a
    strided input, the mean reduction's recorded ops, and a sample shorter than T."""
    T, N, C = 5, 2, 3
    base = tt.tensor(rng.standard_normal((N, T, C)), dtype=tt.float64)
    logits = base.permute(1, 0, 2).detach().requires_grad_()  # (T, N, C), not contiguous
    tg = tt.tensor([[1, 2, 2], [2, 0, 0]])
    assert gradcheck(lambda x: F.ctc_loss(x.log_softmax(2), tg, [5, 4], [3, 1]), (logits,))


def test_ctc_loss_gradient_is_torchs_and_zero_infinity_zeroes_it():
    """The gradient for log_probs is torch's exp(lp) - exp(lcab + nll - lp): checked against the
    NumPy DP's finite differences through a log_softmax; steps past an input length get zero, and
    zero_infinity zeroes an infeasible sample's gradient."""
    T, N, C = 4, 2, 3
    lp0 = _log_softmax(rng.standard_normal((T, N, C)))
    x = tt.tensor(lp0).requires_grad_()
    tg = tt.tensor([[1, 1, 1], [2, 1, 0]])  # sample 0 cannot fit three repeats into 4 steps
    F.ctc_loss(x, tg, [4, 3], [3, 2], reduction="sum", zero_infinity=True).backward()
    g = x.grad.numpy()
    assert (g[:, 0] == 0).all() and (g[3, 1] == 0).all()
    # torch's formula, with the exact derivative d nll / d lp (finite differences of the DP)
    eps = 1e-6
    exact = np.zeros((3, C))
    for t in range(3):
        for c in range(C):
            up, dn = lp0.copy(), lp0.copy()
            up[t, 1, c] += eps
            dn[t, 1, c] -= eps
            exact[t, c] = (_ctc_ref(up[:, 1:], [[2, 1]], [3])[0] - _ctc_ref(dn[:, 1:], [[2, 1]], [3])[0]) / (2 * eps)
    assert_close(g[:3, 1], np.exp(lp0[:3, 1]) + exact, tt.float64, "finite_difference")

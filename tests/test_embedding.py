"""nn.Embedding / F.embedding: the gather forward against NumPy over dtypes, odd/empty index
shapes, non-contiguous weights; the scatter-add backward (duplicates accumulate, padding_idx rows
get no gradient, scale_grad_by_freq) against NumPy; max_norm renormalisation; gradchecks; errors."""
import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.nn import functional as F

from tolerances import NP, assert_close


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16, tt.float64])
@pytest.mark.parametrize("idx_shape", [(7,), (2, 3), (0,), (3, 0, 2)])
def test_embedding_forward_and_backward_vs_numpy(dtype, idx_shape):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((11, 5)).astype(NP[dtype])
    idx = rng.integers(0, 11, size=idx_shape)
    if idx.size:
        idx.reshape(-1)[0] = idx.reshape(-1)[-1]  # a duplicate: gradients must accumulate
    weight = tt.tensor(w).requires_grad_()
    out = F.embedding(tt.tensor(idx), weight)
    assert tuple(out.shape) == idx_shape + (5,) and out.dtype is dtype
    assert_close(out.detach(), w.astype(np.float64)[idx], dtype)
    g = rng.standard_normal(idx_shape + (5,)).astype(NP[dtype])
    out.backward(tt.tensor(g))
    expected = np.zeros((11, 5))
    np.add.at(expected, idx.reshape(-1), g.astype(np.float64).reshape(-1, 5))
    assert weight.grad.dtype is dtype
    assert_close(weight.grad, expected, dtype)


def test_noncontiguous_weight_and_int32_indices():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    weight = tt.tensor(base).T  # (6, 4), strides (1, 6)
    assert not weight.is_contiguous()
    idx = np.array([[5, 0], [3, 3]], dtype=np.int32)
    assert_close(F.embedding(tt.tensor(idx), weight), base.T[idx], tt.float32)


def test_padding_idx_gets_no_gradient_and_module_zeroes_it():
    e = nn.Embedding(6, 3, padding_idx=-1)
    assert e.padding_idx == 5 and e.weight[5].tolist() == [0.0, 0.0, 0.0]
    idx = tt.tensor([[5, 1, 1], [2, 5, 0]])
    e(idx).sum().backward()
    grad = e.weight.grad.numpy()
    assert grad[5].tolist() == [0.0, 0.0, 0.0]  # the padding row stays out of training
    assert grad[1].tolist() == [2.0, 2.0, 2.0] and grad[0].tolist() == [1.0, 1.0, 1.0]
    assert list(e.state_dict()) == ["weight"]
    assert repr(e) == "Embedding(6, 3, padding_idx=5)"


def test_scale_grad_by_freq_divides_by_counts():
    w = tt.ones(4, 2, requires_grad=True)
    idx = tt.tensor([1, 1, 1, 2])
    F.embedding(idx, w, scale_grad_by_freq=True).sum().backward()
    assert w.grad.tolist() == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_max_norm_renormalises_looked_up_rows_in_place(norm_type):
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((5, 4)) * 3).astype(np.float32)
    weight = tt.tensor(w.copy())
    idx = np.array([0, 3, 3])
    out = F.embedding(tt.tensor(idx), weight, max_norm=1.5, norm_type=norm_type)
    ref = w.astype(np.float64).copy()
    for i in np.unique(idx):
        n = np.linalg.norm(ref[i], ord=norm_type)
        if n > 1.5:
            ref[i] *= 1.5 / (n + 1e-7)
    assert_close(weight, ref, tt.float32)  # only the looked-up rows changed
    assert_close(out, ref[idx], tt.float32)


def test_embedding_gradcheck():
    rng = np.random.default_rng(3)
    w = tt.tensor(rng.standard_normal((6, 2))).requires_grad_()
    idx = tt.tensor([[1, 4, 1], [0, 5, 1]])
    assert tt.autograd.gradcheck(lambda w: F.embedding(idx, w, padding_idx=3), (w,))  # 3 unused: a padding row present has no true derivative
    assert tt.autograd.gradgradcheck(lambda w: F.embedding(idx, w) ** 2, (w,))


def test_from_pretrained_freezes_by_default():
    pre = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    e = nn.Embedding.from_pretrained(pre)
    assert not e.weight.requires_grad and e(tt.tensor([1])).tolist() == [[3.0, 4.0]]
    assert nn.Embedding.from_pretrained(pre, freeze=False).weight.requires_grad


def test_embedding_errors_before_any_kernel():
    """Host indices: checked on the host, the error raised by the op itself, in every mode (device
    indices: tests/test_device_index_checks.py)."""
    w = tt.zeros(4, 2, device="cpu")
    with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar types: Long, Int"):
        F.embedding(tt.tensor([1.0], device="cpu"), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(tt.tensor([4], device="cpu"), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(tt.tensor([-1], device="cpu"), w)
    with pytest.raises(RuntimeError, match="'weight' must be 2-D"):
        F.embedding(tt.tensor([0], device="cpu"), tt.zeros(4, device="cpu"))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(tt.tensor([0], device="cpu"), w, padding_idx=4)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(3, 2, padding_idx=3)
    with pytest.raises(NotImplementedError, match="sparse=True"):
        nn.Embedding(3, 2, sparse=True)
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        F.embedding([0], w)

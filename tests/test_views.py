"""Views (``view reshape transpose permute expand squeeze unsqueeze narrow select``, basic ``[]``;
core entries ``core/ops/views.py``, no kernel: a view is new strides on the same storage) against
NumPy's views, and their derivatives (``autograd/functions/views.py``) by gradcheck in float64.
"""
import numpy as np
import pytest

import tritensor as tt
from grad_inputs import leaf, noncontig
from layouts import LAYOUTS, make
from tritensor.autograd import gradcheck, gradgradcheck
from tritensor.runtime import mode

if mode.SIM:
    from tritensor.runtime import sim


# ----- forward: views share storage, as NumPy's do -------------------------------------------
def test_views_share_storage_and_copy_nothing():
    x = tt.arange(24, dtype=tt.float32)
    views = [x.view(2, 3, 4), x.view(2, 3, 4).transpose(0, 2), x.view(4, 6).T, x.view(2, 12).permute(1, 0),
             x.view(1, 24).expand(3, 24), x.view(2, 3, 4)[:, 1], x.view(4, 6).narrow(1, 2, 3), x.unsqueeze(0),
             x.view(1, 24, 1).squeeze(), x[3:20:4], x.view(2, 3, 4)[..., None, 1:3], x.reshape(6, 4)]
    for v in views:
        assert v.untyped_storage() is x.untyped_storage()
    x.view(4, 6)[1, 2] = 100.0
    assert x[8].item() == 100.0


def test_view_semantics_match_numpy():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = tt.tensor(a)
    cases = [
        (t.transpose(0, 2), a.transpose(2, 1, 0)), (t.permute(1, 2, 0), a.transpose(1, 2, 0)),
        (t.T, a.T), (t[1], a[1]), (t[-1, ::2, 1:4], a[-1, ::2, 1:4]), (t[..., 3], a[..., 3]),
        (t[None, :, None], a[None, :, None]), (t.narrow(2, 1, 3), a[:, :, 1:4]), (t.flatten(1), a.reshape(3, 20)),
        (t.unsqueeze(-1), a[..., None]), (t[:, :1].expand(3, 4, 5), np.broadcast_to(a[:, :1], (3, 4, 5))),
        (t.reshape(-1, 6), a.reshape(-1, 6)), (t.transpose(0, 1).reshape(4, 15), a.transpose(1, 0, 2).reshape(4, 15)),
        (t[2:2], a[2:2]), (t.view(3, 20)[:, 7], a.reshape(3, 20)[:, 7]), (t.select(1, -1), a[:, -1]),
        (t[:, :1].squeeze(1), a[:, 0]), (t[None, :, None].squeeze(), a), (t.squeeze(0), a),
    ]
    for v, ref in cases:
        assert v.shape == ref.shape
        np.testing.assert_array_equal(v.numpy(), ref)
        np.testing.assert_array_equal(v.contiguous().numpy(), ref)
    assert [c.shape for c in t.split(2, dim=1)] == [(3, 2, 5), (3, 2, 5)]
    assert [c.shape for c in t.chunk(2, dim=2)] == [(3, 4, 3), (3, 4, 2)]


def test_reshape_copies_only_when_it_must():
    x = tt.zeros(4, 6)
    assert x.reshape(24).untyped_storage() is x.untyped_storage()
    y = x.T.reshape(24)  # cannot be expressed with strides: a copy
    assert y.untyped_storage() is not x.untyped_storage()
    with pytest.raises(RuntimeError, match="view size .* not compatible .* Use .reshape"):
        x.T.view(24)


def test_contiguity_and_strides():
    x = tt.zeros(2, 3, 4)
    assert x.stride() == (12, 4, 1) and x.is_contiguous()
    assert x.transpose(1, 2).stride() == (12, 1, 4) and not x.transpose(1, 2).is_contiguous()
    assert x[:, :1].is_contiguous() is False or x[:, :1].shape == (2, 1, 4)
    assert tt.zeros(0, 3).T.is_contiguous()
    assert x.storage_offset() == 0 and x[1, 2].storage_offset() == 20


# ----- derivatives ---------------------------------------------------------------------------
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


# ----- Tensor.unfold: windows as a view ------------------------------------------------------------
def _arange_in(shape, dtype, layout):
    """0, 1, 2 ... of ``shape`` in ``layout`` (tests/layouts.py), and its float64 NumPy twin; int64 made
    from the float32 values, which are exact."""
    x, ref = make(shape, dtype if dtype is not tt.int64 else tt.float32, layout,
                  lambda s: np.arange(np.prod(s), dtype=np.float64).reshape(s))
    return (x.to(tt.int64) if dtype is tt.int64 else x), ref


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int64], ids=str)
def test_unfold_is_a_view_matching_numpy(dtype):
    for layout in LAYOUTS:
        x, ref = _arange_in((3, 11), dtype, layout)
        for d, size, step in ((1, 3, 2), (1, 4, 1), (0, 2, 1), (-1, 11, 5), (1, 0, 3)):
            u = x.unfold(d, size, step)
            want = np.lib.stride_tricks.sliding_window_view(ref, size, axis=d % 2)
            want = want[:, ::step] if d % 2 == 1 else want[::step]
            assert u.shape == want.shape and u.dtype is x.dtype
            assert u.data_ptr() == x.data_ptr() or x.numel() == 0 or u._storage is x._storage  # no copy
            np.testing.assert_array_equal(u.numpy().astype(np.float64), want)
    base = tt.zeros(7)
    base.unfold(0, 3, 2)[1, 0] = 5.0  # a write through the view lands in the base
    assert base.tolist() == [0, 0, 5, 0, 0, 0, 0]
    assert tt.tensor(4.0).unfold(0, 1, 1).tolist() == [4.0]
    assert tt.zeros(2, 0).unfold(1, 0, 1).shape == (2, 1, 0)


def test_unfold_errors():
    x = tt.arange(10.0)
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 10 but size is 11"):
        x.unfold(0, 11, 2)
    with pytest.raises(RuntimeError, match="step is 0 but must be > 0"):
        x.unfold(0, 3, 0)
    with pytest.raises(RuntimeError, match="size is -1 but must be >= 0"):
        x.unfold(0, -1, 1)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.unfold(1, 3, 1)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16, tt.int64])
def test_unbind_is_views_matching_numpy(dtype):
    for layout in LAYOUTS:
        x, ref = _arange_in((3, 5), dtype, layout)
        for d in (0, 1, -1):
            parts = x.unbind(d)
            want = [np.take(ref, i, axis=d % 2) for i in range(ref.shape[d % 2])]
            assert type(parts) is tuple and len(parts) == len(want)
            for p, w in zip(parts, want):
                assert p.shape == w.shape and p.dtype is x.dtype and p._storage is x._storage  # no copy
                np.testing.assert_array_equal(p.numpy().astype(np.float64), w)
    assert tt.unbind(tt.zeros(0, 3)) == () and [p.shape for p in tt.zeros(2, 0).unbind(1)] == []
    assert [p.shape for p in tt.zeros(2, 0).unbind(0)] == [(0,), (0,)]
    assert tt.arange(6.0).reshape(2, 3).unbind(axis=1)[2].tolist() == [2.0, 5.0]  # NumPy's name for dim
    with pytest.raises(IndexError, match="Dimension out of range"):
        tt.zeros(2, 3).unbind(2)


def test_unbind_gradcheck():
    """One node for every slice (torch's UnbindBackward0); its backward stacks the slices' gradients,
    zeros for a slice that got none, and supports double backward."""
    x = leaf(3, 4)
    assert gradcheck(lambda t: t.unbind(1), (x,))
    assert gradcheck(lambda t: t.unbind(0)[2] * 3 + t.unbind(0)[0], (x,))  # slice 1 gets no gradient
    assert gradgradcheck(lambda t: t.unbind(-1)[1] ** 2, (x,))
    assert gradcheck(lambda t: t.unbind(0), (noncontig(2, 3),))
    parts = (x * 1).unbind(0)
    assert {p.grad_fn for p in parts} == {parts[0].grad_fn} and parts[0].grad_fn.name() == "UnbindBackward0"
    assert [p.output_nr for p in parts] == [0, 1, 2]
    gapped = leaf(3, 8)
    assert gradcheck(lambda t: t[:, ::2].unbind(1), (gapped,))  # not dense: the gradient comes back contiguous
    packed = leaf(2, 4, 3)
    heads = packed.permute(2, 0, 1)  # dense but permuted, as heads split off a packed projection
    grad = tt.autograd.grad(heads.unbind(0), heads, [tt.ones(2, 4, dtype=tt.float64)] * 3)[0]
    assert grad.stride() == heads.stride()  # the input's layout: the permute back is contiguous again
    assert grad.permute(1, 2, 0).is_contiguous() and grad.tolist() == np.ones((3, 2, 4)).tolist()
    if mode.SIM:  # a copy per slice; a select per slice was a fill, a copy and a sum each
        y = tt.randn(3, 8, device="cuda", requires_grad=True) * 1
        q, k, v = y.unbind(0)
        grads = [tt.ones(8, device="cuda")] * 3
        with sim.counting() as c:
            tt.autograd.grad((q, k, v), y, grads)
        assert c["launch"] == 3, c


def test_unbind_slices_may_not_be_modified_in_place():
    """torch's rule for the outputs of a function returning several views; under no_grad it does not apply."""
    y = leaf(3, 2) * 1
    a, b, c = y.unbind(0)
    with pytest.raises(RuntimeError, match="Output 2 of Unbind is a view and is being modified inplace. This view is "
                                           "the output of a function that returns multiple views"):
        c.add_(1)
    before = y[0].tolist()
    with tt.no_grad():
        a, b, c = y.unbind(0)
        a.add_(1)
    assert y[0].tolist() == [v + 1 for v in before]  # the write landed in the base


def test_unfold_gradcheck():
    x = leaf(7, 2)
    assert gradcheck(lambda t: t.unfold(0, 3, 2), (x,))  # windows 2 apart: one element shared by two
    assert gradgradcheck(lambda t: t.unfold(0, 3, 1) * t.unfold(0, 3, 1), (leaf(5),))  # overlapping windows
    assert gradcheck(lambda t: t.unfold(1, 1, 1), (noncontig(3, 2),))
    assert gradcheck(lambda t: t.unfold(0, 2, 4), (x,))  # a gap: the skipped elements get zero

"""The fused AMP kernels (triton_kernels/amp.py via core/ops/amp.py) against NumPy."""
import numpy as np
import pytest

import tritensor as tt
from tritensor.core.ops import amp as amp_ops
from tritensor.triton_kernels import amp as amp_k

DTYPES = {"float32": (tt.float32, np.float32), "float16": (tt.float16, np.float16),
          "bfloat16": (tt.bfloat16, np.float32)}


def _make(arr, dtype):
    t = tt.tensor(arr.astype(np.float32))
    return t.to(dtype)


def _ref(arr, dtype, inv):
    """float32 product, rounded to the grad dtype (bf16: via the tensor cast)."""
    prod = (arr.astype(np.float32) * np.float32(inv)).astype(np.float32)
    return _make(prod, dtype).float().numpy()


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("bad", [None, "inf", "-inf", "nan"])
def test_unscale_many_tensors_against_numpy(name, bad, monkeypatch):
    dtype, _ = DTYPES[name]
    rng = np.random.default_rng(0)
    sizes = [0, 1, 7, 33, 0, 5] * 4 + [3 * amp_k.UNSCALE_BLOCK // 2]  # many small, empties, one spanning blocks
    arrs = [(rng.standard_normal(n) * 100).astype(np.float32) for n in sizes]
    if bad is not None:
        arrs[-1][-1] = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}[bad]  # in the last block of the last
        arrs[2][3] = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}[bad]  # and in a small one
    grads = [_make(a, dtype) for a in arrs]
    inputs = [g.float().numpy().copy() for g in grads]
    launches = []
    real = amp_k.launch
    monkeypatch.setattr(amp_k, "launch", lambda *a, **k: (launches.append(a[0]), real(*a, **k)))
    found, inv = tt.zeros(1), tt.full((1,), 1 / 64.0)
    amp_ops.unscale_and_check_(grads, found, inv)
    assert len(launches) == 1  # one multi-tensor launch for all of them
    assert found.numpy()[0] == (0.0 if bad is None else 1.0)
    for g, a in zip(grads, inputs):
        assert g.dtype is dtype
        np.testing.assert_array_equal(g.float().numpy(), _ref(a, dtype, 1 / 64.0))


def test_found_inf_only_set_never_cleared_and_empty_list():
    found, inv = tt.ones(1), tt.ones(1)
    g = tt.ones(4)
    amp_ops.unscale_and_check_([g], found, inv)
    assert found.numpy()[0] == 1.0  # the flag accumulates across calls, as PyTorch's
    amp_ops.unscale_and_check_([], tt.zeros(1), inv)  # nothing to do, no launch
    e = tt.empty(0)
    f = tt.zeros(1)
    amp_ops.unscale_and_check_([e, tt.empty(0, 3)], f, inv)
    assert f.numpy()[0] == 0.0


def test_non_contiguous_grad_is_unscaled_in_place():
    base = tt.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    g = base.t()
    amp_ops.unscale_and_check_([g], tt.zeros(1), tt.full((1,), 0.5))
    np.testing.assert_array_equal(base.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5)


def test_unscale_errors_before_any_kernel(monkeypatch):
    monkeypatch.setattr(amp_k, "launch", lambda *a, **k: pytest.fail("a kernel ran"))
    f, inv = tt.zeros(1), tt.ones(1)
    with pytest.raises(ValueError, match="one dtype"):
        amp_ops.unscale_and_check_([tt.ones(2), tt.ones(2).half()], f, inv)
    with pytest.raises(TypeError, match="dtype"):
        amp_ops.unscale_and_check_([tt.ones(2, dtype=tt.int32)], f, inv)
    with pytest.raises(ValueError, match="found_inf"):
        amp_ops.unscale_and_check_([tt.ones(2)], tt.zeros(2), inv)
    with pytest.raises(TypeError, match="grads\\[0\\]"):
        amp_ops.unscale_and_check_([3.0], f, inv)


def _np_update(scale, tracker, found, gf, bf, gi):
    if found:
        return scale * bf, 0
    if tracker + 1 == gi:
        new = scale * gf
        return (new if np.isfinite(new) else scale), 0
    return scale, tracker + 1


@pytest.mark.parametrize("found_seq", [[0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0]])
def test_update_scale_against_numpy(found_seq):
    s, tr = tt.full((1,), 1024.0), tt.zeros(1, dtype=tt.int32)
    rs, rt = np.float32(1024.0), 0
    for f in found_seq:
        amp_ops.update_scale_(s, tr, tt.full((1,), float(f)), 2.0, 0.5, 3)
        rs, rt = _np_update(rs, rt, f, np.float32(2.0), np.float32(0.5), 3)
        assert (s.numpy()[0], tr.numpy()[0]) == (np.float32(rs), rt)


def test_update_scale_growth_kept_only_if_finite():
    s, tr = tt.full((1,), 3e38), tt.zeros(1, dtype=tt.int32)
    amp_ops.update_scale_(s, tr, tt.zeros(1), 2.0, 0.5, 1)
    assert s.numpy()[0] == np.float32(3e38) and tr.numpy()[0] == 0

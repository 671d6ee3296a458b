"""Adam/AdamW's multi-tensor ("foreach") update (triton_kernels/optim.py: adam_multi_step): one
launch for the parameters that share a device, a dtype and a step count, the same bits as the
per-tensor loop (``foreach=False``) over dtypes, odd, empty and multi-block sizes, a channels_last
parameter, amsgrad, maximize, both weight decays, parameters whose step counts differ and the
fused (on-device count) path. The per-tensor kernel is checked against float64 NumPy in
test_optim.py; both kernels share their update function, so equality here carries that over."""
import numpy as np
import pytest

import tritensor as tt
from tritensor import optim
from tritensor.runtime import launch as launch_mod
from tritensor.runtime import mode
from tritensor.triton_kernels import optim as optim_k

from tolerances import NP

# The largest crosses the multi-tensor block, so a parameter spans several table rows.
SIZES = [(1,), (37,), (0,), (3, 5), (optim_k.MULTI_BLOCK + 5,)]


def _params(seed):
    rng = np.random.default_rng(seed)
    ps = []
    for dtype in (tt.float32, tt.float64, tt.bfloat16):
        for shape in SIZES:
            ps.append(tt.nn.Parameter(tt.tensor(rng.standard_normal(shape).astype(NP[dtype]), dtype=dtype)))
    conv = tt.tensor(rng.standard_normal((2, 3, 2, 2)).astype(np.float32)).contiguous(memory_format=tt.channels_last)
    ps.append(tt.nn.Parameter(conv))
    return ps


def _grads(ps, seed):
    rng = np.random.default_rng(seed)
    return [tt.tensor(rng.standard_normal(tuple(p.shape)).astype(NP[p.dtype]), dtype=p.dtype)
            .contiguous(memory_format=tt.channels_last if p.ndim == 4 else tt.contiguous_format) for p in ps]


def _bits(t):
    return t.detach().float().cpu().numpy().tobytes()


def _run(cls, foreach, steps=3, **kw):
    ps = _params(0)
    opt = cls(ps, lr=0.01, foreach=foreach, **kw)
    for s in range(steps):
        gs = _grads(ps, 10 + s)
        for i, (p, g) in enumerate(zip(ps, gs)):
            # parameter 1 gets no gradient at the first step: its step count lags the others
            p.grad = None if (s == 0 and i == 1) else g
        opt.step()
    return ps, opt


@pytest.mark.parametrize("cls,kw", [
    (optim.Adam, {}),
    (optim.Adam, {"weight_decay": 0.1, "amsgrad": True}),
    (optim.AdamW, {"maximize": True}),
    (optim.AdamW, {"amsgrad": True, "weight_decay": 0.05}),
    (optim.Adam, {"fused": True}),
    (optim.AdamW, {"capturable": True, "amsgrad": True}),
], ids=["adam", "adam-wd-amsgrad", "adamw-maximize", "adamw-amsgrad", "adam-fused", "adamw-capturable"])
def test_foreach_gives_the_per_tensor_loops_bits(cls, kw):
    if (kw.get("fused") or kw.get("capturable")) and tt.get_default_device().type != "cuda":
        pytest.skip("the on-device step count needs device tensors")
    a, opt_a = _run(cls, None, **kw)
    b, opt_b = _run(cls, False, **kw)
    for i, (x, y) in enumerate(zip(a, b)):
        assert _bits(x) == _bits(y), i
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            if key in opt_a.state[x]:
                sa, sb = opt_a.state[x][key], opt_b.state[y][key]
                assert _bits(sa) == _bits(sb), (i, key)
    assert _bits(a[1]) != _bits(_params(0)[1])  # the lagging parameter was updated too


def test_one_launch_per_dtype_and_step_count(monkeypatch):
    ps = _params(0)
    opt = optim.AdamW(ps, lr=0.01)
    for p, g in zip(ps, _grads(ps, 1)):
        p.grad = g
    launched = []
    real = launch_mod.launch
    monkeypatch.setattr(optim_k, "launch", lambda k, *a, **kw: launched.append(k.fn.__name__) or real(k, *a, **kw))
    opt.step()
    # fp32, fp64 and bf16 multi-tensor launches (the empty parameters take none), and the
    # channels_last parameter's own update
    assert sorted(launched) == ["_adam_kernel"] + ["_adam_multi_kernel"] * 3
    launched.clear()
    ps[0].grad = None  # parameter 0 now lags one step behind the other fp32 ones: its own launch
    opt.step()
    for p, g in zip(ps, _grads(ps, 2)):
        p.grad = g
    launched.clear()
    opt.step()
    assert sorted(launched) == ["_adam_kernel"] + ["_adam_multi_kernel"] * 4


def test_multi_step_checks_its_lists_before_any_launch():
    from tritensor.core.ops import optim as core

    p, q = tt.zeros(3), tt.zeros(3)
    with pytest.raises(ValueError, match="'grads' has 1 entries for 2 parameters"):
        core.adam_multi_step_([p, q], [p], [p, q], [p, q], step=1, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8,
                              weight_decay=0.0, decoupled=False, maximize=False)
    with pytest.raises(ValueError, match="'exp_avg' must match the parameter"):
        core.adam_multi_step_([p], [p], [tt.zeros(4)], [p], step=1, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8,
                              weight_decay=0.0, decoupled=False, maximize=False)
    with pytest.raises(ValueError, match="'step' must be an int counting from 1"):
        core.adam_multi_step_([p], [p], [p], [p], step=0, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8,
                              weight_decay=0.0, decoupled=False, maximize=False)
    with pytest.raises(ValueError, match="'lr' must be finite"):
        core.adam_multi_step_([p], [p], [p], [p], step=1, lr=float("nan"), beta1=0.9, beta2=0.99, eps=1e-8,
                              weight_decay=0.0, decoupled=False, maximize=False)


def test_block_table_rows():
    """The multi-tensor kernels' block table (runtime/launch.py: AddressTable), built by NumPy: a
    row (address, block start, element count) per block of each buffer, none for an empty one."""
    from tritensor.runtime.launch import AddressTable

    bufs = [tt.zeros(n) for n in (5, 0, 2048, 2049, 1)]
    table = AddressTable(bufs, 1024)
    addresses = [1000, 2000, 3000, 4000, 5000]
    want = [(a, s, n) for a, n in zip(addresses, (5, 0, 2048, 2049, 1)) for s in range(0, n, 1024)]
    assert len(table) == len(want) == 7
    assert table.entries(addresses).tolist() == [v for row in want for v in row]
    assert table.key(addresses) == (1024, tuple(addresses), (5, 0, 2048, 2049, 1))
    assert AddressTable(bufs).entries(addresses).tolist() == addresses  # no block: one address each


@pytest.mark.skipif(not mode.SIM, reason="counts driver calls on the simulated device")
def test_a_step_whose_gradients_moved_never_waits_for_the_gpu():
    """Gradients freed by zero_grad() come back at other addresses, so the multi-tensor update gets
    a new address table at most steps; its upload is ordered on the stream, not waited for (a wait
    would drain the GPU's queue at every step)."""
    from tritensor.runtime import sim  # only the simulated device counts driver calls
    ps = [tt.nn.Parameter(tt.zeros(n, device="cuda")) for n in (3, 70, 5)]
    opt = optim.Adam(ps, lr=0.1)
    moved = 0
    keys = set()
    for step in range(6):
        opt.zero_grad()
        keep = [tt.ones(step + 1, device="cuda")]  # shifts where the new gradients land
        for p in ps:
            p.grad = tt.ones_like(p)
        key = tuple(p.grad.data_ptr() for p in ps)
        moved += key not in keys
        keys.add(key)
        with sim.counting() as counts:
            opt.step()
        assert counts.get("sync", 0) == 0, counts
        if step:  # the first step also makes the states
            assert counts["launch"] == 1, counts
        del keep
    assert moved >= 2  # new tables were uploaded, and none was waited for

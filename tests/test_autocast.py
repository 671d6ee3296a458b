"""Autocast (tritensor.amp.autocast_mode): per-op output dtypes on "cpu" and "cuda" region semantics,
nesting, disabled regions, threads, the cast cache, backward dtypes, custom_fwd/custom_bwd, errors.

"cuda" regions in CPU mode: the ``cuda_semantics`` fixture makes the two injection points of
``amp/autocast_mode.py`` say that CUDA is available and that every tensor counts as a "cuda"
tensor, so the layer's real casting logic runs the CUDA lists on host tensors."""
import threading

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from tritensor.amp import autocast_mode as am
from tritensor.core.ops.table import OPS
from tolerances import assert_close

f32, f16, bf16 = tt.float32, tt.float16, tt.bfloat16

# The expectations, written here independently of amp/lists.py: PyTorch's lists restricted to tritensor.
CUDA = {
    "lower": ["matmul", "mm", "bmm", "linear", "conv2d", "conv_transpose2d", "scaled_dot_product_attention"],
    "fp32": ["exp", "expm1", "log", "log2", "log1p", "reciprocal", "rsqrt", "pow", "sum", "prod", "cumsum",
             "softmax", "log_softmax", "layer_norm", "cross_entropy", "nll_loss", "mse_loss", "ctc_loss"],
}
CPU = {
    "lower": ["matmul", "mm", "bmm", "linear", "conv2d", "conv_transpose2d", "scaled_dot_product_attention"],
    "fp32": ["prod", "mse_loss", "nll_loss", "cross_entropy", "ctc_loss"],
}


def _t(shape, dtype, seed=0, positive=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tt.tensor(np.abs(a) + 0.5 if positive else a).to(dtype)


TGT = lambda: tt.tensor(np.array([0, 2], dtype=np.int64))  # noqa: E731
CALLS = {  # op name -> fn(dtype): the op on floating inputs of that dtype
    "matmul": lambda d: _t((2, 3), d) @ _t((3, 2), d, 1),
    "mm": lambda d: tt.mm(_t((2, 3), d), _t((3, 2), d, 1)),
    "bmm": lambda d: tt.bmm(_t((2, 2, 3), d), _t((2, 3, 2), d, 1)),
    "linear": lambda d: F.linear(_t((2, 3), d), _t((4, 3), d, 1), _t((4,), d, 2)),
    "conv2d": lambda d: F.conv2d(_t((1, 1, 4, 4), d), _t((2, 1, 3, 3), d, 1)),
    "conv_transpose2d": lambda d: F.conv_transpose2d(_t((1, 1, 4, 4), d), _t((1, 2, 3, 3), d, 1)),
    "scaled_dot_product_attention": lambda d: F.scaled_dot_product_attention(
        _t((1, 2, 3, 16), d), _t((1, 2, 5, 16), d, 1), _t((1, 2, 5, 16), d, 2), attn_mask=_t((3, 5), d, 3)),
    "pow": lambda d: tt.pow(_t((3,), d, positive=True), 2.0),
    "sum": lambda d: _t((3,), d).sum(),
    "prod": lambda d: _t((3,), d).prod(),
    "cumsum": lambda d: _t((3,), d).cumsum(0),
    "softmax": lambda d: F.softmax(_t((2, 3), d), -1),
    "log_softmax": lambda d: F.log_softmax(_t((2, 3), d), -1),
    "layer_norm": lambda d: F.layer_norm(_t((2, 3), d), (3,)),
    "cross_entropy": lambda d: F.cross_entropy(_t((2, 3), d), TGT()),
    "nll_loss": lambda d: F.nll_loss(_t((2, 3), d), TGT()),
    "mse_loss": lambda d: F.mse_loss(_t((2, 3), d), _t((2, 3), d, 1)),
    "ctc_loss": lambda d: F.ctc_loss(_t((4, 2, 3), d), tt.tensor([[1], [2]]), [4, 4], [1, 1]),
    "sin": lambda d: _t((3,), d).sin(),  # listed nowhere: runs in its input dtype
    "mean": lambda d: _t((3,), d).mean(),
}
for _u in ("exp", "expm1", "log", "log2", "log1p", "reciprocal", "rsqrt"):
    CALLS[_u] = (lambda u: lambda d: getattr(_t((3,), d, positive=True), u)())(_u)


@pytest.fixture
def cuda_semantics(monkeypatch):
    monkeypatch.setattr(am, "_cuda_available", lambda: True)
    monkeypatch.setattr(am, "_device_type_of", lambda t: "cuda")


@pytest.fixture
def cpu_tensors():
    """A "cpu" region casts only CPU tensors (a region of one device type leaves the other's alone:
    test_other_device_type_and_non_floating_untouched), so the tests of the cpu lists make their
    tensors on the cpu, also in the device-tensor variant (TRITENSOR_TEST_DEVICE=cuda)."""
    before = tt.get_default_device()
    tt.set_default_device("cpu")
    yield
    tt.set_default_device(before)


def _expected(lists, name, in_dtype, lowp):
    if name in lists["lower"]:
        return lowp
    if name in lists["fp32"]:
        return f32
    return in_dtype


@pytest.mark.parametrize("name", sorted(CALLS))
def test_op_output_dtype_in_cpu_region(name, cpu_tensors):
    for in_dtype in (f32, bf16):
        with tt.autocast("cpu"):
            out = CALLS[name](in_dtype)
        assert out.dtype is _expected(CPU, name, in_dtype, bf16), (name, in_dtype)
    assert CALLS[name](f32).dtype is f32  # outside a region: untouched


@pytest.mark.parametrize("name", sorted(CALLS))
def test_op_output_dtype_in_cuda_region(name, cuda_semantics):
    for in_dtype in (f32, f16):
        with tt.autocast("cuda"):
            out = CALLS[name](in_dtype)
        assert out.dtype is _expected(CUDA, name, in_dtype, f16), (name, in_dtype)


def test_every_listed_op_is_called_and_the_layer_agrees_with_the_lists():
    from tritensor.amp import lists
    for cat in ("lower", "fp32"):
        assert set(CUDA[cat]) <= set(CALLS) and set(CPU[cat]) <= set(CALLS)
    for name, op in OPS.items():
        cpu = next((c for c in ("lower", "fp32") if name in CPU[c]), None)
        if cpu is not None:
            assert lists.category(op, "cpu") == cpu, name
        elif name not in ("where", "scatter_add", "index_add"):
            assert lists.category(op, "cpu") == "none", name
        if name in CUDA["lower"] + CUDA["fp32"]:
            assert lists.category(op, "cuda") == next(c for c in CUDA if name in CUDA[c])


def test_promote_ops_run_in_the_widest_input_dtype(cuda_semantics):
    a16, a32 = _t((3,), f16), _t((3,), f32, 1)
    idx = tt.tensor(np.array([0, 2, 1], dtype=np.int64))
    with tt.autocast("cuda"):
        assert tt.where(a16 > 0, a16, a32).dtype is f32
        assert tt.where(a16 > 0, a16, a16).dtype is f16
        assert tt.scatter_add(a16, 0, idx, a32).dtype is f32
        assert tt.index_add(a16, 0, idx, a32).dtype is f32
        assert (a16 + a32).dtype is f32 and (a16 * a16).dtype is f16


def test_explicit_dtype_is_not_eligible_and_inplace_never_casts(cuda_semantics):
    with tt.autocast("cuda"):
        assert _t((3,), f16).cumsum(0, dtype=f16).dtype is f16
        x = _t((3,), f16, positive=True)
        x.exp_()
        assert x.dtype is f16
    with tt.autocast("cpu"):
        pass


def test_other_device_type_and_non_floating_untouched(monkeypatch, cpu_tensors):
    monkeypatch.setattr(am, "_device_type_of", lambda t: "cuda")  # tensors count as cuda; the region is cpu
    with tt.autocast("cpu"):
        assert CALLS["mm"](f32).dtype is f32
    monkeypatch.undo()
    with tt.autocast("cpu"):
        i = tt.tensor(np.ones((2, 2), dtype=np.int64))
        assert i.prod().dtype is tt.int64  # an fp32-list op on an integer tensor: not cast
        assert tt.mm(_t((2, 2), tt.float64), _t((2, 2), tt.float64)).dtype is tt.float64  # fp64 never cast


def test_nesting_disabled_regions_dtype_and_decorator(cpu_tensors):
    assert not tt.is_autocast_enabled("cpu") and tt.get_autocast_dtype("cpu") is bf16
    assert tt.get_autocast_dtype("cuda") is f16
    with tt.autocast("cpu"):
        assert tt.is_autocast_enabled(device_type="cpu") and not tt.is_autocast_enabled("cuda")
        with tt.autocast("cpu", enabled=False):
            assert not tt.is_autocast_enabled("cpu")
            assert CALLS["mm"](f32).dtype is f32
            with tt.autocast("cpu", dtype=f16):
                assert CALLS["mm"](f32).dtype is f16 and tt.get_autocast_dtype("cpu") is f16
            assert CALLS["mm"](f32).dtype is f32
        assert CALLS["mm"](f32).dtype is bf16 and tt.get_autocast_dtype("cpu") is bf16
    assert not tt.is_autocast_enabled("cpu")

    @tt.amp.autocast("cpu")
    def f(a, b):
        assert tt.is_autocast_enabled("cpu")
        return a @ b

    assert f(_t((2, 3), f32), _t((3, 2), f32)).dtype is bf16
    assert not tt.is_autocast_enabled("cpu")
    assert tt.autocast is tt.amp.autocast


def test_state_exits_on_exception_and_cuda_without_gpu_disables(cpu_tensors):
    with pytest.raises(KeyError):
        with tt.autocast("cpu"):
            raise KeyError
    assert not tt.is_autocast_enabled("cpu") and am._state.depth == 0
    if not tt.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            with tt.autocast("cuda"):
                assert not tt.is_autocast_enabled("cuda")


def test_threads_do_not_share_state(cpu_tensors):
    seen, go, done = {}, threading.Event(), threading.Event()

    def other():
        seen["enabled"] = tt.is_autocast_enabled("cpu")
        seen["mm"] = CALLS["mm"](f32).dtype
        with tt.autocast("cpu", dtype=f16):
            go.set()
            done.wait(10)

    with tt.autocast("cpu"):
        th = threading.Thread(target=other)
        th.start()
        go.wait(10)
        assert tt.get_autocast_dtype("cpu") is bf16 and CALLS["mm"](f32).dtype is bf16  # other's region not seen
        done.set()
        th.join()
    assert seen == {"enabled": False, "mm": f32}


def _count_casts(monkeypatch):
    casts, real = [], am._cast

    def spy(x, to, next):
        return real(x, to, lambda op, a, k: (casts.append((id(x), to)), next(op, a, k))[1])

    monkeypatch.setattr(am, "_cast", spy)
    return casts


def test_cast_cache_one_cast_per_weight_per_region(monkeypatch, cpu_tensors):
    casts = _count_casts(monkeypatch)
    w = tt.nn.Parameter(_t((4, 3), f32))
    x = _t((2, 3), f32, 1)
    with tt.autocast("cpu"):
        y1, y2 = F.linear(x, w), F.linear(x, w)
        with tt.autocast("cpu"):  # nested region shares the outer region's cache
            y3 = F.linear(x, w)
        assert len(am._state.cache) == 1
    assert am._state.cache == {}  # dropped on leaving the outermost region
    assert [c for c in casts if c[0] == id(w)] == [(id(w), bf16)]  # one cast of the weight
    assert len([c for c in casts if c[0] == id(x)]) == 3  # x is not a leaf requiring grad: cast each time
    assert y1.dtype is y2.dtype is y3.dtype is bf16
    casts.clear()
    with tt.autocast("cpu", cache_enabled=False):
        F.linear(x, w), F.linear(x, w)
    assert len([c for c in casts if c[0] == id(w)]) == 2
    with tt.autocast("cpu"):
        F.linear(x, w)
    assert len([c for c in casts if c[0] == id(w)]) == 3  # a new region casts again


def test_backward_runs_in_forward_dtype_and_grads_reach_leaves_in_their_dtype(cpu_tensors):
    w = tt.nn.Parameter(_t((4, 3), f32))
    x = _t((2, 3), f32, 1).requires_grad_()
    seen = []
    with tt.autocast("cpu"):
        y = F.linear(x, w)
        y.register_hook(lambda g: seen.append(g.dtype))
        loss = F.mse_loss(y, _t((2, 4), f32, 2))
    assert y.dtype is bf16 and loss.dtype is f32
    loss.backward()
    assert seen == [bf16]  # linear's derivative ran on bf16 gradients
    assert w.grad.dtype is f32 and x.grad.dtype is f32
    ref = 2 * (y.detach().float().numpy() - _t((2, 4), f32, 2).numpy()) / 8
    assert_close(w.grad, ref.T @ x.detach().numpy(), bf16, "autocast_bf16")  # fp32 grad through bf16 ops


def test_custom_fwd_and_bwd(cpu_tensors):
    seen = {}

    class Sq(tt.autograd.Function):
        @staticmethod
        @tt.amp.custom_fwd(device_type="cpu", cast_inputs=f32)
        def forward(ctx, a):
            seen["fwd"] = (a.dtype, tt.is_autocast_enabled("cpu"))
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        @tt.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd"] = tt.is_autocast_enabled("cpu")
            (a,) = ctx.saved_tensors
            return 2 * a * g

    class Plain(tt.autograd.Function):
        @staticmethod
        @tt.amp.custom_fwd(device_type="cpu")
        def forward(ctx, a):
            seen["plain"] = tt.is_autocast_enabled("cpu")
            return a @ a

        @staticmethod
        @tt.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["plain_bwd"] = (tt.is_autocast_enabled("cpu"), tt.get_autocast_dtype("cpu"))
            return g

    a = _t((2, 2), bf16).requires_grad_()
    with tt.autocast("cpu"):
        out = Sq.apply(a)
        p = Plain.apply(_t((2, 2), f32).requires_grad_())
    assert seen["fwd"] == (f32, False) and out.dtype is f32 and seen["plain"] and p.dtype is bf16
    out.sum().backward()
    p.float().sum().backward()
    assert seen["bwd"] is False and seen["plain_bwd"] == (True, bf16)
    assert a.grad.dtype is bf16


def test_unknown_device_type_raises_clearly():
    for call in (lambda: tt.autocast("xpu"), lambda: tt.is_autocast_enabled("tpu"),
                 lambda: tt.get_autocast_dtype("gpu"), lambda: tt.amp.custom_fwd(device_type="npu")):
        with pytest.raises(RuntimeError, match="unsupported device_type"):
            call()
    with pytest.raises(TypeError, match="dtype"):
        tt.autocast("cpu", dtype="float16")

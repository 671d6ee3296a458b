"""Each fix-up tritensor makes to Triton's interpreter (runtime/interpreter_gpu.py, interpreter_speed.py):
still needed, still right.

The fix-ups patch private interpreter internals, so they are pinned to the Triton versions they
were checked on. On a new Triton, test_installed_triton_is_checked fails first; the others say
which fix-up still holds (each compares with the stock interpreter, restored for the test).
"""
from __future__ import annotations

import contextlib
import inspect

import ml_dtypes
import numpy as np
import pytest
import triton
import triton.language as tl

import tritensor as tt
from tritensor.runtime import interpreter, interpreter_gpu, interpreter_speed, mode
from tritensor.runtime.launch import launch

pytestmark = pytest.mark.skipif(mode.GPU, reason="the interpreter runs in CPU mode only")


@contextlib.contextmanager
def stock_interpreter():
    """Triton's interpreter as shipped, for the duration of the block."""
    interpreter.remove_fixups()
    try:
        yield
    finally:
        assert interpreter.apply_fixups()


@triton.jit
def _load_store_kernel(src, dst, n, STEP: tl.constexpr, HOLES: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    if HOLES:
        mask = mask & (i % 3 != 1)
    v = tl.load(src + i * STEP, mask=mask, other=-7)
    tl.store(dst + i, v, mask=mask)


@triton.jit
def _to_bf16_kernel(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n).to(tl.bfloat16), mask=i < n)


def _load_store(src, n, step, holes, block, dst=None):
    dst = tt.full((n,), 5, dtype=src.dtype) if dst is None else dst
    launch(_load_store_kernel, (triton.cdiv(n, block),), src, dst, n, STEP=step, HOLES=holes, BLOCK=block)
    return dst.numpy().copy()


def test_installed_triton_is_checked():
    assert triton.__version__ in interpreter.CHECKED_VERSIONS
    assert all(interpreter.installed.values()), interpreter.installed


def test_unchecked_triton_warns_and_changes_nothing(monkeypatch):
    assert not interpreter.checked("0.0.0")
    before = (interpreter.installed.copy(), triton.runtime.interpreter._patch_lang)
    monkeypatch.setattr(triton, "__version__", "0.0.0")
    with pytest.warns(RuntimeWarning, match="checked on Triton .* not 0.0.0"):
        assert interpreter.apply_fixups() is False
    assert (interpreter.installed, triton.runtime.interpreter._patch_lang) == before


def test_bf16_casts_round_to_nearest_even():
    # ties (even and odd), a value just above a tie, subnormals, overflow, inf, nan, -0.0
    vals = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 1e-40, -3e-39, 3.4e38, np.inf, np.nan, -0.0],
                    dtype=np.float32)
    want = vals.astype(ml_dtypes.bfloat16).view(np.uint16)
    src, n = tt.from_numpy(vals), len(vals)

    def run():
        dst = tt.empty(n, dtype=tt.bfloat16)
        launch(_to_bf16_kernel, (1,), src, dst, n, BLOCK=16)
        return dst.numpy().view(np.uint16).copy()

    np.testing.assert_array_equal(run(), want)
    with stock_interpreter():  # the stock interpreter truncates: the fix-up is still needed
        assert not np.array_equal(run(), want)


def test_patch_once_applies_the_stock_patch_once(monkeypatch):
    src = tt.arange(100, dtype=tt.float32)
    with stock_interpreter():
        want = _load_store(src, 100, 1, False, 64)
    calls = []
    real = inspect.getmembers
    monkeypatch.setattr(inspect, "getmembers", lambda *a, **k: calls.append(a) or real(*a, **k))
    got = _load_store(src, 100, 1, False, 64)
    assert calls == []  # no re-patching at the launch or at helper calls
    np.testing.assert_array_equal(got, want)
    # triton.language stays patched between launches (Triton's own patch, applied once)
    assert not tl.core.is_builtin(tl.load) and not tl.core.is_builtin(tl.core.load)


def test_host_copies_are_skipped_for_host_args_only(monkeypatch):
    copies, real_set = [], interpreter.HostArg.set_
    monkeypatch.setattr(interpreter.HostArg, "set_", lambda self, *a: copies.append(a) or real_set(self, *a))
    src = tt.arange(50, dtype=tt.float32)
    np.testing.assert_array_equal(_load_store(src, 50, 1, False, 64), np.arange(50, dtype=np.float32))
    assert copies == []

    class Foreign(interpreter.HostArg):  # not ours: Triton copies it to the host and back as usual
        __slots__ = ()

    dst = tt.zeros(50)
    a = Foreign(src.untyped_storage(), src.dtype, 0, (50,), (1,))
    b = Foreign(dst.untyped_storage(), dst.dtype, 0, (50,), (1,))
    _load_store_kernel[(1,)](a, b, 50, STEP=1, HOLES=False, BLOCK=64)
    assert len(copies) == 2
    np.testing.assert_array_equal(dst.numpy(), np.arange(50, dtype=np.float32))


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int64, tt.bool])
@pytest.mark.parametrize("n,step,holes,block", [
    (300, 1, False, 128),   # full blocks and a prefix-masked tail: the slice path
    (300, 1, True, 128),    # holes in the mask: lane by lane
    (150, 2, False, 64),    # strided pointers: lane by lane
    (40, 1, False, 32),     # a block below the slice path's minimum
])
def test_contiguous_loads_match_stock(monkeypatch, dtype, n, step, holes, block):
    rng = np.random.default_rng(n + step)
    src = tt.tensor(rng.standard_normal(n * step) * 4, dtype=tt.float64).to(dtype)
    dst = tt.full((n,), 5, dtype=dtype)  # made here: the stock interpreter's fill is wrong for bf16
    with stock_interpreter():
        want = _load_store(src, n, step, holes, block, dst)
    lanes = []
    real = triton.runtime.interpreter._interpreter

    class Counting:
        def load(self, ptrs, *a):
            lanes.append(ptrs.size)
            return real.load(ptrs, *a)

        def store(self, ptrs, *a):
            lanes.append(ptrs.size)
            return real.store(ptrs, *a)

    monkeypatch.setattr(triton.runtime.interpreter, "_interpreter", Counting())
    got = _load_store(src, n, step, holes, block)
    assert got.tobytes() == want.tobytes()
    slice_path = step == 1 and not holes and block >= interpreter_speed._SPAN_MIN
    assert (lanes == []) == slice_path


@triton.jit
def _int32_math_kernel(src, dst, n, scale, BLOCK: tl.constexpr, OFFSET: tl.constexpr = 7):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src + i, mask=i < n)
    tl.store(dst + i, v * scale + OFFSET - i, mask=i < n)  # wraps past int32, as on the GPU


def _int32_math(src, n, scale, block=64, **kwargs):
    dst = tt.zeros(n, dtype=tt.int32)
    launch(_int32_math_kernel, (triton.cdiv(n, block),), src, dst, n, scale, BLOCK=block, **kwargs)
    return dst.numpy().copy()


def test_overflow_checks_that_are_dropped_are_not_computed(monkeypatch):
    src = tt.tensor([2**30, -2**30, 5, 2**31 - 1] * 25, dtype=tt.int32)
    semantic = triton.runtime.interpreter.interpreter_semantic
    asserts = []
    real_assert = type(semantic).device_assert
    monkeypatch.setattr(type(semantic), "device_assert", lambda self, *a: asserts.append(a) or real_assert(self, *a))
    with stock_interpreter():
        assert not triton.runtime.interpreter.interpreter_builder.options.debug
        want = _int32_math(src, 100, 3)
    assert asserts  # the stock interpreter builds the int32 overflow checks ...
    assert all(real_assert(semantic, *a) is None for a in asserts)  # ... and drops them without debug
    asserts.clear()
    got = _int32_math(src, 100, 3)
    assert asserts == []  # no longer built
    assert got.tobytes() == want.tobytes()
    ref = (src.numpy().astype(np.int64) * 3 + 7 - np.arange(100)).astype(np.int32)  # two's-complement wrap
    np.testing.assert_array_equal(got, ref)


def test_np_dtype_table_answers_as_the_stock_lookup():
    interp = triton.runtime.interpreter
    scalars = [tl.int1, tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32, tl.uint32, tl.int64, tl.uint64,
               tl.float16, tl.bfloat16, tl.float32, tl.float64, tl.float8e5, tl.float8e4nv]
    types = scalars + [tl.pointer_type(s) for s in scalars] + [tl.block_type(s, [4, 2]) for s in scalars]
    types += [tl.block_type(tl.pointer_type(tl.float16), [8])]
    with stock_interpreter():
        stock = interp._get_np_dtype
        want = [stock(ty) for ty in types]
    assert interpreter.installed["cached_np_dtypes"] and interp._get_np_dtype is not stock
    for _ in range(2):  # the second round answers from the table
        assert [interp._get_np_dtype(ty) for ty in types] == want


def test_arguments_bound_once_as_the_stock_binder(monkeypatch):
    src = tt.tensor(list(range(-50, 50)), dtype=tt.int32)
    with stock_interpreter():
        want = [_int32_math(src, 100, 3), _int32_math(src, 90, -2, block=32, OFFSET=-5)]
    _int32_math(src, 100, 3)
    specs = []
    real = inspect.getfullargspec
    monkeypatch.setattr(inspect, "getfullargspec", lambda *a: specs.append(a) or real(*a))
    got = [_int32_math(src, 100, 3), _int32_math(src, 90, -2, block=32, OFFSET=-5)]
    assert specs == []  # the signature was read at the first launch, not at each
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()
    dst = tt.zeros(4, dtype=tt.int32)
    with pytest.raises(TypeError, match="missing required argument: 'scale'"):
        launch(_int32_math_kernel, (1,), src, dst, 4, BLOCK=4)
    with pytest.raises(TypeError, match="multiple values for argument 'n'"):
        launch(_int32_math_kernel, (1,), src, dst, 4, 1, n=4, BLOCK=4)
    with pytest.raises(TypeError, match="takes 6 arguments but 7 were given"):
        launch(_int32_math_kernel, (1,), src, dst, 4, 1, 4, 7, 0)


@triton.jit
def _gather_kernel(src, dst, idx, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    j = tl.load(idx + i, mask=i < n, other=0)  # negative offsets from the middle, repeats, any order
    tl.store(dst + i, tl.load(src + 50 + j, mask=i < n), mask=i < n)


@pytest.mark.parametrize("dtype", [tt.float16, tt.float64, tt.bool, tt.int32])
def test_pointer_arithmetic_in_place_matches_stock(dtype):
    rng = np.random.default_rng(7)
    src = tt.tensor(rng.standard_normal(100) * 9, dtype=tt.float64).to(dtype)
    idx = tt.tensor(rng.integers(-50, 50, 70), dtype=tt.int64)

    def run():
        dst = tt.zeros(70, dtype=dtype)
        launch(_gather_kernel, (1,), src, dst, idx, 70, BLOCK=128)
        return dst.numpy().copy()

    with stock_interpreter():
        want = run()
    got = run()
    assert got.tobytes() == want.tobytes()
    np.testing.assert_array_equal(got, src.numpy()[50 + idx.numpy()])


def test_heap_pad_is_kept_where_glibc_is():
    import ctypes.util

    from tritensor.runtime import launch as launch_module

    try:
        has_mallopt = hasattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "mallopt")
    except OSError:
        has_mallopt = False
    assert launch_module.HEAP_PAD_KEPT == has_mallopt
    assert interpreter.keep_heap_pad() == has_mallopt  # idempotent: setting it again succeeds as well


@triton.jit
def _scale_kernel(src, dst, n, s, t: tl.float64, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(src + i, mask=i < n)
    tl.store(dst + i, x * s + t, mask=i < n)


def test_scalars_are_typed_as_the_compiler_types_them():
    # A Python float is an fp32 value in a compiled kernel; an annotated tl.float64 one stays fp64.
    s, t = 0.1, 1 / 3  # neither is an fp32 number
    x = tt.tensor([1.0, 3.0, -7.5], dtype=tt.float64)

    def run(src):
        dst = tt.empty(3, dtype=tt.float64)
        launch(_scale_kernel, (1,), src, dst, 3, s, t, BLOCK=4)
        return dst.numpy().copy()

    want = x.numpy() * np.float64(np.float32(s)) + t
    np.testing.assert_array_equal(run(x), want)
    with stock_interpreter():  # the stock interpreter kept the float at double precision
        assert not np.array_equal(run(x), want)
    # fp16 data times a float scalar computes in fp32, as compiled (not in fp16)
    h = tt.tensor([1.0, 3.0, -7.5], dtype=tt.float16)
    want16 = (h.numpy().astype(np.float32) * np.float32(s)).astype(np.float64) + t
    np.testing.assert_array_equal(run(h), want16)


@triton.jit
def _desc_store_kernel(desc, M: tl.constexpr, N: tl.constexpr):
    desc.store([0, 0], tl.full((M, N), 1.0, tl.float16))


@pytest.mark.parametrize("cols,written", [(45, 48), (48, 48), (3, 8), (17, 24)])
def test_descriptor_store_writes_whole_16_byte_chunks(cols, written):
    # fp16 rows padded to 64 elements; a store of a 4 x 64 block through a (4, cols) descriptor
    # writes up to the next 16-byte boundary of the rows, as TMA does (triton-lang/triton#11583).
    from triton.tools.tensor_descriptor import TensorDescriptor

    def run():
        base = tt.zeros(4, 64, dtype=tt.float16)
        launch(_desc_store_kernel, (1,), TensorDescriptor(base, [4, cols], [64, 1], [4, 64]), M=4, N=64)
        return base.numpy()

    got = run()
    assert (got[:, :written] == 1).all() and (got[:, written:] == 0).all()
    with stock_interpreter():  # the stock interpreter clips at the extent exactly
        stock = run()
    assert (stock[:, :cols] == 1).all() and (stock[:, cols:] == 0).all()


@triton.jit
def _program_order_kernel(dst):
    tl.store(dst, tl.program_id(0))  # every program writes one place: the last to run wins


def test_reverse_grid_runs_programs_last_first(monkeypatch):
    dst = tt.zeros(1, dtype=tt.int32)
    launch(_program_order_kernel, (5,), dst)
    assert dst.item() == 4
    monkeypatch.setattr(interpreter_gpu, "REVERSE_GRID", True)
    launch(_program_order_kernel, (5,), dst)
    assert dst.item() == 0

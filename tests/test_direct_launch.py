"""runtime/direct.py: launching a compiled kernel without Triton's binder (GPU mode), checked in CPU mode.

Three things make the direct path safe, and each is checked here against Triton itself:
- the launch key is never coarser than Triton's specialisation (a battery of every argument kind
  through Triton's own ``native_specialize_impl``);
- the launcher binds arguments exactly as Triton's binder does (Triton's binder built from each
  kernel's signature, over the launches a small workload makes);
- a key runs direct only after two launches through Triton returned one compiled kernel and the
  binding agreed; any disagreement sends that kernel through Triton for good (fake kernels).
On a GPU, every launch of the suite takes the direct path after its two checked launches.
"""
from __future__ import annotations

import inspect
import itertools
import warnings

import numpy as np
import pytest
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import BaseBackend
from triton.runtime.jit import JITFunction, create_function_from_signature

import tritensor as tt
from tritensor.runtime import direct
from tritensor.runtime import dtype as dt
from tritensor.runtime import launch as launch_mod
from tritensor.runtime import mode
from tritensor.triton_kernels import elementwise as ek

INTS = [0, 1, 2, 15, 16, 17, 32, -1, -15, -16, -17, 2**31 - 16, 2**31 - 1, 2**31, 2**31 + 16, 2**32, 2**32 + 1,
        -2**31, -2**31 - 1, -2**31 - 16, 2**63 - 16, 2**63 - 1, -2**63, 2**63, 2**64 - 16]
POINTERS = [launch_mod._DevArg(p, d) for p in (4096, 4097, 4104, 4112, 8192 + 8)
            for d in (dt.float32, dt.float16, dt.bfloat16, dt.int64, dt.bool_)]
OTHERS = [0.0, 1.5, -2.0, float("inf"), True, False, None, (1, 16), (16, 1), (17, 32), (1, 1), (2**31, 5), ()]


def _triton(a, specialize=True):
    return native_specialize_impl(BaseBackend, a, False, specialize, True)


@pytest.mark.parametrize("exact_ints", [False, True], ids=["plain", "autotuned"])
def test_a_launch_key_is_never_coarser_than_tritons_specialisation(exact_ints):
    battery = INTS + POINTERS + OTHERS
    keys = [direct.arg_key(a, exact_ints) for a in battery]
    assert direct._UNKNOWN not in keys
    checked = 0
    for (a, ka), (b, kb) in itertools.combinations(zip(battery, keys), 2):
        if ka == kb:  # one key for both: Triton must not tell them apart either
            for spec in (True, False):  # do_not_specialize parameters are coarser still
                assert _triton(a, spec) == _triton(b, spec), (a, b)
            checked += 1
    assert checked > 10
    # and the key does tell apart what Triton tells apart
    assert direct.arg_key(1, exact_ints) != direct.arg_key(17, exact_ints)
    assert direct.arg_key(POINTERS[0], exact_ints) != direct.arg_key(POINTERS[5], exact_ints)  # 4096 vs 4097


def test_keyword_arguments_and_unknown_kinds():
    p = POINTERS[0]
    k1 = direct.launch_key((p, 16), {"BLOCK": 128, "DTYPE": tt.float16}, False)
    assert k1 == direct.launch_key((p, 32), {"BLOCK": 128, "DTYPE": tt.float16}, False)
    assert k1 != direct.launch_key((p, 32), {"BLOCK": 64, "DTYPE": tt.float16}, False)
    assert direct.launch_key((p, object()), {}, False) is None  # Triton decides
    assert direct.launch_key((p,), {"X": [1]}, False) is None  # unhashable


def _workload():
    """The launches a small mixed workload makes: (kernel, grid, converted args, kwargs)."""
    seen = []
    real = launch_mod._final

    def record(kernel, grid, args, kwargs, stream):
        real(kernel, grid, args, kwargs, stream)
        # An Autotuner's launch leaves out the tuned meta-parameters; both binders get them from
        # the configuration it picked (on a GPU; the interpreter passes them in kwargs itself).
        config = getattr(kernel, "best_config", None)
        seen.append((kernel, args, {**kwargs, **config.all_kwargs()} if config is not None else kwargs))
    launch_mod._final = record
    try:
        a = tt.arange(12, dtype=tt.float32).reshape(3, 4)
        (a * 2 + 1).relu().sum(dim=0)
        a.t().contiguous()
        a @ a.t()
        a.softmax(-1).max(dim=1)
        tt.zeros(5, dtype=tt.int64).fill_(3)
    finally:
        launch_mod._final = real
    return seen


def _python_function(kernel):
    """The Python function under a kernel object: one ``.fn`` down in the interpreter, two under an
    Autotuner on a GPU (Autotuner -> JITFunction -> function)."""
    fn = kernel
    while not inspect.isfunction(fn):
        fn = fn.fn
    return fn


def test_binding_equals_tritons_binder_for_real_kernels():
    launches = _workload()
    assert len({id(k) for k, _, _ in launches}) >= 5
    for kernel, args, kwargs in launches:
        jit = JITFunction(_python_function(kernel))
        theirs, _spec, _options = create_function_from_signature(jit.signature, jit.params, BaseBackend)(
            *args, **kwargs)
        fast = direct.DirectLauncher(kernel, jit, False, None, None)
        mine = fast.bind(args, kwargs)
        assert len(mine) == len(theirs) and all(m is t or m == t for m, t in zip(mine, theirs.values())), jit


# ----- the checks before a key runs direct, with fake kernels ------------------------------------------
class _Compiled:
    function, packed_metadata = "fn", "meta"

    def __init__(self):
        self.runs = []

    def run(self, *args):
        self.runs.append(args)


class _Config:
    def __init__(self, kwargs, pre_hook=None):
        self.kwargs, self.pre_hook = kwargs, pre_hook

    def all_kwargs(self):
        return dict(self.kwargs)


class _Kernel:
    """A kernel whose Triton launches are recorded; it compiles one kernel per call of ``compile_for``."""

    def __init__(self, fn, arg_names):
        self.fn, self.arg_names = fn, arg_names
        self.triton_calls = []
        self.compiled = {}
        self.best_config = None

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.triton_calls.append((grid, args, kwargs))
            return self.compiled.setdefault(kwargs.get("BLOCK"), _Compiled())
        return run


def _k(x, y, n, BLOCK: int = 64, FLAG: bool = False):
    pass


def _launcher(kernel, autotuned=False, bind=None):
    jit = JITFunction(_k)
    fast = direct.DirectLauncher(kernel, jit, autotuned, bind or (lambda a, k: direct.DirectLauncher.bind(fast, a, k)),
                                 lambda: (None, None))
    return fast


def test_a_key_runs_direct_after_two_checked_launches():
    kernel = _Kernel(_k, ["x", "y", "n"])
    fast = _launcher(kernel)
    x, y = POINTERS[0], POINTERS[3]
    for _ in range(3):
        fast.launch((4,), (x, y, 100), {"BLOCK": 128}, stream=7)
    assert len(kernel.triton_calls) == 2
    compiled = kernel.compiled[128]
    assert compiled.runs == [(4, 1, 1, 7, "fn", "meta", None, None, None, x, y, 100, 128, False)]
    fast.launch(lambda meta: (meta["n"] // meta["BLOCK"] + 1, 2), (x, y, 300), {"BLOCK": 128}, stream=7)
    assert compiled.runs[-1][:3] == (3, 2, 1)  # a grid function sees the bound arguments
    fast.launch((4,), (POINTERS[1], y, 100), {"BLOCK": 128}, stream=7)  # unaligned: a new key, checked again
    assert len(kernel.triton_calls) == 3


def test_a_binding_that_disagrees_with_tritons_turns_the_kernel_off():
    kernel = _Kernel(_k, ["x", "y", "n"])
    fast = _launcher(kernel, bind=lambda a, k: [*a, 999, False])
    with pytest.warns(RuntimeWarning, match="bind differently"):
        fast.launch((1,), (POINTERS[0], POINTERS[0], 5), {"BLOCK": 32}, stream=0)
    for _ in range(3):
        fast.launch((1,), (POINTERS[0], POINTERS[0], 5), {"BLOCK": 32}, stream=0)
    assert fast.off and len(kernel.triton_calls) == 4 and kernel.compiled[32].runs == []


def test_one_key_meeting_two_compiled_kernels_turns_the_kernel_off():
    kernel = _Kernel(_k, ["x", "y", "n"])
    fast = _launcher(kernel)
    fast.launch((1,), (POINTERS[0], POINTERS[0], 5), {"BLOCK": 32}, stream=0)
    kernel.compiled.clear()  # Triton now hands out another kernel for the same key
    with pytest.warns(RuntimeWarning, match="two compiled kernels"):
        fast.launch((1,), (POINTERS[0], POINTERS[0], 5), {"BLOCK": 32}, stream=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fast.launch((1,), (POINTERS[0], POINTERS[0], 5), {"BLOCK": 32}, stream=0)
    assert fast.off and len(kernel.triton_calls) == 3


def test_an_autotuned_kernel_replays_its_configuration():
    kernel = _Kernel(_k, ["x", "y", "n"])
    hooked = []
    kernel.best_config = _Config({"BLOCK": 256, "num_warps": 8}, pre_hook=lambda nargs: hooked.append(dict(nargs)))
    fast = _launcher(kernel, autotuned=True)
    x = POINTERS[0]
    for _ in range(3):
        fast.launch((2,), (x, x, 4096), {"FLAG": True}, stream=1)
    assert len(kernel.triton_calls) == 2
    # the autotuner itself ran the pre-hook on the Triton launches; the direct launch runs it too
    assert hooked == [{"x": x, "y": x, "n": 4096, "FLAG": True, "BLOCK": 256, "num_warps": 8}]
    assert kernel.compiled[None].runs[0][9:] == (x, x, 4096, 256, True)
    fast.launch((2,), (x, x, 4112), {"FLAG": True}, stream=1)  # another value: the autotuner's key may differ
    assert len(kernel.triton_calls) == 3


def test_a_plan_runs_the_trusted_key_with_raw_pointers():
    # launch_converted (runtime/launch.py's path for device tensors): pointers arrive as ints with
    # their PointerKey; the first launches of a signature go the checked way, then its plan runs.
    kernel = _Kernel(_k, ["x", "y", "n"])
    fast = _launcher(kernel)
    ptr = direct.pointer_keys(dt.float32)
    values, sig = [4096, 8192, 100], [ptr[True], ptr[True], 100]
    for _ in range(3):
        fast.launch_converted((4,), values, sig, {"BLOCK": 128}, 7, 0)
    assert len(kernel.triton_calls) == 2 and len(fast.plans) == 1
    assert [type(a) for a in kernel.triton_calls[0][1][:2]] == [direct.Pointer] * 2  # Triton saw pointer objects
    compiled = kernel.compiled[128]
    assert compiled.runs[-1] == (4, 1, 1, 7, "fn", "meta", None, None, None, 4096, 8192, 100, 128, False)
    fast.launch_converted((4,), [4097, 8192, 100], [ptr[False], ptr[True], 100], {"BLOCK": 128}, 7, 0)
    assert len(kernel.triton_calls) == 3  # unaligned: another key, checked again
    fast.launch_converted((4,), values, sig, {"BLOCK": 128}, 7, 1)
    assert len(kernel.triton_calls) == 4  # another device: its own entries and plans
    fast.launch_converted((4,), values, sig, {"BLOCK": 128, "X": [1]}, 7, 0)  # unhashable: through Triton
    assert len(kernel.triton_calls) == 5 and len(fast.plans) == 1
    with pytest.warns(RuntimeWarning, match="is off"):
        fast._give_up("a test")
    assert fast.plans == {}  # nothing runs direct once the kernel is off


# ----- launch sites (runtime/launch.py: Site), on the simulated device -----------------------------------
sim_only = pytest.mark.skipif(not mode.SIM, reason="the plan path runs on the GPU path (simulated device)")


def test_a_site_refuses_unhashable_keywords_when_it_is_made():
    with pytest.raises(TypeError, match="unhashable"):
        launch_mod.Site(ek._elementwise_kernel, OP=["add"])


@sim_only
def test_a_site_runs_the_kernels_own_plans_and_none_once_the_kernel_is_off(monkeypatch):
    a, b = tt.arange(5.0, device="cuda"), tt.ones(5, device="cuda")
    for _ in range(4):  # two checked launches, then the plan
        c = a + b
    site = ek._layouts[(c._shape, a._stride, b._stride, c._stride)].sites[("add", 0, "float32", False)]
    assert site.kernel is ek._elementwise_kernel  # all contiguous: the flat kernel
    fast = direct.launcher_for(site.kernel)
    (key, plan), = site.plans.items()
    assert any(p is plan for p in fast.plans.values())  # the kernel's own plan, not a copy
    # three pointers and a size, c absent (None), then the scalar's two (unused) words
    assert key[1:] == (direct.pointer_keys(dt.float32)[True],) * 2 + (None, direct.pointer_keys(dt.float32)[True],
                                                                       5, 0, 0)
    runs = []
    monkeypatch.setattr(plan, "run", lambda *args, _real=plan.run: (runs.append(args), _real(*args)))
    a + b
    assert len(runs) == 1
    monkeypatch.setattr(fast, "off", True)  # as after a failed check: every launch through Triton
    np.testing.assert_array_equal((a + b).cpu().numpy(), [1.0, 2.0, 3.0, 4.0, 5.0])
    assert len(runs) == 1


@sim_only
def test_a_broadcast_or_strided_operand_takes_the_strided_kernel():
    x, b = tt.arange(6.0, device="cuda").reshape(2, 3), tt.ones(3, device="cuda")
    for _ in range(3):
        y = x + b
        z = x.T * 2.0
    np.testing.assert_array_equal(y.cpu().numpy(), np.arange(6.0).reshape(2, 3) + 1)
    np.testing.assert_array_equal(z.cpu().numpy(), np.arange(6.0).reshape(2, 3).T * 2)
    bv = b.expand(2, 3)
    assert ek._layouts[(y._shape, x._stride, bv._stride, y._stride)].sites[("add", 0, "float32", False)].kernel \
        is ek._elementwise_strided_kernel
    assert ek._layouts[(z._shape, x.T._stride, z._stride)].sites[("mul", 1, "float32", False)].kernel \
        is ek._elementwise_strided_kernel

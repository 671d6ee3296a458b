import os
import sys

# tolerances.py lives beside the tests; importlib mode does not put this folder on sys.path.
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# GPU mode: every autotuned kernel takes its first configuration (triton_kernels/autotune.py), so
# the suite's hundreds of shapes are compiled once each, not timed in every configuration.
os.environ.setdefault("TRITENSOR_AUTOTUNE", "0")

# tritensor picks the execution mode (TRITON_INTERPRET in CPU mode) before Triton is first imported;
# a test module that imports triton itself must not be the first to do so.
import tritensor  # noqa: E402,F401

# TRITENSOR_TEST_DEVICE=cuda (GPU mode): the tests' tensors are made on the GPU (the default
# device, tritensor.set_default_device), so kernels run on device tensors as a user's do, not on
# host tensors staged per launch; results are read back with .cpu() as a user reads them
# (.numpy() of a device tensor copies it back in this variant, where torch would refuse).
TEST_DEVICE = os.environ.get("TRITENSOR_TEST_DEVICE", "cpu").strip().lower()
if TEST_DEVICE not in ("cpu", "cuda"):
    raise ValueError(f"TRITENSOR_TEST_DEVICE must be 'cpu' or 'cuda', got {TEST_DEVICE!r}")
if TEST_DEVICE == "cuda":
    if not tritensor.cuda.is_available():
        raise RuntimeError("TRITENSOR_TEST_DEVICE=cuda needs a GPU (tritensor runs in CPU mode here)")
    tritensor.set_default_device("cuda")
    _numpy = tritensor.Tensor.numpy
    tritensor.Tensor.numpy = lambda self, *, force=False: _numpy(self, force=force or self.device.type == "cuda")
from gpu_guard import pytest_runtest_teardown  # noqa: E402,F401  (GPU mode: a sticky CUDA error ends the worker)

# Test files the simulated-device run leaves out (``--device-only``). CI runs the suite twice, in
# CPU mode and on the simulated device. These never touch a device in any mode (the store, rpc
# and remote references, the elastic launcher, the static checks), so a second run would only
# repeat them; and the benchmark harness's tests, whose device branch times real work for a
# second or so a row: on the simulated device, whose kernels run in the interpreter, that is
# minutes a file, and what it would time means nothing there (a GPU run checks that branch).
DEVICE_FREE = frozenset({
    "test_bench.py", "test_bench_amp.py", "test_bench_rpc_ddp.py",
    "test_comm_store.py", "test_comm_store_flood.py", "test_rpc.py", "test_rpc_fuzz.py", "test_rpc_hardening.py",
    "test_rref.py", "test_rref_fetch.py", "test_rref_model.py", "test_elastic_agent.py", "test_elastic_errors.py",
    "test_elastic_metrics_events.py", "test_elastic_multiprocessing.py", "test_elastic_rendezvous.py",
    "test_elastic_run.py", "test_elastic_timer.py", "test_layering.py", "test_stubs.py", "test_tolerances.py",
    "test_sm90_compile.py", "test_sm90_report.py", "test_multiprocessing.py", "test_docstrings.py",
})


def pytest_addoption(parser):
    parser.addoption("--device-only", action="store_true",
                     help="leave out the test files that never touch a device (conftest.DEVICE_FREE)")


def pytest_ignore_collect(collection_path, config):
    if config.getoption("--device-only") and collection_path.name in DEVICE_FREE:
        return True
    return None


@pytest.fixture
def no_launch(monkeypatch):
    """Make compute-kernel launches fail: bad input must be rejected before any kernel runs.

    The factory kernels (fill, arange, rand/randn: ``copies.py`` and two kernels of ``random.py``)
    stay usable so a test can still build its inputs with ``tt.zeros`` and friends; the random
    ops' own kernels in ``random.py`` (randint, bernoulli) fail like every other.
    """
    from tritensor.runtime import launch as _launch

    real = _launch.launch
    allowed = {"tritensor.triton_kernels.copies"}
    factory_kernels = {"_random_kernel", "_arange_kernel"}  # of tritensor.triton_kernels.random

    def boom(*args, **kwargs):
        raise AssertionError("a kernel was launched for bad input")

    def factories_only(kernel, *args, **kwargs):
        if getattr(getattr(kernel, "fn", None), "__name__", None) in factory_kernels:
            return real(kernel, *args, **kwargs)
        return boom()

    monkeypatch.setattr(_launch, "launch", boom)
    for name, mod in list(sys.modules.items()):
        if name.startswith("tritensor.") and name not in allowed and getattr(mod, "launch", None) is real:
            monkeypatch.setattr(mod, "launch", factories_only if name == "tritensor.triton_kernels.random" else boom)


@pytest.fixture
def ieee_fp32_conv(monkeypatch):
    """Convolutions in IEEE fp32 for the test: on a GPU they default to TF32 (``cudnn.allow_tf32``, as
    torch's), whose 10-bit mantissas no fp32 tolerance against float64 NumPy allows."""
    monkeypatch.setattr(tritensor.backends.cudnn, "allow_tf32", False)


@pytest.fixture
def ieee_fp32_matmul(monkeypatch):
    """fp32 products in IEEE fp32 for the test, whatever a caller set (``backends.cuda.matmul.allow_tf32``)."""
    monkeypatch.setattr(tritensor.backends.cuda.matmul, "allow_tf32", False)


@pytest.fixture
def poison_allocations(monkeypatch):
    """Fresh float outputs start as NaN, so an element a kernel forgets to write fails every time."""
    from tritensor.core.tensor import Tensor

    empty = Tensor._empty

    def poisoned(shape, dtype, dev):
        t = empty(shape, dtype, dev)
        if dtype.is_floating_point and t.numel() and dev.type == "cpu":
            t.numpy()[...] = np.nan
        return t

    monkeypatch.setattr(Tensor, "_empty", staticmethod(poisoned))

"""A process forked after its parent used the GPU, and the default-device context.

On a GPU the child's copy of the CUDA context is dead: every driver call in it fails. torch answers
the child's first device use with "Cannot re-initialize CUDA in forked subprocess"; tritensor gives
the same error from ``runtime/cuda.py``, and the simulated device makes every raw driver call in
such a child fail with CUDA_ERROR_NOT_INITIALIZED, as the driver does, so code that reaches the
driver some other way fails in the simulator as it would on the GPU. The H100 run found DataLoader
workers failing there with the bare driver error.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import tritensor as tt
from tritensor.runtime import cuda, memory, mode

needs_gpu_path = pytest.mark.skipif(not tt.cuda.is_available(), reason="needs the GPU path (a GPU or TRITENSOR_DEVICE=sim)")


def _in_child(fn) -> str:
    """Run ``fn`` in a forked child; what it returns (a string) or the error it raised, as text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn()
        except BaseException as e:  # noqa: BLE001  (the child reports whatever it met)
            out = f"{type(e).__name__}: {e}"
        os.write(w, out.encode()[:4000])
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read().decode()
    os.waitpid(pid, 0)
    return got


@needs_gpu_path
def test_a_forked_child_gets_torchs_error_and_keeps_the_cpu():
    tt.ones(3, device="cuda").sum().item()

    def child():
        # Host tensors without a kernel still work (a DataLoader worker's collate of NumPy samples).
        # GPU mode runs host tensors' kernels on the GPU, staged, so a forked child has no tensor
        # math at all, unlike torch's: use NumPy there, or the 'spawn' start method.
        host = tt.from_numpy(np.arange(4.0) * 2).tolist()
        try:
            tt.zeros(2, device="cuda")
        except RuntimeError as e:
            return f"{host} | {e}"
        return "no error"

    got = _in_child(child)
    assert got.startswith("[0.0, 2.0, 4.0, 6.0] | Cannot re-initialize CUDA in forked subprocess. To use "
                          "CUDA with multiprocessing, you must use the 'spawn' start method"), got
    assert tt.ones(2, device="cuda").sum().item() == 2.0  # the parent is untouched


@needs_gpu_path
@pytest.mark.skipif(not mode.SIM, reason="the simulator's model of the driver in a forked child")
def test_the_simulated_driver_fails_in_a_forked_child_as_the_gpu_does():
    stream = cuda.current_stream()
    dst = tt.zeros(4, dtype=tt.uint8, device="cuda")

    def child():
        memory.host_to_device(dst.data_ptr(), np.zeros(4, np.uint8), stream)  # the parent's stream
        return "copied"

    got = _in_child(child)
    assert got.startswith("SimError: CUDA_ERROR_NOT_INITIALIZED: this process was forked"), got
    memory.host_to_device(dst.data_ptr(), np.full(4, 7, np.uint8), stream)  # the parent still can
    assert dst.tolist() == [7, 7, 7, 7]


def test_device_context_sets_the_default_device_and_restores_it():
    before = tt.get_default_device()
    with tt.device("cpu") as d:
        assert d is tt.device("cpu") and tt.get_default_device() is d
        assert tt.zeros(2).device == tt.device("cpu")
        with tt.device("cuda:0"):
            assert tt.get_default_device() == tt.device("cuda:0")
        assert tt.get_default_device() is d
    assert tt.get_default_device() is before
    with pytest.raises(KeyError), tt.device("cpu"):
        raise KeyError("the block's error passes through")
    assert tt.get_default_device() is before

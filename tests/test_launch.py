"""launch's kernel-buffer protocol: any object offering ``__kernel_buffer__`` is passed by pointer.

launch sits beneath Tensor (it will move to a runtime package), so it must not import Tensor:
a NumPy-backed buffer defined here launches a kernel as a Tensor does.
"""
from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest
import triton
import triton.language as tl

import tritensor as tt
from tritensor.runtime import launch as launch_mod
from tritensor.runtime import mode
from tritensor.runtime.launch import launch

ROOT = pathlib.Path(launch_mod.__file__).resolve().parent.parent


@triton.jit
def _axpy_kernel(x, y, out, a, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)


class _Host:
    """Host memory as the protocol describes a storage."""

    class device:
        type = "cpu"

    def __init__(self, array):
        self.array = array
        self.nbytes = array.nbytes

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def bytes_view(self):
        return self.array.view(np.uint8)


class NumpyBuffer:
    """Not a Tensor: a NumPy array offering the kernel-buffer protocol."""

    def __init__(self, array, offset=0):
        self.storage, self.offset = _Host(array), offset

    def __kernel_buffer__(self):
        a = self.storage.array
        return self.storage, self.offset, a.shape, tuple(s // a.itemsize for s in a.strides), tt.float32


@pytest.mark.skipif(mode.GPU, reason="a host buffer on GPU is staged through device memory (test_cuda.py)")
def test_launch_takes_any_kernel_buffer():
    x = np.arange(40, dtype=np.float32)
    y = np.full(41, 0.5, dtype=np.float32)  # offset 1: element 0 is y[1]
    out = np.zeros(40, dtype=np.float32)
    launch(_axpy_kernel, (triton.cdiv(40, 16),), NumpyBuffer(x), NumpyBuffer(y, 1), NumpyBuffer(out), 2.0, 40,
           BLOCK=16)
    np.testing.assert_array_equal(out, 2 * x + 0.5)


def test_tensor_offers_the_protocol():
    base = tt.arange(24, dtype=tt.float16).view(4, 6)
    v = base[1:, 2:].t()
    storage, offset, shape, strides, dtype = v.__kernel_buffer__()
    assert storage is base.untyped_storage()
    assert (offset, tuple(shape), tuple(strides), dtype) == (8, (4, 3), (1, 6), tt.float16)
    assert storage.data_ptr() + offset * dtype.itemsize == v.data_ptr()


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield ("." * node.level) + (node.module or ""), [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names)


@pytest.mark.parametrize("module", ["runtime/launch.py", "runtime/interpreter.py"])
def test_launch_does_not_import_tensor(module):
    for name, names in _imports(ROOT / module):
        assert not name.endswith("tensor") and "Tensor" not in names, (module, name, names)

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


@triton.jit
def _sum_through_table_kernel(table, out, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    ptr = tl.load(table + pid * 3).to(tl.pointer_type(tl.float32))
    start = tl.load(table + pid * 3 + 1)
    n = tl.load(table + pid * 3 + 2)
    offs = start + tl.arange(0, BLOCK)
    tl.atomic_add(out, tl.sum(tl.load(ptr + offs, mask=offs < n, other=0), axis=0))


def test_address_table_rows_and_launch():
    xs = [tt.arange(n, dtype=tt.float32) for n in (0, 5, 17, 8)]
    table = launch_mod.AddressTable(xs, 8)
    assert len(table) == 0 + 1 + 3 + 1  # a row per block of 8
    assert table.entries([100, 200, 300, 400]).reshape(-1, 3).tolist() == [
        [200, 0, 5], [300, 0, 17], [300, 8, 17], [300, 16, 17], [400, 0, 8]]
    assert launch_mod.AddressTable(xs).entries([1, 2, 3, 4]).tolist() == [1, 2, 3, 4]
    out = tt.zeros(1, dtype=tt.float32)
    launch(_sum_through_table_kernel, (len(table),), table, out, BLOCK=8)
    assert out.item() == sum(n * (n - 1) / 2 for n in (0, 5, 17, 8))


def test_address_table_refuses_a_strided_buffer():
    x = tt.zeros(4, 6)
    with pytest.raises(ValueError, match=r"buffers\[1\] is not contiguous"):
        launch_mod.AddressTable([x, x.t()], 8)
    launch_mod.AddressTable([x[1:3], x[:, :1][:1]], 8)  # contiguous views are fine


def _launched_addresses(monkeypatch, module):
    """Every launch of ``module``: its arguments as the launch received them."""
    seen = []
    real = module.launch
    monkeypatch.setattr(module, "launch", lambda kernel, grid, *args, **kw: seen.append(args) or
                        real(kernel, grid, *args, **kw))
    return seen


def test_multi_tensor_kernels_take_their_addresses_at_launch(monkeypatch):
    # The tables of GradScaler's unscale, clip_grad_norm_ and the optimizers' step counts name
    # their tensors, not addresses read on the host: in GPU mode the launch takes each address
    # from the tensor as the kernel sees it (a host tensor is staged), so no host address can
    # reach a device kernel. A table of data_ptr() values built by the caller (the H100's
    # illegal address) fails here.
    from tritensor.core.ops import amp as amp_ops, foreach, optim as optim_ops
    from tritensor.triton_kernels import amp as amp_k, foreach as foreach_k, optim as optim_k

    grads = [tt.ones(5), tt.ones(3, 4)]
    steps = [tt.zeros(1), tt.zeros(1)]
    calls = [_launched_addresses(monkeypatch, m) for m in (amp_k, foreach_k, optim_k)]
    amp_ops.unscale_and_check_(grads, tt.zeros(1), tt.full((1,), 0.5))
    foreach.multi_tensor_norm(grads, 2.0)
    optim_ops.advance_steps_(steps)
    tables = [a for c in calls for args in c for a in args if isinstance(a, launch_mod.AddressTable)]
    assert [[b for b in t.buffers] for t in tables] == [grads, grads, steps]
    addresses = {t.data_ptr() for t in grads + steps}
    for c in calls:
        for args in c:
            for a in args:
                if isinstance(a, tt.Tensor) and a.dtype is tt.int64:
                    assert not addresses & set(a.cpu().numpy().ravel().tolist()), "a table of host addresses"
    assert grads[1].numpy().tolist() == [[0.5] * 4] * 3 and steps[0].item() == 1.0


@pytest.mark.skipif(mode.GPU, reason="CPU mode: what the interpreter receives")
def test_cpu_mode_passes_tensors_to_the_interpreter_as_they_are(monkeypatch):
    # A Tensor already speaks the interpreter's language (data_ptr, dtype): no HostArg per launch.
    # A buffer type that does not (NumpyBuffer) is wrapped, and so is everything while the
    # stock interpreter (which copies through torch's storage API) runs.
    from tritensor.runtime import interpreter

    seen = []
    real = launch_mod._final
    monkeypatch.setattr(launch_mod, "_final", lambda k, g, args, kw, s: seen.append(args) or real(k, g, args, kw, s))
    x, y, out = tt.arange(8, dtype=tt.float32), tt.ones(8), tt.zeros(8)
    launch(_axpy_kernel, (1,), x, y, out, 3.0, 8, BLOCK=8)
    assert [type(a) for a in seen[-1][:3]] == [tt.Tensor] * 3
    np.testing.assert_array_equal(out.numpy(), 3 * np.arange(8) + 1)
    host = np.zeros(8, dtype=np.float32)
    launch(_axpy_kernel, (1,), x, y, NumpyBuffer(host), 2.0, 8, BLOCK=8)
    assert type(seen[-1][2]) is interpreter.HostArg
    np.testing.assert_array_equal(host, 2 * np.arange(8) + 1)
    interpreter.remove_fixups()
    try:
        launch(_axpy_kernel, (1,), x, y, out, 1.0, 8, BLOCK=8)
    finally:
        assert interpreter.apply_fixups()
    assert type(seen[-1][0]) is interpreter.HostArg
    np.testing.assert_array_equal(out.numpy(), np.arange(8) + 1)

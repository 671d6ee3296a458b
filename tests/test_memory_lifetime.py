"""Lifetime of host memory: a NumPy view of a tensor keeps its bytes alive.

``from_numpy`` borrows the caller's array; ``numpy()`` and every ``bytes_view()`` hand out
views of a storage. As with NumPy's own views, each must keep the memory it reads alive through
its ``.base`` chain, whatever happens to the tensor, the storage or the caller's name for the
array; and nothing may keep it alive longer than that (no reference cycle waiting for the GC).
"""
import gc
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import tritensor as tt


def _base_chain(a):
    chain = []
    while a is not None:
        chain.append(a)
        a = getattr(a, "base", None)
    return chain


def _churn(n=8, elems=100_000):
    """Free memory is reused by the next allocations: make reads of freed memory visible."""
    gc.collect()
    return [np.full(elems, -1.0, np.float32) for _ in range(n)]


def test_numpy_view_outlives_tensor_in_a_loop_subprocess():
    # The reported reproducer, in a loop. Reading freed memory either shows wrong values or
    # crashes the process: it runs in a child so a segfault fails this test, not pytest.
    code = textwrap.dedent("""
        import gc
        import numpy as np
        import tritensor as tt

        bad = 0
        for i in range(40):
            elems = 100_000 if i % 2 else 1_000_000  # heap-sized and mmap-sized blocks
            t = tt.from_numpy(np.full(elems, 7.0, np.float32))
            v = t.numpy()
            del t
            gc.collect()
            junk = [np.full(elems, -1.0, np.float32) for _ in range(3)]
            bad += int(not (v == 7.0).all())
            del v, junk
        print("wrong", bad)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"child exited with {proc.returncode} (a negative code is a signal)\n{proc.stderr[-2000:]}"
    assert proc.stdout.split() == ["wrong", "0"], proc.stdout + proc.stderr[-2000:]


def test_numpy_view_keeps_borrowed_array_alive():
    a = np.full(100_000, 7.0, np.float32)
    alive = weakref.ref(a)
    t = tt.from_numpy(a)
    v = t.numpy()
    del a, t
    junk = _churn()
    assert alive() is not None, "the view does not keep the borrowed array alive"
    assert any(x is alive() for x in _base_chain(v)), "the borrowed array is not on the view's base chain"
    assert (v == 7.0).all()
    del junk


def test_views_of_views_keep_memory_alive():
    a = np.arange(24, dtype=np.float32)
    alive = weakref.ref(a)
    t = tt.from_numpy(a)
    w = t.view(4, 6).T.numpy()[1:, ::2]  # a NumPy view of a tensor view's NumPy view
    x = w.reshape(-1)  # a copy only if it must; either way it must hold its bytes
    u = t[3:15].numpy()
    del a, t
    junk = _churn()
    for view in (w, u):
        assert any(y is alive() for y in _base_chain(view)), "the borrowed array is not on the view's base chain"
    np.testing.assert_array_equal(w, np.arange(24, dtype=np.float32).reshape(4, 6).T[1:, ::2])
    np.testing.assert_array_equal(x, w.reshape(-1))
    np.testing.assert_array_equal(u, np.arange(3, 15, dtype=np.float32))
    del junk


def test_owned_storage_views_keep_memory_alive():
    t = tt.full((100_000,), 3.0, device="cpu")  # host memory is what this checks, whatever the default device
    v = t.numpy()
    b = t.untyped_storage().bytes_view()
    del t
    junk = _churn()
    assert (v == 3.0).all()
    assert (b.view(np.float32) == 3.0).all()
    del junk


@pytest.mark.parametrize("make", [
    lambda big: big[3:, 1::2],  # offset and strided
    lambda big: big.T,  # transposed: not C-contiguous
    lambda big: big[5:, 7],  # one column, starting past the array's first byte
    lambda big: big[2:4, 4:9][:, ::-1][:, ::-1],  # reversed twice: positive strides again
], ids=["offset_strided", "transposed", "column", "double_reversed"])
def test_from_numpy_strided_offset_source(make):
    big = np.arange(40 * 30, dtype=np.float32).reshape(40, 30).copy()  # owns its memory: src.base is big
    expected = make(big.copy())
    src = make(big)
    owner = weakref.ref(big)
    t = tt.from_numpy(src)
    np.testing.assert_array_equal(t.numpy(), expected)
    v = t.numpy()
    del big, src, t
    junk = _churn()
    assert owner() is not None and any(x is owner() for x in _base_chain(v))
    np.testing.assert_array_equal(v, expected)
    v[...] = -5.0  # still the caller's memory: writes land there
    np.testing.assert_array_equal(make(owner()), np.full(expected.shape, -5.0, np.float32))
    del junk


def test_from_numpy_zero_bytes():
    for a in (np.empty(0, np.float32), np.empty((0, 3), np.int64), np.empty((4, 0), np.float32)[:, :]):
        t = tt.from_numpy(a)
        del a
        v = t.numpy()
        b = t.untyped_storage().bytes_view()
        assert v.size == 0 and b.size == 0 and b.dtype == np.uint8
        assert t.shape == v.shape


def test_dropping_the_last_view_frees_at_once():
    # No reference cycle: the borrowed array goes as soon as the last view does, without the GC.
    gc.disable()
    try:
        a = np.full(1000, 1.0, np.float32)
        alive = weakref.ref(a)
        t = tt.from_numpy(a)
        v = t.numpy()[2:]
        b = t.untyped_storage().bytes_view()
        del a, t
        assert alive() is not None
        del v
        assert alive() is not None  # b still holds it
        del b
        assert alive() is None, "something still holds the borrowed array (a reference cycle?)"
        t = tt.empty(1000, device="cpu")  # an owned host storage (and no kernel launch, whose interpreter holds args)
        v = t.numpy()
        raw = weakref.ref(_base_chain(v)[-1])
        del t
        assert raw() is not None
        del v
        assert raw() is None, "something still holds the storage's memory (a reference cycle?)"
    finally:
        gc.enable()


@pytest.mark.skipif(not tt.cuda.is_available(), reason="needs a CUDA device (GPU mode)")
def test_strided_device_to_host_holds_its_contiguous_copy(monkeypatch):
    # .cpu() of a strided CUDA tensor copies it contiguous first, then hands the copy's pointer
    # to the transfer. If nothing holds the copy, its stream-ordered free comes first and the
    # next allocation on the stream gets the same block: overwrite it before the transfer runs.
    from tritensor.runtime import memory

    real = memory.device_to_host

    def reuse_then_copy(dst, src_ptr, stream):
        junk = tt.full((dst.nbytes // 4,), -1.0, device="cuda")
        real(dst, src_ptr, stream)
        del junk

    monkeypatch.setattr(memory, "device_to_host", reuse_then_copy)
    a = np.arange(512 * 256, dtype=np.float32).reshape(512, 256)
    x = tt.from_numpy(a).cuda().T
    np.testing.assert_array_equal(x.cpu().numpy(), a.T)


def test_deepcopy_and_pickle_of_storages_copy_bytes():
    """copy.deepcopy of a tensor (and of a model) gets memory of its own: before, the copy kept the
    source's raw address while its NumPy view pointed elsewhere, so kernels read freed memory."""
    import copy
    import pickle

    import tritensor as tt

    a = tt.randn(10, 64)
    b = copy.deepcopy(a)
    assert a.data_ptr() != b.data_ptr()
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    del a
    gc.collect()
    junk = [np.full(640, 9.0, np.float32) for _ in range(50)]  # reuse freed memory if anything still points at it
    np.testing.assert_array_equal((b + 0.0).numpy(), b.numpy())  # a kernel reads b's own memory
    del junk
    m = tt.nn.Linear(4, 3)
    m2 = copy.deepcopy(m)
    assert m.weight.data_ptr() != m2.weight.data_ptr()
    np.testing.assert_array_equal(m(tt.ones(2, 4)).detach().numpy(), m2(tt.ones(2, 4)).detach().numpy())
    # A storage pickles on its own only on the host (a CUDA storage refuses: it is a device address).
    hb = b.cpu()
    s = pickle.loads(pickle.dumps(hb.untyped_storage()))
    assert s.data_ptr() != hb.data_ptr() and s.bytes_view().tobytes() == hb.untyped_storage().bytes_view().tobytes()

"""tests/gpu_guard.py: a test that leaves a sticky CUDA error ends its process with a message naming it."""
import types

import pytest

import gpu_guard


class _Exited(Exception):
    pass


def test_a_dead_context_ends_the_process_naming_the_test(monkeypatch, capsys):
    fake = types.SimpleNamespace(name="CUDA_ERROR_ILLEGAL_ADDRESS")
    monkeypatch.setattr(gpu_guard, "sticky_cuda_error", lambda: fake)
    codes = []
    monkeypatch.setattr(gpu_guard.os, "_exit", lambda code: codes.append(code) or (_ for _ in ()).throw(_Exited()))
    item = types.SimpleNamespace(nodeid="tests/test_x.py::test_bad_kernel")
    with pytest.raises(_Exited):
        gpu_guard.pytest_runtest_teardown(item, None)
    assert codes == [gpu_guard.EXIT_CODE]
    err = capsys.readouterr().err
    assert "tests/test_x.py::test_bad_kernel left a sticky CUDA error (CUDA_ERROR_ILLEGAL_ADDRESS)" in err


def test_a_live_context_or_cpu_mode_changes_nothing(monkeypatch):
    monkeypatch.setattr(gpu_guard.os, "_exit", lambda code: pytest.fail("exited"))
    gpu_guard.pytest_runtest_teardown(types.SimpleNamespace(nodeid="t"), None)  # real check: CPU mode or healthy
    assert gpu_guard.sticky_cuda_error() is None

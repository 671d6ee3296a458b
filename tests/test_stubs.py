"""The type stubs generated from the op table (tools/stubs.py): fresh, and enough for mypy.

The table makes Tensor's methods and the free functions at import time, so nothing in the source
declares them; the stubs (``__init__.pyi``, ``core/tensor.pyi``, ``core/functional.pyi``,
``nn/functional.pyi``) do. A stub that no longer matches the table fails here: run
``python tools/stubs.py`` and commit what it writes.
"""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_stubs_are_fresh():
    # In a fresh process: a test run imports more submodules (elastic, bench ...), and each becomes
    # an attribute of the package, which the root stub would list.
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "stubs.py"), "--check"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_stubs_declare_what_the_table_generates():
    import tritensor as tt

    tensor_stub = (ROOT / "core" / "tensor.pyi").read_text()
    root_stub = (ROOT / "__init__.pyi").read_text()
    for name in ("softmax", "sum", "__add__", "__matmul__", "masked_fill_", "backward"):
        assert f"    def {name}(self" in tensor_stub, name
        assert callable(getattr(tt.Tensor, name))
    assert "def softmax(input, dim, dtype=...) -> Tensor:" in root_stub
    assert (ROOT / "py.typed").exists()


@pytest.mark.slow
def test_mypy_finds_no_error_in_the_examples(tmp_path):
    pytest.importorskip("mypy")
    (tmp_path / "tritensor").symlink_to(ROOT, target_is_directory=True)
    env = {**os.environ, "MYPYPATH": str(tmp_path)}
    # --allow-redefinition: pytorch/examples' word_language_model/main.py, checked in unmodified but for
    # its imports, names a file opened for writing and later one opened for reading both ``f``
    proc = subprocess.run([sys.executable, "-m", "mypy", str(ROOT / "examples"), "--follow-imports=silent",
                           "--ignore-missing-imports", "--allow-redefinition", "--cache-dir", str(tmp_path / "cache")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]

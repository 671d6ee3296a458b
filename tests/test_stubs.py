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


def test_a_property_getter_with_an_unannotated_signature_takes_the_class_annotation(monkeypatch):
    # Tensor.shape's getter is operator.attrgetter: most Python builds give it no signature, but
    # the H200 machine's Python 3.12 gave it one without an annotation, and the stub said
    # ``shape -> Any`` there. Both cases must fall back to the class's annotation.
    import importlib.util

    spec = importlib.util.spec_from_file_location("_stubs_tool", ROOT / "tools" / "stubs.py")
    stubs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stubs)

    class Box:
        size: "int"

    monkeypatch.setattr(stubs, "KNOWN", set(stubs.KNOWN) | {"int"})
    assert stubs._property_type(Box, "size", property(lambda self: 3)) == "builtins.int"
    assert stubs._property_type(Box, "size", property(__import__("operator").attrgetter("x"))) == "builtins.int"

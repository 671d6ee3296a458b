"""Every public definition in the folders listed here says what it is for, in a docstring.

A reader of nn, optim, amp, utils, elastic, serialization, distributions, ao, runtime, core,
autograd, comm (and the package-root modules beside them) should not have to read a body to learn what a public class, function or method
is for, or where it differs from torch. The count is ``tools/docstring_count.py``'s (public: no
leading underscore; methods of public classes), read from the source with ``ast``: nothing is
imported, so this is quick. A name may go without a docstring only where it says it all:
``ALLOWED`` names the methods whose meaning a base class or a protocol already documents.
"""
from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docstring_count", ROOT / "tools" / "docstring_count.py")
docstring_count = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docstring_count)

# the folders (and root files) held to a full count; nn/parallel, which belongs with comm, is held with it
FOLDERS = ("nn", "optim", "amp", "utils", "elastic", "serialization", "distributions", "ao", "testing.py",
           "jit.py", "accelerator.py", "multiproc.py", "profiler.py", "futures.py", "run.py", "backends.py",
           "runtime", "core", "autograd", "comm")
EXCLUDED = ()

# methods that need no docstring of their own, with why
ALLOWED = {
    # what a layer computes is its class docstring; these are torch's Module hooks for it
    "forward", "extra_repr", "reset_parameters",
    # torch.autograd.Function's protocol (documented on Function): each Function's class docstring
    # says what its backward gives
    "backward",
    # overrides of an API their base class documents (Module, Optimizer, LRScheduler)
    "state_dict", "load_state_dict", "get_lr", "step", "zero_grad",
}
# Python's list and dict protocol on the containers: each does what the builtin's method does
CONTAINER_PROTOCOL = {"append", "extend", "insert", "pop", "popitem", "keys", "values", "items", "get", "setdefault",
                      "clear", "copy", "update", "fromkeys"}
CONTAINER_FILES = ("nn/modules/container.py",)
# torch.distributions' properties and methods: documented on Distribution, overridden by each family
DISTRIBUTION_API = {"mean", "mode", "variance", "stddev", "entropy", "log_prob", "cdf", "icdf", "sample", "rsample",
                    "expand", "support", "arg_constraints", "param_shape", "enumerate_support"}


def _allowed(d) -> bool:
    if d.kind != "method":
        return False
    cls, name = d.qualname.split(".", 1)
    if name in ALLOWED:
        return True
    if d.path in CONTAINER_FILES and name in CONTAINER_PROTOCOL:
        return True
    return d.path.startswith("distributions/") and cls != "Distribution" and name in DISTRIBUTION_API


def _missing() -> list[str]:
    table = docstring_count.count(list(FOLDERS))
    return [f"{d.path}:{d.line}: {d.kind} {d.qualname}" for defs in table.values() for d in defs
            if not d.documented and not d.path.startswith(EXCLUDED) and not _allowed(d)]


def test_public_definitions_have_docstrings():
    missing = _missing()
    assert not missing, ("public definitions without a docstring (say what each is for and where it differs from "
                         "torch; see tests/test_docstrings.py for the names that need none):\n" + "\n".join(missing))


def test_the_count_sees_definitions():
    """The tool finds the definitions it is asked about (so an empty count cannot pass the test above)."""
    table = docstring_count.count(["nn", "optim"])
    names = {d.qualname for defs in table.values() for d in defs}
    assert {"Module", "Module.parameters", "Linear", "Optimizer", "SGD"} <= names
    skipped = {"tests", "tools", "examples", "benchmarks", "bench", ".venv"}
    assert not any(p.relative_to(ROOT).parts[0] in skipped for p in docstring_count.library_files())


def test_the_count_skips_private_setters_and_overloads(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "def _private(): pass\n"
        "def public(): pass\n"
        "class C:\n"
        "    '''documented'''\n"
        "    @property\n"
        "    def x(self):\n"
        "        '''the x'''\n"
        "    @x.setter\n"
        "    def x(self, v): pass\n"
        "    def __repr__(self): pass\n"
        "    def method(self): pass\n"
        "class _Hidden:\n"
        "    def method(self): pass\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text("def public(): pass\n")
    table = docstring_count.count(root=tmp_path)
    got = {(d.qualname, d.documented) for defs in table.values() for d in defs}
    assert got == {("public", False), ("C", True), ("C.x", True), ("C.method", False)}
    assert list(table) == ["pkg"]

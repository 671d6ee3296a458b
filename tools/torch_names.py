"""Write torch's public names, one list per module, into ``tests/torch_names/`` (see its README).

    /tmp/benchenv/bin/python tools/torch_names.py    # needs torch; never imported by tritensor

``tests/test_torch_paths.py`` reads the lists (it never imports torch): every module path listed
must import under tritensor's name (``torch.X`` -> ``tritensor.X``), and it reports, per module,
which names tritensor has and which it lacks. The lists are checked in, so the tests run where
torch is not installed; rerun this script when moving to a new torch release.

A module's names are its ``__all__`` where it has one (what torch documents as its public
surface); otherwise the public names of ``dir()`` that the module defines itself (an object whose
``__module__`` is elsewhere, or a module imported for internal use, is an import, not part of its
surface). ``torch.Tensor.txt`` holds the Tensor class's public attributes. Every file of
``torch.nn.modules`` gets a list (the test finds each nn class's file in them); of
``torch.distributed.elastic``, the modules tritensor's ``elastic/`` has a file for, found by
walking its tree.
"""
from __future__ import annotations

import importlib
import pathlib
import pkgutil
import sys
import types

import torch
import torch.nn.modules

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "torch_names"

# every file of torch.nn.modules: tests/test_torch_paths.py checks that each nn class of tritensor's
# sits in the file torch keeps it in, and imports the files tritensor has
NN_MODULE_FILES = tuple(sorted(m.name for m in pkgutil.iter_modules(torch.nn.modules.__path__)
                               if not m.name.startswith("_")))
MODULES = (
    "torch", "torch.nn", "torch.nn.modules", *(f"torch.nn.modules.{f}" for f in NN_MODULE_FILES),
    "torch.nn.functional", "torch.nn.init", "torch.nn.utils", "torch.nn.parallel",
    "torch.distributed", "torch.distributed.rpc", "torch.distributed.algorithms.ddp_comm_hooks",
    "torch.distributed.algorithms.ddp_comm_hooks.default_hooks",
    "torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook",
    "torch.cuda", "torch.cuda.amp", "torch.amp", "torch.backends.cuda", "torch.backends.cudnn", "torch.backends.mps",
    "torch.optim", "torch.optim.lr_scheduler", "torch.utils.data", "torch.autograd", "torch.linalg",
    "torch.serialization",
)


def _elastic_modules() -> list[str]:
    """torch.distributed.elastic's modules that tritensor's elastic/ mirrors, file for file."""
    names = []
    for path in sorted((ROOT / "elastic").rglob("*.py")):
        parts = list(path.relative_to(ROOT / "elastic").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts):
            continue
        name = ".".join(["torch.distributed.elastic", *parts])
        try:
            importlib.import_module(name)
        except ImportError:
            continue  # a module of tritensor's own with no torch counterpart
        names.append(name)
    return names


def public_names(modname: str) -> tuple[list[str], str]:
    """The module's public names and where they came from (``__all__`` or ``dir``)."""
    mod = importlib.import_module(modname)
    if hasattr(mod, "__all__"):
        return sorted(set(mod.__all__)), "__all__"
    names = []
    if type(mod) is not types.ModuleType:
        # torch.backends.cudnn is a module subclass whose settings are properties of its class,
        # forwarding everything else to the original module it wraps (``m``)
        names = [n for n in vars(type(mod)) if not n.startswith("_")]
        mod = mod.m
    for name in dir(mod):
        if name.startswith("_"):
            continue
        obj = getattr(mod, name)
        if isinstance(obj, types.ModuleType):
            if obj.__name__ == f"{modname}.{name}":  # a submodule is part of the surface
                names.append(name)
            continue
        owner = getattr(obj, "__module__", None)
        # functions implemented in C (torch.linalg's) belong to a torch._C module
        if owner is None or owner == modname or owner.startswith((modname + ".", "torch._C")):
            names.append(name)
    return sorted(names), "dir"


def write(name: str, names: list[str], source: str) -> None:
    header = f"# {name}: {len(names)} public names of torch {torch.__version__} ({source}); tools/torch_names.py\n"
    (OUT / f"{name}.txt").write_text(header + "".join(n + "\n" for n in names))


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.txt"):
        old.unlink()
    for modname in (*MODULES, *_elastic_modules()):
        write(modname, *public_names(modname))
    write("torch.Tensor", sorted(n for n in dir(torch.Tensor) if not n.startswith("_")), "dir(torch.Tensor)")
    print(f"wrote {len(list(OUT.glob('*.txt')))} lists to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

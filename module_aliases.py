"""torch's module paths for the packages tritensor keeps under names of its own: ``tritensor.distributed``
is ``tritensor.comm`` (torch.distributed), ``tritensor.distributed.elastic`` is ``tritensor.elastic``,
``tritensor.distributed.launcher`` is ``tritensor.elastic.launcher`` and ``tritensor.distributed.run``
is ``tritensor.run`` (the ``tritensor-run`` launcher, torchrun's module).

Why a finder rather than ``sys.modules`` entries: ``import tritensor.distributed.rpc`` must give the
very module object ``import tritensor.comm.rpc`` gives (one copy of its state: the process groups,
the RPC agent, the registered backends), for every submodule at any depth, and comm's submodules
are imported lazily (rpc and the DDP hooks sit on comm, which does not import them). Entries made
up front would have to import every submodule first. The finder, first on ``sys.meta_path``,
answers an alias name by importing the real module and handing that object to the import system,
which records it under the alias too: both names are one module, and nothing is imported before
it is asked for. The package root imports this module, which adds the finder, and then imports
``tritensor.distributed`` through it; no layer below the root imports comm because of it.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

ALIASES = {  # torch's path -> tritensor's module; the longest matching prefix decides
    "tritensor.distributed": "tritensor.comm",
    "tritensor.distributed.elastic": "tritensor.elastic",
    "tritensor.distributed.launcher": "tritensor.elastic.launcher",
    "tritensor.distributed.run": "tritensor.run",
}


def real_name(name: str) -> str | None:
    """The module an alias names (``tritensor.distributed.rpc`` -> ``tritensor.comm.rpc``), or None."""
    best = max((p for p in ALIASES if name == p or name.startswith(p + ".")), key=len, default=None)
    return None if best is None else ALIASES[best] + name[len(best):]


class _AliasLoader(importlib.abc.Loader):
    """Loads an alias as the real module itself (imported, if it is not yet, under its own name)."""

    def __init__(self, real: str):
        self.real = real
        self.real_spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.real)
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module):
        # module_from_spec stamped the alias's spec on the module: it keeps its own (pickle,
        # importlib.reload and multiprocessing read the module's real name from it)
        module.__spec__ = self.real_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        real = real_name(fullname)
        if real is None or importlib.util.find_spec(real) is None:
            return None  # not an alias, or no such module: the import fails naming the alias
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real))


# Importing this module (the package root does, once) puts the finder first on sys.meta_path:
# before the path finder, which would load a second copy of a comm submodule under the alias's
# name from comm's __path__.
FINDER = _AliasFinder()
if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, FINDER)

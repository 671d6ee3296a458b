"""A record of the kernel launches a CPU-mode run makes, so they can be compiled for a GPU later.

CPU mode runs every kernel in Triton's interpreter, which never compiles it: a kernel that the
interpreter runs happily can still fail to compile for a real GPU (a shape ``tl.dot`` refuses,
a config whose shared memory does not fit, an argument type the JIT cannot specialise). With
``TRITENSOR_RECORD_LAUNCHES=<path>`` set, :func:`record` notes each launch's kernel, argument
types and compile-time values (one line per distinct specialisation, in ``<path>.<pid>.jsonl``);
``tools/sm90_compile.py`` then compiles every recorded launch for Hopper (sm_90) on a machine
without a GPU, through Triton's own JIT binder, so the specialisation is the one a GPU run makes.

An entry is JSON: ``{"kernel": "module:qualname", "args": [...], "kwargs": {...}}`` where a
buffer argument is ``{"ptr": "<element type>"}``, a ``triton.language`` dtype is
``{"tl": "<name>"}``, a tuple is ``{"tuple": [...]}``, a TMA ``TensorDescriptor`` is ``{"desc":
{"dtype", "shape", "strides", "block_shape", "padding"}}`` and numbers, strings and bools are as
given. Values are recorded exactly; the tool merges launches that differ only in integers of
the same specialisation class.
"""
from __future__ import annotations

import atexit
import json
import os
import threading

from triton.tools.tensor_descriptor import TensorDescriptor

PATH = os.environ.get("TRITENSOR_RECORD_LAUNCHES") or None
_seen: set[str] = set()
_lock = threading.Lock()
_file = None


def encode(a):
    """The JSON form of one kernel argument (see the module docstring)."""
    if a is None or isinstance(a, (bool, int, str, float)):
        return a
    if isinstance(a, tuple):
        return {"tuple": [encode(x) for x in a]}
    if isinstance(a, TensorDescriptor):
        return {"desc": {"dtype": encode(a.base)["ptr"], "shape": list(a.shape), "strides": list(a.strides),
                         "block_shape": list(a.block_shape), "padding": a.padding}}
    if hasattr(a, "data_ptr") and hasattr(a, "dtype"):
        return {"ptr": str(a.dtype).rsplit(".", 1)[-1]}
    if type(a).__name__ == "dtype" and type(a).__module__.startswith("triton"):
        return {"tl": a.name}
    if type(a).__name__ == "constexpr":
        return encode(a.value)
    raise TypeError(f"launch_log: cannot record a kernel argument of type {type(a).__name__}")


def record(kernel, args, kwargs) -> None:
    """Note one launch (``args`` as handed to Triton) if recording is on and it is new."""
    global _file
    fn = getattr(kernel, "fn", kernel)
    entry = json.dumps({"kernel": f"{fn.__module__}:{fn.__qualname__}", "args": [encode(a) for a in args],
                        "kwargs": {k: encode(v) for k, v in sorted(kwargs.items())}}, sort_keys=True)
    with _lock:
        if entry in _seen:
            return
        _seen.add(entry)
        if _file is None:
            _file = open(f"{PATH}.{os.getpid()}.jsonl", "a")
            atexit.register(_file.close)
        _file.write(entry + "\n")
        _file.flush()

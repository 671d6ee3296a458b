"""The allow-list of ``weights_only`` loading: the globals a checkpoint may name by default, and
the ones the user adds (``add_safe_globals``, ``safe_globals``), as ``torch.serialization``.

An entry is an object, known by ``module.qualname`` (what pickle writes for it, whatever path
the user spelled it by), or a ``(object, "module.name")`` tuple naming it explicitly. The
user's entries are process-wide, as torch's; the ``safe_globals`` context manager adds its
entries for the ``with`` block and then removes those it added (the ones that were there before
it stay).
"""
from __future__ import annotations

import collections
import threading

from ..core.shape import Size
from ..runtime import dtype as dt
from ..runtime.device import device

_lock = threading.Lock()
_user: list = []  # in the order added; an entry is kept once


def _check(entry) -> None:
    if isinstance(entry, tuple):
        if len(entry) != 2:
            raise ValueError("Expected tuple of length 2 (global, str of callable full path), but got tuple of "
                             f"length: {len(entry)}")
        if type(entry[1]) is not str:
            raise TypeError(f"Expected second item in tuple to be str of callable full path, but got: "
                            f"{type(entry[1])}")
    elif not (hasattr(entry, "__module__") and hasattr(entry, "__qualname__")):
        raise TypeError(f"safe_globals: {entry!r} is neither a class or function (with __module__ and "
                        "__qualname__) nor a (global, 'module.name') tuple")


def _list(safe_globals, what: str) -> list:
    if not isinstance(safe_globals, (list, tuple, set)):
        raise TypeError(f"{what}: safe_globals must be a list of globals or (global, 'module.name') tuples, "
                        f"got {type(safe_globals).__name__}")
    entries = list(safe_globals)
    for e in entries:
        _check(e)
    return entries


def add_safe_globals(safe_globals: list) -> None:
    """Mark globals as safe for ``weights_only`` loading (``torch.serialization.add_safe_globals``).
    Each is a class or function, or a ``(obj, "module.name")`` tuple for one pickled under another
    name. Only add what you trust: loading an allowed class calls its ``__setstate__`` (or fills its
    ``__dict__``), an allowed function is called with the file's arguments."""
    entries = _list(safe_globals, "add_safe_globals")
    with _lock:
        for e in entries:
            if e not in _user:
                _user.append(e)


def get_safe_globals() -> list:
    """The user's safe globals, as ``torch.serialization.get_safe_globals``."""
    with _lock:
        return list(_user)


def clear_safe_globals() -> None:
    """Forget every user safe global (``torch.serialization.clear_safe_globals``)."""
    with _lock:
        _user.clear()


class safe_globals:
    """``with tritensor.serialization.safe_globals([MyClass]):`` allows the globals inside the
    block (``torch.serialization.safe_globals``); on exit it removes the entries it added."""

    def __init__(self, safe_globals: list):
        self.safe_globals = _list(safe_globals, "safe_globals")
        self._added: list = []

    def __enter__(self):
        with _lock:
            self._added = [e for e in self.safe_globals if e not in _user]
            _user.extend(self._added)
        return self

    def __exit__(self, *exc):
        with _lock:
            for e in self._added:
                if e in _user:
                    _user.remove(e)
        self._added = []
        return False


def user_names() -> dict:
    """``{"module.qualname": obj}`` for the user's entries."""
    out = {}
    for e in get_safe_globals():
        if isinstance(e, tuple):
            out[e[1]] = e[0]
        else:
            out[f"{e.__module__}.{e.__qualname__}"] = e
    return out


# ----- what every weights_only load allows -----------------------------------------------------
# Wrappers where the builtin would take more than a pickle needs: bytes come as
# _codecs.encode(text, "latin1") in protocol 2 (any other codec is refused: some compress), and
# bytearray from bytes or text (bytearray(10**12) would allocate a terabyte).

def _codecs_encode(obj, encoding="utf-8", errors="strict"):
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        raise ValueError(f"_codecs.encode: only text in latin1/utf-8/ascii may be encoded while loading, got "
                         f"{type(obj).__name__} in {encoding!r}")
    return obj.encode(encoding, errors)


def _bytearray(*args):
    if args and not isinstance(args[0], (bytes, str, list)):
        raise ValueError(f"bytearray: only bytes, text or a list of ints may make a bytearray while loading, "
                         f"got {type(args[0]).__name__}")
    return bytearray(*args)


def _dtype_by_name(name):
    if not isinstance(name, str) or name not in dt._NAMES:
        raise ValueError(f"the file names a dtype {name!r}, which tritensor does not have (it has "
                         f"{', '.join(d.name for d in dt.ALL)})")
    return dt._NAMES[name]


BUILTINS = {
    "collections.OrderedDict": collections.OrderedDict,
    "collections.Counter": collections.Counter,
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "builtins.bytearray": _bytearray,
    "builtins.complex": complex,
    "_codecs.encode": _codecs_encode,
}

# tritensor's own values as its pickler writes them (see objects.py: _Pickler.dispatch_table)
TRITENSOR = {
    f"{dt._by_name.__module__}._by_name": _dtype_by_name,
    f"{device.__module__}.device": device,
    f"{Size.__module__}.Size": Size,
}

"""``tritensor.save`` / ``tritensor.load`` (``torch.save`` / ``torch.load``) and
``tritensor.serialization``'s allow-list API (``add_safe_globals``, ``safe_globals`` ...).

What is saved, and how (``save``):

- plain data (tensors, NumPy arrays, numbers, strings, None, bools, dtypes, devices, and dicts,
  OrderedDicts, lists and tuples of them: state dicts, optimizer state dicts): tritensor's
  safetensors file with a JSON structure, which any safetensors tool reads and whose loading
  unpickles nothing (``safetensors_format.py``);
- anything else picklable (a whole ``nn.Module``, user classes): the same kind of file with a
  pickle stream beside the tensors' raw bytes (``objects.py``).

What loads (``load``), told apart by the file's first bytes: tritensor's files, any safetensors
file, and torch's files (its zip format and its legacy format, ``torch_files.py``), tensors
placed by ``map_location`` (``location.py``). A pickle is read as torch 2.6+ does: with
``weights_only=True`` (the default) only allow-listed globals load (``unpickler.py``,
``allowlist.py``); ``weights_only=False`` runs Python's unpickler, for trusted files only.
A file that is not what it claims raises :class:`CheckpointError` naming the file and the field.
"""
from __future__ import annotations

import os
import pickle

from . import objects, safetensors_format, torch_files
from .allowlist import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from .errors import Bad, CheckpointError
from .location import Storage, check_map_location
from .unpickler import MalformedPickle
from .safetensors_format import MAX_DEPTH

__all__ = ["save", "load", "add_safe_globals", "safe_globals", "get_safe_globals", "clear_safe_globals",
           "CheckpointError", "DEFAULT_PROTOCOL", "MAX_DEPTH", "Storage"]

DEFAULT_PROTOCOL = 2  # the pickle protocol of whole-object saves, as torch.serialization's

UNSAFE_MESSAGE = ("In PyTorch 2.6 the default value of the `weights_only` argument of `torch.load` changed from "
                  "`False` to `True`, and tritensor.load follows it. Re-running `tritensor.load` with `weights_only` "
                  "set to `False` will likely succeed, but it can result in arbitrary code execution. Do it only if "
                  "you got the file from a trusted source.")


def save(obj, f, pickle_module=pickle, pickle_protocol: int = DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False, *,
         metadata: dict | None = None) -> None:
    """Save ``obj`` to ``f``, a path (written atomically) or a binary file object, as ``torch.save``.

    A tensor, a state dict, an optimizer's state dict or any nesting of dicts, lists and tuples of
    tensors, arrays, numbers and strings is written as a safetensors file (its tensors under their
    names: ``fc.weight``) with the structure as JSON in its metadata; nothing is pickled. Anything
    else picklable (a whole model, user objects) is pickled, tensors kept out of the pickle as
    raw bytes; loading it back with the default ``weights_only=True`` needs its classes allowed
    (``safe_globals``).

    ``pickle_module``: the module whose ``Pickler`` pickles whole objects (``pickle``, or ``dill``
    ...). ``pickle_protocol``: that pickle's protocol (2, torch's default, to 5).
    ``_use_new_zipfile_serialization`` and ``_disable_byteorder_record``: accepted for torch's
    callers and ignored (the file is always tritensor's; it is little-endian).
    ``metadata``: extra ``{str: str}`` entries for the safetensors header.
    """
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError("save(): metadata must be a dict of str -> str")
    if not isinstance(f, (str, os.PathLike)) and not callable(getattr(f, "write", None)):
        raise TypeError(f"save(): f must be a path or a binary file object, got {type(f).__name__}")
    if type(pickle_protocol) is not int or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"save(): pickle_protocol must be an int from 2 to {pickle.HIGHEST_PROTOCOL}, got "
                         f"{pickle_protocol!r}")
    if not hasattr(pickle_module, "Pickler"):
        raise TypeError(f"save(): pickle_module must be a module with a Pickler class (pickle, dill ...), got "
                        f"{pickle_module!r}")
    try:
        structure, arrays = safetensors_format.encode(obj)
    except safetensors_format.NotPlain:
        arrays, meta = objects.save(obj, pickle_protocol, pickle_module)
        safetensors_format.write(f, arrays, {**(metadata or {}), **meta})
        return
    safetensors_format.save_plain(structure, arrays, f, metadata)


def _file_name(f) -> str:
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", None)
    return repr(name) if isinstance(name, (str, bytes)) else f"<{type(f).__name__}>"


def _weights_only_message(message: str, name: str) -> str:
    """torch's wrapping of a weights_only refusal, naming the file."""
    if "cannot rebuild without torch" in message:  # weights_only=False would not help
        return f"Weights only load failed for {name}. {message}"
    if "was not an allowed global by default" in message:
        return (f"Weights only load failed for {name}. This file can still be loaded, to do so you have two options, "
                f"do those steps only if you trust the source of the checkpoint.\n\t(1) {UNSAFE_MESSAGE}\n\t(2) "
                "Alternatively, to load with `weights_only=True` please check the recommended steps in the following "
                f"error message.\n\tWeightsUnpickler error: {message}")
    return f"Weights only load failed for {name}. {UNSAFE_MESSAGE}\n\nWeightsUnpickler error: {message}"


def load(f, map_location=None, pickle_module=None, *, weights_only: bool | None = None, mmap: bool | None = None,
         **pickle_load_args):
    """Load what :func:`save` wrote, any safetensors file (as a ``{name: Tensor}`` dict), or a file
    of ``torch.save`` (its zip format or its legacy one), as ``torch.load``.

    ``map_location``: where tensors go, as torch: ``None`` (each storage's saved device), a device
    or its name for all of them, a dict ``{saved: target}``, or a callable ``(storage, location)``
    returning a storage (``lambda storage, loc: storage`` keeps them on the CPU) or None.

    ``weights_only`` (default True, as torch >= 2.6): a pickle in the file may name only tensors,
    dtypes, devices, ``Size``, builtin containers and the globals allowed by
    :func:`add_safe_globals` / :func:`safe_globals`; anything else raises
    ``pickle.UnpicklingError`` naming it, and nothing in the file runs. ``weights_only=False``
    unpickles with Python's unpickler, which runs whatever the file names: **only for files from
    a trusted source**. (A file without a pickle, a state dict saved by tritensor, is the same
    either way.) ``pickle_module``: given, weights_only defaults to False, as torch.
    ``pickle_load_args``: ``encoding=`` for Python 2 strings (default utf-8).
    ``mmap``: accepted; the file is read into memory.

    A malformed file raises :class:`CheckpointError` naming the file and the field.
    """
    if weights_only is None:
        weights_only = pickle_module is None
    if type(weights_only) is not bool:
        raise TypeError(f"load(): weights_only must be a bool, got {type(weights_only).__name__}")
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    unknown = set(pickle_load_args) - {"encoding"}
    if unknown:
        raise TypeError(f"load(): unexpected keyword argument(s) {sorted(unknown)} (pickle_load_args takes encoding=)")
    encoding = pickle_load_args.get("encoding", "utf-8")
    if not isinstance(encoding, str):
        raise TypeError(f"load(): encoding must be a str, got {type(encoding).__name__}")
    check_map_location(map_location)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    elif callable(getattr(f, "read", None)):
        data = f.read()
    else:
        raise TypeError(f"load(): f must be a path or a binary file object, got {type(f).__name__}")
    name = _file_name(f)
    try:
        if torch_files.is_zip(data):
            return torch_files.load_zip(data, name, map_location, weights_only, encoding)
        if torch_files.is_legacy(data):
            return torch_files.load_legacy(data, name, map_location, weights_only, encoding)
        if torch_files.is_tar(data):
            raise Bad("a torch checkpoint in the tar format of torch < 0.4, which tritensor does not read")
        arrays, meta = safetensors_format.read(data)
        if objects.PICKLE in meta:
            return objects.load(arrays, meta, map_location, weights_only, encoding)
        return safetensors_format.load(arrays, meta, map_location)
    except (Bad, MalformedPickle) as e:
        raise CheckpointError(f"load(): {name} is not a safetensors file, or not a valid tritensor or torch "
                              f"checkpoint: {e}") from None
    except pickle.UnpicklingError as e:
        if not weights_only:
            raise
        raise pickle.UnpicklingError(_weights_only_message(str(e), name)) from None
    except (RecursionError, MemoryError, OverflowError) as e:
        raise CheckpointError(f"load(): {name} could not be read: {type(e).__name__}: {e}") from None

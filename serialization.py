"""``tritensor.save`` / ``tritensor.load``: checkpoints in a format that runs no code on load.

A checkpoint is one safetensors file: every tensor (and NumPy array) is stored as raw
little-endian bytes under a readable name (its path in the saved object, ``model.fc.weight``,
``optim.state.0.exp_avg``); the structure around them (nested dicts, lists, tuples, numbers,
strings, None, bools, dtypes, devices) is JSON in the file's metadata (``tritensor.structure``).
A ``{name: Tensor}`` state dict keeps its own names, so the file is an ordinary safetensors state
dict any tool reads. Loading parses JSON and copies bytes; nothing is unpickled, so a file from a
stranger cannot run code (``weights_only`` is accepted and changes nothing).

Saving to a path is atomic: the bytes go to a temporary file in the same directory
(``.<name>.<pid>.<hex>.tmp``), which is flushed, fsync'ed and renamed over the target (then the
directory is fsync'ed). A crash or kill mid-save leaves the previous checkpoint intact and its
temporary file behind; the next save to the same path removes the temporary files whose writer
is gone (:func:`_remove_stale_temps`), so a crash-looping job does not fill the disk.

Differences from ``torch.save``: arbitrary Python objects (pickled by torch) are refused with a
TypeError naming where they are; tensors that share storage are saved (and loaded) as separate
tensors unless they are the same object; NumPy scalars are saved as Python numbers.
"""
from __future__ import annotations

import collections
import fcntl
import json
import math
import os
import re
import secrets
import struct

import ml_dtypes
import numpy as np
from safetensors import TensorSpec, serialize, serialize_file

from .core.factories import tensor
from .core.tensor import Tensor
from .nn.parameter import Parameter
from .runtime import cuda
from .runtime import dtype as dt
from .runtime.device import device

_STRUCTURE = "tritensor.structure"
_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
              "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
              "U16": np.uint16, "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_}
_MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header


# ----- save -------------------------------------------------------------------------------------

class _Encoder:
    """Turns the object into JSON, collecting its tensors and arrays under unique names."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self.memo: dict[int, str] = {}  # id(tensor) -> name: the same object is saved once
        self.keep = []  # the objects behind memo's ids stay alive while we encode

    def _name(self, path: str) -> str:
        name, n = path or "tensor", 1
        while name in self.arrays:
            name, n = f"{path}#{n}", n + 1
        return name

    def array(self, a: np.ndarray, path: str) -> str:
        a = a if a.flags.c_contiguous else np.array(a, order="C")
        if a.dtype.newbyteorder("<") != a.dtype and a.dtype.byteorder not in ("=", "|"):
            a = a.astype(a.dtype.newbyteorder("<"))
        name = self._name(path)
        self.arrays[name] = a
        return name

    def encode(self, obj, path: str, where: str):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"$float": repr(obj)}
        if isinstance(obj, Tensor):
            if id(obj) not in self.memo:
                a = obj.detach().cpu().numpy()
                self.memo[id(obj)] = self.array(a, path)
                self.keep.append(obj)
            return {"$tensor": {"name": self.memo[id(obj)], "device": str(obj.device),
                                "requires_grad": bool(obj.requires_grad and obj.grad_fn is None),
                                "parameter": isinstance(obj, Parameter)}}
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind not in "fiub" and obj.dtype != ml_dtypes.bfloat16:
                raise TypeError(f"save(): cannot save a NumPy array of dtype {obj.dtype} at {where}")
            return {"$ndarray": self.array(obj, path)}
        if isinstance(obj, np.generic) and obj.dtype.kind in "fiub":
            return self.encode(obj.item(), path, where)
        if isinstance(obj, dt.dtype):
            return {"$dtype": obj.name}
        if isinstance(obj, device):
            return {"$device": str(obj)}
        if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
            return {"$tuple": [self.encode(v, f"{path}.{i}", f"{where}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return [self.encode(v, f"{path}.{i}", f"{where}[{i}]") for i, v in enumerate(obj)]
        if type(obj) in (dict, collections.OrderedDict):
            items = [(k, self.encode(v, f"{path}.{k}" if path else str(k), f"{where}[{k!r}]")) for k, v in obj.items()]
            if type(obj) is dict and all(isinstance(k, str) and not k.startswith("$") for k, _ in items):
                return dict(items)
            tag = "$odict" if type(obj) is collections.OrderedDict else "$items"
            return {tag: [[self.encode(k, "", f"a key of {where}"), v] for k, v in items]}
        raise TypeError(f"save(): cannot save a value of type {type(obj).__name__} at {where} (tritensor checkpoints "
                        "hold tensors, NumPy arrays, numbers, strings, None, bools, dtypes, devices and "
                        "dicts/lists/tuples of them; nothing is pickled)")


def save(obj, f, metadata: dict | None = None) -> None:
    """Save ``obj`` (a tensor, a state dict, an optimizer's state dict, nested dicts/lists/tuples of
    tensors, numbers, strings ...) to ``f``, a path (written atomically) or a binary file object.
    ``metadata``: extra ``{str: str}`` entries for the safetensors header."""
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError("save(): metadata must be a dict of str -> str")
    if not isinstance(f, (str, os.PathLike)) and not callable(getattr(f, "write", None)):
        raise TypeError(f"save(): f must be a path or a binary file object, got {type(f).__name__}")
    enc = _Encoder()
    structure = enc.encode(obj, "", "obj")
    meta = {**(metadata or {}), "format": "tritensor",
            _STRUCTURE: json.dumps(structure, allow_nan=False, separators=(",", ":"))}
    # safetensors reads the arrays through these pointers: enc.arrays keeps them alive meanwhile
    specs = {k: TensorSpec(dtype=a.dtype.name, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
             for k, a in enc.arrays.items()}
    if isinstance(f, (str, os.PathLike)):
        _atomic_write(os.fspath(f), specs, meta)
    else:
        f.write(bytes(serialize(specs, metadata=meta)))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's process
        return True
    return True


def _remove_stale_temps(directory: str, base: str) -> None:
    """Remove the temporary files of earlier saves to ``base`` whose writer is gone: its pid (in
    the name) is not a live process here, and nobody holds the lock a writer keeps on its file
    until the rename (which also keeps a writer on another host of a shared file system safe).
    Best effort: anything that cannot be checked or removed is left alone."""
    pattern = re.compile(re.escape(f".{base}.") + r"(\d+)\.[0-9a-f]{8}\.tmp")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or int(m.group(1)) in (0, os.getpid()) or _pid_alive(int(m.group(1))):
            continue
        full = os.path.join(directory, name)
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(full)
        except OSError:  # locked by a live writer (elsewhere), or not ours to remove
            pass
        finally:
            os.close(fd)


def _atomic_write(path: str, specs: dict, meta: dict) -> None:
    """Write to a temporary file beside ``path``, fsync it, rename it over ``path``, fsync the
    directory: readers (and a crash) see the old file or the new one, never half of one. The
    temporary file is locked (flock) until the rename, which tells later saves it is in use."""
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    _remove_stale_temps(directory, base)
    tmp = os.path.join(directory, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    lock = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 & ~umask, as open() would
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        serialize_file(specs, tmp, metadata=meta)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        os.close(lock)
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:  # a directory that cannot be opened (some platforms): the rename is done anyway
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# ----- load -------------------------------------------------------------------------------------

def _bad(why: str):
    return RuntimeError(f"load(): not a safetensors file, or not a valid tritensor checkpoint ({why})")


def _read(f) -> tuple[dict, dict]:
    """Parse and check a safetensors file: ``({name: np.ndarray}, metadata)``. Offsets, shapes and
    dtypes are validated before any array is made."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    elif callable(getattr(f, "read", None)):
        data = f.read()
    else:
        raise TypeError(f"load(): f must be a path or a binary file object, got {type(f).__name__}")
    if len(data) < 8:
        raise _bad("too short")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(_MAX_HEADER, len(data) - 8):
        raise _bad(f"header length {n} exceeds the file")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        raise _bad(f"bad header: {e}") from None
    if not isinstance(header, dict):
        raise _bad("the header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    body = memoryview(data)[8 + n:]
    arrays = {}
    for name, info in header.items():
        try:
            npd = np.dtype(_ST_DTYPES[info["dtype"]])
            shape = tuple(int(s) for s in info["shape"])
            start, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise _bad(f"entry {name!r} has a bad dtype, shape or offsets") from None
        if min(shape, default=0) < 0 or not 0 <= start <= end <= len(body) or \
                end - start != math.prod(shape) * npd.itemsize:
            raise _bad(f"entry {name!r}: its shape and offsets do not match the data")
        arrays[name] = np.frombuffer(body[start:end], dtype=npd).reshape(shape)
    return arrays, meta


def _target(saved: str, map_location):
    """Where a tensor saved on ``saved`` goes (torch's map_location rules: None, a device, a dict)."""
    if map_location is None:
        loc = saved
    elif isinstance(map_location, (str, device)):
        loc = str(map_location)
    elif isinstance(map_location, dict):
        loc = str(map_location.get(saved, saved))
    else:
        raise TypeError(f"load(): map_location must be None, a str, a device or a dict, got "
                        f"{type(map_location).__name__}")
    dev = device(loc)
    if dev.type == "cuda" and not cuda.is_available():
        raise RuntimeError("Attempting to deserialize object on a CUDA device but tritensor.cuda.is_available() is "
                           "False. If you are running on a CPU-only machine, please use tritensor.load with "
                           "map_location=tritensor.device('cpu') to map your storages to the CPU.")
    return dev


def _to_tensor(a: np.ndarray, dev) -> Tensor:
    t = tensor(a)  # a copy into aligned, writable memory of our own
    return t if dev.type == "cpu" else t.to(dev)


class _Decoder:
    def __init__(self, arrays, map_location):
        self.arrays, self.map_location, self.made = arrays, map_location, {}

    def decode(self, node):
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (tag, val), = node.items()
            if tag == "$tensor":
                name = val["name"]
                if name not in self.made:
                    if name not in self.arrays:
                        raise _bad(f"the structure names a tensor {name!r} the file does not hold")
                    t = _to_tensor(self.arrays[name], _target(val["device"], self.map_location))
                    if val.get("parameter"):
                        t = Parameter(t, requires_grad=bool(val.get("requires_grad")))
                    elif val.get("requires_grad"):
                        t.requires_grad_(True)
                    self.made[name] = t
                return self.made[name]
            if tag == "$ndarray":
                return np.array(self.arrays[val])
            if tag == "$tuple":
                return tuple(self.decode(v) for v in val)
            if tag == "$items":
                return {self.decode(k): self.decode(v) for k, v in val}
            if tag == "$odict":
                return collections.OrderedDict((self.decode(k), self.decode(v)) for k, v in val)
            if tag == "$float":
                return float(val)
            if tag == "$dtype":
                return dt._by_name(val)
            if tag == "$device":
                return device(val)
            if tag.startswith("$"):
                raise _bad(f"unknown tag {tag!r} in the structure")
        return {k: self.decode(v) for k, v in node.items()}


def load(f, map_location=None, weights_only: bool = True, *, mmap=None):
    """Load what :func:`save` wrote (or any safetensors file, as a ``{name: Tensor}`` dict).
    ``map_location``: ``None`` (each tensor's saved device), a device for all of them, or a dict
    ``{saved: target}``. Nothing is unpickled, whatever ``weights_only`` says."""
    arrays, meta = _read(f)
    if _STRUCTURE not in meta:  # a plain safetensors file (or one saved before the structure existed)
        out = {}
        for k, a in arrays.items():
            if meta.get(f"__dtype__.{k}") == "bfloat16" and a.dtype == np.uint16:
                a = a.view(ml_dtypes.bfloat16)
            out[k] = _to_tensor(a, _target("cpu", map_location))
        return out
    try:
        structure = json.loads(meta[_STRUCTURE])
    except ValueError as e:
        raise _bad(f"bad structure: {e}") from None
    return _Decoder(arrays, map_location).decode(structure)

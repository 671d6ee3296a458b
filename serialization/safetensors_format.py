"""tritensor's own checkpoint format: one safetensors file, no pickle for plain data.

Every tensor (and NumPy array) is stored as raw little-endian bytes under a readable name (its
path in the saved object, ``model.fc.weight``, ``optim.state.0.exp_avg``); the structure around
them (nested dicts, lists, tuples, numbers, strings, None, bools, dtypes, devices) is JSON in the
file's metadata (``tritensor.structure``). A ``{name: Tensor}`` state dict keeps its own names, so
the file is an ordinary safetensors state dict any tool reads. Loading such a file parses JSON and
copies bytes; nothing is unpickled. (Objects beyond that, a whole ``nn.Module`` say, are pickled
into the same kind of file by ``objects.py``.)

Saving to a path is atomic: the bytes go to a temporary file in the same directory
(``.<name>.<pid>.<hex>.tmp``), which is flushed, fsync'ed and renamed over the target (then the
directory is fsync'ed). A crash or kill mid-save leaves the previous checkpoint intact and its
temporary file behind; the next save to the same path removes the temporary files whose writer
is gone (:func:`_remove_stale_temps`), so a crash-looping job does not fill the disk.

Loading trusts nothing in the file: the header and the structure are checked field by field
(JSON nesting is measured before it is parsed, at most :data:`MAX_DEPTH` levels; shapes and
offsets are integers matching the data; bools are 0 or 1; tags, dtypes, devices and array
names are known), and anything malformed raises :class:`CheckpointError` naming the file and
the field.
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

from ..core.factories import tensor
from ..core.shape import contiguous_strides
from ..core.tensor import Tensor
from ..nn.parameter import Parameter
from ..runtime import dtype as dt
from ..runtime.device import device
from .errors import Bad as _Bad
from .errors import CheckpointError  # noqa: F401  (re-exported)
from .errors import count as _count
from .location import Storage, restore, tensor_over

_STRUCTURE = "tritensor.structure"
_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
              "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
              "U16": np.uint16, "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_,
              # safetensors' names of the float8 formats (those its writer gives ml_dtypes' types, as torch's)
              "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2,
              "F8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz, "F8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
              "F8_E8M0": ml_dtypes.float8_e8m0fnu}
_MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header
_TENSOR_DTYPES = {d.np for d in dt.ALL}
MAX_DEPTH = 128  # JSON nesting levels load() reads (and save() writes), in the header and the structure


# ----- save -------------------------------------------------------------------------------------

class NotPlain(TypeError):
    """The object holds a value the JSON structure cannot: it is pickled instead (objects.py)."""


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

    def encode(self, obj, path: str, where: str, level: int = 1):
        """The JSON of ``obj``; ``level``: the JSON nesting level a container here would sit at
        (what load() bounds by MAX_DEPTH, so nothing is saved that cannot be loaded)."""
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"$float": repr(obj)}
        if level + 1 > MAX_DEPTH:  # every other value is a container, and a tagged one takes two levels
            raise ValueError(f"save(): {where} is nested deeper than {MAX_DEPTH} levels, which load() refuses "
                             "(does a container hold itself?)")
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
                raise NotPlain(f"save(): cannot save a NumPy array of dtype {obj.dtype} at {where}")
            return {"$ndarray": self.array(obj, path)}
        if isinstance(obj, np.generic) and obj.dtype.kind in "fiub":
            return self.encode(obj.item(), path, where, level)
        if isinstance(obj, dt.dtype):
            return {"$dtype": obj.name}
        if isinstance(obj, device):
            return {"$device": str(obj)}
        if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
            return {"$tuple": [self.encode(v, f"{path}.{i}", f"{where}[{i}]", level + 2) for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return [self.encode(v, f"{path}.{i}", f"{where}[{i}]", level + 1) for i, v in enumerate(obj)]
        if type(obj) in (dict, collections.OrderedDict):
            plain = type(obj) is dict and all(isinstance(k, str) and not k.startswith("$") for k in obj)
            inner = level + 1 if plain else level + 3  # {"$items": [[key, value], ...]}
            items = [(k, self.encode(v, f"{path}.{k}" if path else str(k), f"{where}[{k!r}]", inner))
                     for k, v in obj.items()]
            if plain:
                return dict(items)
            tag = "$odict" if type(obj) is collections.OrderedDict else "$items"
            return {tag: [[self.encode(k, "", f"a key of {where}", inner), v] for k, v in items]}
        raise NotPlain(f"save(): {where} is a {type(obj).__name__}, which the JSON structure does not hold")


_SCALARS = (type(None), bool, str, int, float, dt.dtype, device)


def _plain_leaf(obj) -> bool:
    if isinstance(obj, _SCALARS) or isinstance(obj, Tensor):
        return True
    if isinstance(obj, np.ndarray):
        return obj.dtype.kind in "fiub" or obj.dtype == ml_dtypes.bfloat16
    return isinstance(obj, np.generic) and obj.dtype.kind in "fiub"


def _plain(obj) -> bool:
    """Whether the JSON structure holds ``obj``: a walk over its containers that copies no tensor
    (the encoder copies each as it goes). Past MAX_DEPTH the walk stops and says yes: the encoder
    then refuses the nesting with its own error."""
    todo = [(obj, 1)]
    while todo:
        node, level = todo.pop()
        if _plain_leaf(node):
            continue
        if level > MAX_DEPTH:
            return True
        if (isinstance(node, tuple) and not hasattr(node, "_fields")) or isinstance(node, list):
            todo.extend((v, level + 1) for v in node)
        elif type(node) in (dict, collections.OrderedDict):
            todo.extend((k, level + 1) for k in node)
            todo.extend((v, level + 1) for v in node.values())
        else:
            return False
    return True


def encode(obj) -> tuple[str, dict]:
    """``obj`` as (structure JSON, ``{name: array}``); NotPlain if it holds anything else."""
    if not _plain(obj):
        raise NotPlain(f"save(): a {type(obj).__name__} holding values the JSON structure does not hold")
    enc = _Encoder()
    structure = enc.encode(obj, "", "obj")
    return json.dumps(structure, allow_nan=False, separators=(",", ":")), enc.arrays


def save_plain(structure: str, arrays: dict, f, metadata: dict | None) -> None:
    """Write a file of tensors only: ``arrays`` and the user's ``metadata``, with tritensor's format marker and
    ``structure`` (how the arrays nest) in the metadata."""
    write(f, arrays, {**(metadata or {}), "format": "tritensor", _STRUCTURE: structure})


def write(f, arrays: dict, meta: dict) -> None:
    """The safetensors file of ``arrays`` (C-contiguous, little-endian) and ``meta`` to ``f``: a
    path (written atomically) or a binary file object."""
    # safetensors reads the arrays through these pointers: ``arrays`` keeps them alive meanwhile
    specs = {k: TensorSpec(dtype=a.dtype.name, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
             for k, a in arrays.items()}
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

_NOT_MARKS = bytes(b for b in range(256) if b not in b'"[]{}')


def _json_depth(raw: bytes) -> int:
    """How deep ``[`` and ``{`` nest in JSON text outside its strings, in linear time and without
    recursion, so a hostile file never reaches the parser's recursion. Escaped backslashes, then
    escaped quotes, are dropped first (an escaped quote ends no string); in text the parser
    rejects, at least the part it would read before rejecting it is measured right."""
    text = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = np.frombuffer(text.translate(None, _NOT_MARKS), np.uint8)
    depth = deepest = inside = 0
    for i in range(0, marks.size, 1 << 22):  # bounded working memory for a 100 MB header
        m = marks[i:i + (1 << 22)]
        quotes = np.cumsum(m == ord('"'), dtype=np.int64) + inside
        outside = (quotes & 1) == 0
        step = (outside & ((m == ord("[")) | (m == ord("{")))).astype(np.int8) - \
            (outside & ((m == ord("]")) | (m == ord("}")))).astype(np.int8)
        levels = np.cumsum(step, dtype=np.int64) + depth
        deepest, depth, inside = max(deepest, int(levels.max())), int(levels[-1]), int(quotes[-1]) & 1
    return deepest


def _json(raw: bytes, what: str):
    if _json_depth(raw) > MAX_DEPTH:
        raise _Bad(f"the {what} is nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:  # RecursionError: a lowered recursion limit
        raise _Bad(f"the {what} is not valid JSON: {e}") from None


def _entry(name: str, info, body: memoryview) -> np.ndarray:
    """One tensor of the safetensors header, checked field by field before any array is made."""
    where = f"header entry {name!r}"
    if not isinstance(info, dict):
        raise _Bad(f"{where} is a {type(info).__name__}, expected an object with dtype, shape and data_offsets")
    if not isinstance(info.get("dtype"), str) or info["dtype"] not in _ST_DTYPES:
        raise _Bad(f"{where} has a bad dtype, shape or offsets: dtype {info.get('dtype')!r} is not one of "
                   f"{sorted(_ST_DTYPES)}")
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or not isinstance(offsets, list) or len(offsets) != 2:
        raise _Bad(f"{where} has a bad dtype, shape or offsets: expected a shape list and two data_offsets")
    shape = tuple(_count(s, f"{where}: shape[{i}]") for i, s in enumerate(shape))
    start, end = (_count(o, f"{where}: data_offsets[{i}]") for i, o in enumerate(offsets))
    npd = np.dtype(_ST_DTYPES[info["dtype"]])
    if not start <= end <= len(body) or end - start != math.prod(shape) * npd.itemsize:
        raise _Bad(f"{where}: its shape and offsets do not match the data (shape {list(shape)}, "
                   f"data_offsets [{start}, {end}], {len(body)} bytes of data)")
    raw = body[start:end]
    if npd == np.bool_ and np.frombuffer(raw, np.uint8).max(initial=0) > 1:
        raise _Bad(f"{where}: a bool tensor holds bytes other than 0 or 1")
    return np.frombuffer(raw, dtype=npd).reshape(shape)


def read(data: bytes) -> tuple[dict, dict]:
    """Parse and check a safetensors file: ``({name: np.ndarray}, metadata)``."""
    if len(data) < 8:
        raise _Bad(f"too short ({len(data)} bytes) for a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(_MAX_HEADER, len(data) - 8):
        raise _Bad(f"header length {n} exceeds the file or the {_MAX_HEADER}-byte limit")
    header = _json(data[8:8 + n], "header")
    if not isinstance(header, dict):
        raise _Bad(f"the header is a {type(header).__name__}, not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _Bad("__metadata__ must be an object of strings (safetensors' format)")
    body = memoryview(data)[8 + n:]
    return {name: _entry(name, info, body) for name, info in header.items()}, meta


def to_tensor(a: np.ndarray, saved: str, map_location, where: str) -> Tensor:
    """A tensor of the host array ``a`` where ``map_location`` puts a storage saved on ``saved``."""
    if a.dtype not in _TENSOR_DTYPES:
        raise _Bad(f"{where}: a tensor of dtype {a.dtype.name}, which tritensor has not (save it as an array)")
    flat = tensor(a.reshape(-1), device="cpu")  # a copy into aligned, writable host memory of our own
    storage = restore(Storage(flat), saved, map_location)
    return tensor_over(storage, flat.dtype, a.shape, contiguous_strides(a.shape), 0)


def _field(val: dict, key: str, types, where: str, default=None):
    v = val.get(key, default)
    if not isinstance(v, types):
        raise _Bad(f"{where}.{key} is {v!r}, expected {' or '.join(t.__name__ for t in types)}")
    return v


class _Decoder:
    """Turns the structure JSON back into objects, checking every node; ``where`` is the path of
    the node (``structure['model']['fc.weight']``) that an error names."""

    def __init__(self, arrays, map_location):
        self.arrays, self.map_location, self.made = arrays, map_location, {}

    def decode(self, node, where: str):
        if isinstance(node, list):
            return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(node)]
        if not isinstance(node, dict):
            return node
        tags = [k for k in node if k.startswith("$")]
        if not tags:
            return {k: self.decode(v, f"{where}[{k!r}]") for k, v in node.items()}
        if len(node) != 1:
            raise _Bad(f"{where}: the tag {tags[0]} stands among other keys {sorted(node)[:4]}")
        (tag, val), = node.items()
        where = f"{where}.{tag}"
        if tag in ("$tuple", "$items", "$odict") and not isinstance(val, list):
            raise _Bad(f"{where} is a {type(val).__name__}, expected a list")
        if tag == "$tensor":
            return self.tensor(val, where)
        if tag == "$ndarray":
            if not isinstance(val, str) or val not in self.arrays:
                raise _Bad(f"{where} names an array {val!r} the file does not hold")
            return np.array(self.arrays[val])
        if tag == "$tuple":
            return tuple(self.decode(v, f"{where}[{i}]") for i, v in enumerate(val))
        if tag in ("$items", "$odict"):
            return (dict if tag == "$items" else collections.OrderedDict)(self.items(val, where))
        if tag in ("$float", "$dtype", "$device") and not isinstance(val, str):
            raise _Bad(f"{where} is {val!r}, expected a string")
        try:
            if tag == "$float":
                return float(val)
            if tag == "$dtype":
                return dt._by_name(val)
            if tag == "$device":
                return device(val)
        except (ValueError, KeyError, TypeError):
            raise _Bad(f"{where}: {val!r} is not a {tag[1:]}") from None
        raise _Bad(f"{where}: unknown tag {tag!r} in the structure")

    def items(self, pairs, where):
        out = []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, list) or len(pair) != 2:
                raise _Bad(f"{where}[{i}] is {pair!r}, expected a [key, value] pair")
            key = self.decode(pair[0], f"{where}[{i}] (key)")
            try:
                hash(key)
            except TypeError:
                raise _Bad(f"{where}[{i}]: the key {key!r} is unhashable") from None
            out.append((key, self.decode(pair[1], f"{where}[{key!r}]")))
        return out

    def tensor(self, val, where):
        if not isinstance(val, dict):
            raise _Bad(f"{where} is a {type(val).__name__}, expected an object with name and device")
        name = _field(val, "name", (str,), where)
        saved = _field(val, "device", (str,), where)
        requires_grad = _field(val, "requires_grad", (bool,), where, False)
        parameter = _field(val, "parameter", (bool,), where, False)
        if name not in self.arrays:
            raise _Bad(f"{where}: the structure names a tensor {name!r} the file does not hold")
        floating = self.arrays[name].dtype.kind == "f" or self.arrays[name].dtype == ml_dtypes.bfloat16
        if requires_grad and not floating:
            raise _Bad(f"{where}.requires_grad: a tensor of dtype {self.arrays[name].dtype.name} cannot require grad")
        try:
            device(saved)
        except (ValueError, TypeError):
            raise _Bad(f"{where}.device: {saved!r} is not a device") from None
        if name not in self.made:
            t = to_tensor(self.arrays[name], saved, self.map_location, where)
            if parameter:
                t = Parameter(t, requires_grad=requires_grad)
            elif requires_grad:
                t.requires_grad_(True)
            self.made[name] = t
        return self.made[name]


def load(arrays: dict, meta: dict, map_location):
    """What a safetensors file holds: tritensor's structure, or a plain ``{name: Tensor}`` dict."""
    if _STRUCTURE not in meta:  # a plain safetensors file (or one saved before the structure existed)
        out = {}
        for k, a in arrays.items():
            if meta.get(f"__dtype__.{k}") == "bfloat16" and a.dtype == np.uint16:
                a = a.view(ml_dtypes.bfloat16)
            out[k] = to_tensor(a, "cpu", map_location, f"header entry {k!r}")
        return out
    structure = _json(meta[_STRUCTURE].encode("utf-8", "surrogatepass"), f"structure ({_STRUCTURE})")
    return _Decoder(arrays, map_location).decode(structure, "structure")

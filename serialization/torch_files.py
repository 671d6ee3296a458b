"""Reading torch's checkpoint files without torch: ``tritensor.load("model.pt")``.

Two formats, both a pickle whose tensors are persistent ids naming raw storages:

- the zip format (torch >= 1.6): ``<archive>/data.pkl``, the storages as ``<archive>/data/<key>``,
  ``<archive>/byteorder``, ``<archive>/version``;
- the legacy format (``_use_new_zipfile_serialization=False``, torch < 1.6): pickles of a magic
  number, a protocol version and system info, then the object pickle, then a pickled list of
  storage keys, then each storage as an int64 element count and its bytes.

The pickle names torch's globals (``torch._utils._rebuild_tensor_v2``, ``torch.FloatStorage``,
``torch.float16``, ``torch.Size``, ``torch.device`` ...); :data:`TORCH_NAMES` maps them to
tritensor's and nothing else of torch's: a file that pickled a whole ``torch.nn`` module names
torch classes, which tritensor cannot rebuild, and gets an error saying so (with any
``weights_only``). The dtypes are those of ``runtime/dtype.py``'s table; data of a dtype tritensor
has not is refused naming it. Archive members are only read, never extracted; their names, sizes
and every storage's size are checked before a byte of them is read.
"""
from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile

import ml_dtypes
import numpy as np

from ..core.factories import tensor
from ..core.shape import Size
from ..core.tensor import Tensor
from ..nn.parameter import Parameter
from ..runtime import dtype as dt
from ..runtime.device import device
from . import allowlist, unpickler
from .errors import Bad, check_view, count
from .location import PASSTHROUGH, Storage, restore, tensor_over

# torch's dtypes and the legacy storage classes that stand for them in a file
TORCH_DTYPES = {  # torch name -> (NumPy dtype, legacy storage class)
    "float32": (np.float32, "FloatStorage"), "float64": (np.float64, "DoubleStorage"),
    "float16": (np.float16, "HalfStorage"), "bfloat16": (ml_dtypes.bfloat16, "BFloat16Storage"),
    "int64": (np.int64, "LongStorage"), "int32": (np.int32, "IntStorage"), "int16": (np.int16, "ShortStorage"),
    "int8": (np.int8, "CharStorage"), "uint8": (np.uint8, "ByteStorage"), "bool": (np.bool_, "BoolStorage"),
    "complex64": (np.complex64, "ComplexFloatStorage"), "complex128": (np.complex128, "ComplexDoubleStorage"),
    "uint16": (np.uint16, None), "uint32": (np.uint32, None), "uint64": (np.uint64, None),
    "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, None), "float8_e5m2": (ml_dtypes.float8_e5m2, None),
    "float8_e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, None), "float8_e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, None),
    "float8_e8m0fnu": (ml_dtypes.float8_e8m0fnu, None),
    "qint8": (None, "QInt8Storage"), "quint8": (None, "QUInt8Storage"), "qint32": (None, "QInt32Storage"),
}
MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
_LEGACY_PREFIX = b"\x80\x02\x8a\x0a" + MAGIC_NUMBER.to_bytes(10, "little")
MAX_MEMBERS = 1 << 20  # zip entries an archive may list
MAX_PICKLE = 1 << 30  # bytes of data.pkl
MAX_RATIO = 1000  # a member may inflate this much at most (zip bomb); torch stores members uncompressed


def _have(name: str):
    return next((d for d in dt.ALL if d.name == name), None)


def _missing(name: str) -> str:
    return (f"the file holds data of dtype torch.{name}, which tritensor does not have (it has "
            f"{', '.join(d.name for d in dt.ALL)})")


class _StorageType:
    """A storage class a file names (``torch.FloatStorage``): the dtype of its elements."""

    def __init__(self, dtype_name: str | None):  # None: torch.UntypedStorage (bytes)
        self.dtype_name = dtype_name

    def __repr__(self) -> str:
        return f"StorageType(dtype=torch.{self.dtype_name or 'uint8'})"


class _TorchStorage:
    """A storage of the file: its bytes, read when a tensor first needs them, restored once per
    dtype viewing it (``map_location``)."""

    def __init__(self, reader, key: str, dtype_name: str | None, location: str, nbytes: int):
        self.reader, self.key, self.dtype_name, self.location, self.nbytes = reader, key, dtype_name, location, nbytes
        self.restored: dict[str, Storage] = {}

    def as_dtype(self, dtype_) -> Storage:
        if dtype_.name not in self.restored:
            npd = np.dtype(dtype_.np)
            if self.nbytes % npd.itemsize:
                raise Bad(f"storage {self.key!r} of {self.nbytes} bytes is not a whole number of {dtype_.name} elements")
            data = self.reader.storage_bytes(self)  # None: the bytes come later (legacy format)
            a = np.zeros(self.nbytes // npd.itemsize, npd) if data is None else self.reader.array(data, npd, self.key)
            storage = restore(Storage(tensor(a, device="cpu")), self.location, self.reader.map_location)
            if data is None:
                self.reader.pending.append((self, dtype_, storage))
            self.restored[dtype_.name] = storage
        return self.restored[dtype_.name]


class StorageRef:
    """What a storage's persistent id loads as: the file's storage seen as one storage class (a
    bare storage saved by torch loads as this; tensors are made over it)."""

    __slots__ = ("rec", "dtype_name")

    def __init__(self, rec: _TorchStorage, dtype_name: str | None):
        self.rec, self.dtype_name = rec, dtype_name

    def __repr__(self) -> str:
        return f"<torch storage {self.rec.key!r}: {self.rec.nbytes} bytes of {self.dtype_name or 'uint8'}>"


def _storage_of(storage, where: str):
    if isinstance(storage, StorageRef):
        return storage.rec, storage.dtype_name
    raise Bad(f"{where}: the storage argument is a {type(storage).__name__}, not a storage of the file")


def _tensor(rec: _TorchStorage, offset, size, stride, dtype_, where: str) -> Tensor:
    storage = rec.as_dtype(dtype_)
    shape, stride, offset = check_view(size, stride, offset, storage.nbytes() // dtype_.itemsize, where)
    return tensor_over(storage, dtype_, shape, stride, offset)


def _grad(t: Tensor, requires_grad, where: str) -> Tensor:
    if type(requires_grad) is not bool:
        raise Bad(f"{where}: requires_grad is {requires_grad!r}, not a bool")
    if requires_grad:
        if not t.dtype.is_floating_point:
            raise Bad(f"{where}: a tensor of dtype {t.dtype.name} cannot require grad")
        t.requires_grad_(True)
    return t


def _hooks(hooks, where: str) -> None:
    if hooks is not None and not (type(hooks) in (dict, collections.OrderedDict) and not hooks):
        raise Bad(f"{where}: backward hooks were saved, which a file cannot hold (torch drops them too)")


def _metadata(metadata, where: str) -> None:
    """torch's per-tensor flags (a negative or conjugate view): refused, not silently dropped."""
    if metadata is None or (type(metadata) is dict and not any(v is not False for v in metadata.values())):
        return
    raise Bad(f"{where}: the tensor was saved with flags {sorted(map(str, metadata)) if isinstance(metadata, dict) else metadata!r} "
              "(a negative or conjugate view), which tritensor's tensors do not have: save t.resolve_neg() / "
              "t.resolve_conj() instead")


def _rebuild_tensor(storage, storage_offset, size, stride):
    rec, dtype_name = _storage_of(storage, "_rebuild_tensor")
    return _tensor(rec, storage_offset, size, stride, _typed(dtype_name, rec), "_rebuild_tensor")


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    rec, dtype_name = _storage_of(storage, "_rebuild_tensor_v2")
    _hooks(backward_hooks, "_rebuild_tensor_v2")
    _metadata(metadata, "_rebuild_tensor_v2")
    t = _tensor(rec, storage_offset, size, stride, _typed(dtype_name, rec), "_rebuild_tensor_v2")
    return _grad(t, requires_grad, "_rebuild_tensor_v2")


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype_, metadata=None):
    rec, _ = _storage_of(storage, "_rebuild_tensor_v3")
    _hooks(backward_hooks, "_rebuild_tensor_v3")
    _metadata(metadata, "_rebuild_tensor_v3")
    if not isinstance(dtype_, dt.dtype):
        raise Bad(f"_rebuild_tensor_v3: dtype is {dtype_!r}, not a dtype")
    t = _tensor(rec, storage_offset, size, stride, dtype_, "_rebuild_tensor_v3")
    return _grad(t, requires_grad, "_rebuild_tensor_v3")


def _typed(dtype_name, rec) -> dt.dtype:
    if dtype_name is None:
        raise Bad(f"storage {rec.key!r} is untyped bytes, which only _rebuild_tensor_v3 (with a dtype) can view")
    return _have(dtype_name)


def _nonempty(state) -> bool:
    """Whether a saved object state holds anything (without asking a tensor for its truth)."""
    return state is not None and not (type(state) in (dict, collections.OrderedDict, tuple) and not state)


def _rebuild_parameter(data, requires_grad, backward_hooks):
    if not isinstance(data, Tensor) or type(requires_grad) is not bool:
        raise Bad("_rebuild_parameter: expected a tensor and a bool")
    _hooks(backward_hooks, "_rebuild_parameter")
    return Parameter(data, requires_grad=requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    if _nonempty(state):
        names = sorted(map(str, state)) if isinstance(state, dict) else type(state).__name__
        raise Bad(f"_rebuild_parameter_with_state: the Parameter was saved with attributes {names!r}; "
                  "tritensor's Parameter holds no attributes of its own")
    return _rebuild_parameter(data, requires_grad, backward_hooks)


def _rebuild_from_type_v2(func, new_type, args, state):
    if not any(func is f for f in (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter)) or \
            not isinstance(args, tuple):
        raise Bad(f"_rebuild_from_type_v2: {func!r} is not one of torch's tensor rebuild functions")
    t = func(*args)
    if (new_type is not Tensor and new_type is not Parameter) or _nonempty(state):
        raise Bad("_rebuild_from_type_v2: a tensor subclass, or a tensor with attributes, which tritensor "
                  "cannot rebuild")
    return t if new_type is Tensor or isinstance(t, Parameter) else Parameter(t, requires_grad=t.requires_grad)


def _torch_device(type_or_str, index=None):
    try:
        return device(type_or_str, index)
    except (TypeError, ValueError) as e:
        raise Bad(f"torch.device({type_or_str!r}, {index!r}): {e}") from None


def torch_names() -> dict:
    """torch's globals a file may name -> tritensor's (dtypes tritensor has not map to nothing)."""
    names = {f"torch._utils.{f.__name__}": f for f in
             (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter,
              _rebuild_parameter_with_state)}
    names["torch._tensor._rebuild_from_type_v2"] = _rebuild_from_type_v2
    names.update({"torch.Size": Size, "torch.device": _torch_device, "torch.Tensor": Tensor,
                  "torch.nn.parameter.Parameter": Parameter,
                  "torch.storage.UntypedStorage": _StorageType(None), "torch.UntypedStorage": _StorageType(None)})
    for name, (_, storage_class) in TORCH_DTYPES.items():
        if _have(name) is not None:
            names[f"torch.{name}"] = _have(name)
            if storage_class is not None:
                names[f"torch.{storage_class}"] = _StorageType(name)
    return names


def refused() -> dict:
    """torch's names of dtypes tritensor has not (and their storage classes) -> the error."""
    out = {}
    for name, (_, storage_class) in TORCH_DTYPES.items():
        if _have(name) is None:
            out[f"torch.{name}"] = _missing(name)
            if storage_class is not None:
                out[f"torch.{storage_class}"] = _missing(name)
    return out


def _hint(full_path: str):
    """The sentence added to an unsupported-global error about one of torch's names."""
    name = full_path.rsplit(".", 1)[-1]
    if full_path.startswith("torch."):
        return (f"{name} is a class or function of torch's, which tritensor cannot rebuild without torch (a whole "
                "module saved by torch.save(model) names torch.nn's classes): save model.state_dict() with torch "
                "and load that into the tritensor model.")
    return None


class _Reader:
    """One torch file being read: persistent ids -> storages, their bytes checked and read."""

    def __init__(self, name: str, map_location, little_endian: bool = True):
        self.name, self.map_location, self.little = name, map_location, little_endian
        self.storages: dict[str, _TorchStorage] = {}
        self.pending: list = []  # legacy: (storage, dtype, restored) filled once the bytes are read

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid:
            raise pickle.UnpicklingError(f"persistent_load id must be tuple or int, but got {type(pid)}")
        kind = pid[0].decode("ascii", "replace") if isinstance(pid[0], bytes) else pid[0]
        if not isinstance(kind, str) or kind != "storage":
            raise pickle.UnpicklingError(f"Only persistent_load of storage is allowed, but got {kind!r}")
        if len(pid) not in (5, 6):
            raise Bad(f"storage record {str(pid)[:120]} has {len(pid)} fields, expected 5")
        storage_type, key, location, numel = pid[1:5]
        if len(pid) == 6 and pid[5] is not None:
            raise Bad(f"storage {key!r} is a view of another storage (torch < 1.0), which tritensor does not read")
        if not isinstance(storage_type, _StorageType):
            raise Bad(f"storage record {str(pid)[:120]}: {storage_type!r} is not a storage class")
        key = key.decode("ascii", "replace") if isinstance(key, bytes) else key
        location = location.decode("ascii", "replace") if isinstance(location, bytes) else location
        if not isinstance(key, str) or not isinstance(location, str):
            raise Bad(f"storage record {str(pid)[:120]}: the key and location must be strings")
        numel = count(numel, f"storage {key!r}: its size")
        itemsize = np.dtype(TORCH_DTYPES[storage_type.dtype_name][0]).itemsize if storage_type.dtype_name else 1
        nbytes = numel * itemsize
        rec = self.storages.get(key)
        if rec is None:
            self.check_storage(key, nbytes)
            rec = self.storages[key] = _TorchStorage(self, key, storage_type.dtype_name, location, nbytes)
        return StorageRef(rec, storage_type.dtype_name)

    def array(self, data: bytes, npd, key: str) -> np.ndarray:
        a = np.frombuffer(data, npd.newbyteorder("<" if self.little else ">"))
        if npd == np.bool_ and np.frombuffer(data, np.uint8).max(initial=0) > 1:
            raise Bad(f"storage {key!r}: a bool storage holds bytes other than 0 or 1")
        return a.astype(npd) if not self.little and npd.itemsize > 1 else a


class _ZipReader(_Reader):
    def __init__(self, data: bytes, name: str, map_location):
        super().__init__(name, map_location)
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
            raise Bad(f"not a valid zip archive: {e}") from None
        if len(infos) > MAX_MEMBERS:
            raise Bad(f"the archive lists {len(infos)} members, more than {MAX_MEMBERS}")
        self.members = {}
        for info in infos:
            n = info.filename
            parts = n.replace("\\", "/").split("/")
            if n.startswith(("/", "\\")) or ".." in parts or ":" in parts[0] or "\0" in n:
                raise Bad(f"the archive member {n!r} has an unsafe path (absolute or with '..')")
            if info.file_size > MAX_RATIO * max(info.compress_size, 1024):
                raise Bad(f"the archive member {n!r} would inflate from {info.compress_size} to {info.file_size} "
                          "bytes (a zip bomb?)")
            self.members[n] = info
        pkls = [n for n in self.members if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkls) != 1:
            raise Bad("the archive has no <name>/data.pkl (it is not a torch.save file)")
        self.prefix = pkls[0][:-len("data.pkl")]
        order = self.read_member(self.prefix + "byteorder", 16) if self.prefix + "byteorder" in self.members else b"little"
        if order not in (b"little", b"big"):
            raise Bad(f"byteorder is {order[:16]!r}, expected 'little' or 'big'")
        self.little = order == b"little"

    def read_member(self, name: str, limit: int) -> bytes:
        info = self.members[name]
        if info.file_size > limit:
            raise Bad(f"the archive member {name!r} holds {info.file_size} bytes, more than the {limit} expected")
        try:
            with self.zip.open(info) as fh:
                data = fh.read(limit + 1)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError) as e:
            raise Bad(f"the archive member {name!r} cannot be read: {e}") from None
        if len(data) != info.file_size:
            raise Bad(f"the archive member {name!r} holds {len(data)} bytes, not the {info.file_size} it declares")
        return data

    def check_storage(self, key: str, nbytes: int) -> None:
        member = f"{self.prefix}data/{key}"
        if "/" in key or key in ("", ".", "..") or member not in self.members:
            raise Bad(f"storage key {key!r} names no member of the archive")
        if self.members[member].file_size != nbytes:
            raise Bad(f"storage {key!r} claims {nbytes} bytes, but the archive member holds "
                      f"{self.members[member].file_size}")

    def storage_bytes(self, rec: _TorchStorage) -> bytes:
        return self.read_member(f"{self.prefix}data/{rec.key}", rec.nbytes)

    def pickle(self) -> bytes:
        return self.read_member(self.prefix + "data.pkl", MAX_PICKLE)


class _LegacyReader(_Reader):
    def __init__(self, data: bytes, name: str, map_location):
        super().__init__(name, map_location)
        self.data = data

    def check_storage(self, key: str, nbytes: int) -> None:
        if nbytes > len(self.data):
            raise Bad(f"storage {key!r} claims {nbytes} bytes, more than the whole file ({len(self.data)})")

    def storage_bytes(self, rec):
        return None  # they follow the object pickle: read by fill()

    def fill(self, pos: int, keys) -> None:
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
            raise Bad("the list of storage keys after the object is not a list of distinct strings")
        data, offsets = self.data, {}
        for key in keys:
            if key not in self.storages:
                raise Bad(f"storage key {key!r} is listed but no tensor names it")
            if pos + 8 > len(data):
                raise Bad(f"the file ends before storage {key!r}")
            (numel,) = struct.unpack_from("<q" if self.little else ">q", data, pos)
            rec = self.storages[key]
            itemsize = np.dtype(TORCH_DTYPES[rec.dtype_name][0]).itemsize if rec.dtype_name else 1
            if numel < 0 or numel * itemsize != rec.nbytes or pos + 8 + rec.nbytes > len(data):
                raise Bad(f"storage {key!r}: its record says {numel} elements, the pickle {rec.nbytes // itemsize}, "
                          f"and {len(data) - pos - 8} bytes are left")
            offsets[key] = pos + 8
            pos += 8 + rec.nbytes
        for rec, dtype_, storage in self.pending:
            if rec.key not in offsets:
                raise Bad(f"storage {rec.key!r} is named by a tensor but its bytes are not in the file")
            raw = data[offsets[rec.key]:offsets[rec.key] + rec.nbytes]
            storage._flat.copy_(tensor(self.array(raw, np.dtype(dtype_.np), rec.key), device="cpu"))


def is_zip(data: bytes) -> bool:
    """Whether ``data`` is a zip archive (torch.save's format since 1.6)."""
    return data[:4] == b"PK\x03\x04"


def is_legacy(data: bytes) -> bool:
    """Whether ``data`` starts with the legacy torch.save magic number (before 1.6)."""
    return data[:len(_LEGACY_PREFIX)] == _LEGACY_PREFIX


def is_tar(data: bytes) -> bool:
    """Whether ``data`` is a tar archive (torch.save's oldest format)."""
    return len(data) > 262 and data[257:262] == b"ustar"


def _policy() -> unpickler.Policy:
    return unpickler.Policy({**allowlist.BUILTINS, **torch_names(), **allowlist.user_names()},
                            never_build=(Tensor,), hint=_hint, refused=refused(),
                            checked={**allowlist.BUILTINS, **torch_names()}, passthrough=PASSTHROUGH)


class _TrustedUnpickler(pickle.Unpickler):
    """``weights_only=False``: Python's unpickler, torch's names mapped to tritensor's; any other
    torch name cannot be found without torch."""

    def __init__(self, file, reader, **kwargs):
        super().__init__(file, **kwargs)
        self.reader, self.names = reader, torch_names()

    def find_class(self, module, name):
        full = f"{module}.{name}"
        if full in self.names:
            return self.names[full]
        if full in refused():
            raise Bad(refused()[full])
        if module == "torch" or module.startswith("torch."):
            raise pickle.UnpicklingError(f"GLOBAL {full} cannot be loaded: tritensor reads torch's tensors, storages, "
                                         "dtypes, devices and Size without torch, but not torch's other objects. "
                                         + (_hint(full) or ""))
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return self.reader.persistent_load(pid)


def _unpickle(data: bytes, pos: int, reader, weights_only: bool, encoding: str):
    if weights_only:
        return unpickler.load(data, _policy(), reader.persistent_load, pos=pos, encoding=encoding)
    f = io.BytesIO(data)
    f.seek(pos)
    obj = _TrustedUnpickler(f, reader, encoding=encoding).load()
    return obj, f.tell()


def load_zip(data: bytes, name: str, map_location, weights_only: bool, encoding: str):
    """The object of a torch.save zip file: its pickle run with storages read from the archive's records (through the
    allowlist with ``weights_only``)."""
    reader = _ZipReader(data, name, map_location)
    obj, _ = _unpickle(reader.pickle(), 0, reader, weights_only, encoding)
    return obj


def load_legacy(data: bytes, name: str, map_location, weights_only: bool, encoding: str):
    """The object of a legacy (pre-1.6) torch.save file: magic number, protocol and system info checked, then the
    object pickle and the raw storages after it."""
    empty = unpickler.Policy(dict(allowlist.BUILTINS), checked=allowlist.BUILTINS)

    def no_ids(pid):
        raise pickle.UnpicklingError("unsupported persistent id encountered")
    pos = len(_LEGACY_PREFIX) + 1  # the magic number's pickle: PROTO, LONG1 10 bytes, STOP
    if data[pos - 1:pos] != b".":
        raise Bad("the magic number is not followed by STOP")
    version, pos = unpickler.load(data, empty, no_ids, pos=pos)
    if version != PROTOCOL_VERSION:
        raise Bad(f"Invalid protocol version: {version!r}")
    sys_info, pos = unpickler.load(data, empty, no_ids, pos=pos)
    little = sys_info.get("little_endian", True) if isinstance(sys_info, dict) else True
    reader = _LegacyReader(data, name, map_location)
    reader.little = bool(little)
    obj, pos = _unpickle(data, pos, reader, weights_only, encoding)
    keys, pos = unpickler.load(data, empty, no_ids, pos=pos)
    reader.fill(pos, keys)
    return obj

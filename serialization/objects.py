"""Whole objects in a tritensor checkpoint: ``tritensor.save(model)``, a dict holding a model and
an optimizer, user classes: anything picklable, as ``torch.save``.

The object is pickled with every tensor and NumPy array replaced by a persistent id (a record of
plain values: which storage, dtype, shape, strides, offset, device, requires_grad), so tensor
bytes never enter the pickle stream: each storage is one entry of the safetensors body
(``storage.<n>``, in the dtype of the first tensor seen on it), the pickle stream another
(``tritensor.pickle``, uint8). Tensors that share a storage are saved with one copy of it and come
back sharing it; the same tensor twice comes back as one object.

Loading with ``weights_only=True`` (the default) runs the stream through ``unpickler.py``:
only the allow-list of ``allowlist.py`` may be named. ``weights_only=False`` uses Python's
unpickler, which runs whatever the file names: for files you trust only.
"""
from __future__ import annotations

import copyreg
import io
import json
import pickle

import ml_dtypes
import numpy as np

from ..core.factories import tensor
from ..core.shape import Size
from ..core.tensor import Tensor
from ..nn.parameter import Parameter
from ..runtime import dtype as dt
from ..runtime.device import device
from . import allowlist, unpickler
from .errors import Bad, check_view
from .location import Storage, restore, tensor_over

PICKLE = "tritensor.pickle"  # the metadata key naming the body entry that holds the pickle stream
STORAGES = "tritensor.storages"  # metadata: {storage entry: saved location}
_TENSOR, _ARRAY = "tritensor.tensor", "tritensor.ndarray"


def _reduce_device(d):
    return device, (str(d),)


def _reduce_size(s):
    return Size, (tuple(s),)


class _TensorIds:
    """Mixed into a pickle module's Pickler: tensors and arrays as persistent ids, their bytes
    collected for the safetensors body."""

    def __init__(self, file, protocol: int):
        super().__init__(file, protocol)
        # device and Size through their constructors (which check their arguments), not NEWOBJ + BUILD
        self.dispatch_table = {**copyreg.dispatch_table, device: _reduce_device, Size: _reduce_size}
        self.arrays: dict[str, np.ndarray] = {}
        self.locations: dict[str, str] = {}
        self._storages: dict[int, str] = {}  # id(storage) -> entry name
        self._tensors: dict[int, int] = {}  # id(tensor) -> its index: the same object loads as one
        self._keep: list = []  # the objects behind those ids stay alive while we pickle

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            return self._tensor(obj)
        if isinstance(obj, np.ndarray) and (obj.dtype.kind in "fiub" or obj.dtype == ml_dtypes.bfloat16):
            name = f"array.{len(self.arrays)}"
            a = np.ascontiguousarray(obj)
            self.arrays[name] = a if a.dtype.byteorder != ">" else a.astype(a.dtype.newbyteorder("<"))
            self._keep.append(obj)
            return (_ARRAY, name)
        return None

    def _tensor(self, t: Tensor):
        index = self._tensors.setdefault(id(t), len(self._tensors))
        self._keep.append(t)
        storage = t.untyped_storage()
        name = self._storages.get(id(storage))
        if name is None:
            name = self._storages[id(storage)] = f"storage.{len(self._storages)}"
            self._keep.append(storage)
            n = storage.nbytes // t.dtype.itemsize
            if n * t.dtype.itemsize != storage.nbytes:
                raise ValueError(f"save(): a storage of {storage.nbytes} bytes is not a whole number of "
                                 f"{t.dtype} elements")
            flat = Tensor(storage, (n,), (1,), 0, t.dtype)
            self.arrays[name] = flat.detach().cpu().numpy().copy()
            self.locations[name] = str(t.device)
        saved_dtype = _entry_dtype(self.arrays[name])
        kind = "parameter" if isinstance(t, Parameter) else "tensor"
        requires_grad = bool(t.requires_grad and t.grad_fn is None)
        return (_TENSOR, index, name, t.dtype.name, t.storage_offset(), tuple(t.shape), tuple(t.stride()),
                requires_grad, kind, saved_dtype)


class _Pickler(_TensorIds, pickle.Pickler):
    pass


def _entry_dtype(a: np.ndarray) -> str:
    return dt.from_numpy_dtype(a.dtype).name


def save(obj, protocol: int, pickle_module=pickle) -> tuple[dict, dict]:
    """``obj`` pickled: (``{entry: array}`` for the safetensors body, metadata)."""
    buf = io.BytesIO()
    cls = getattr(pickle_module, "Pickler", None)
    if cls is not pickle.Pickler and cls is not None:  # another pickle module (dill ...): its Pickler, our ids
        p = type("_ModulePickler", (_TensorIds, cls), {})(buf, protocol)
    else:
        p = _Pickler(buf, protocol)
    p.dump(obj)
    arrays = dict(p.arrays)
    arrays[PICKLE] = np.frombuffer(buf.getvalue(), np.uint8)
    meta = {"format": "tritensor", PICKLE: PICKLE, STORAGES: json.dumps(p.locations, separators=(",", ":"))}
    return arrays, meta


class _Loader:
    """Makes the objects of persistent ids: each storage restored once (map_location), each
    tensor once, every field checked against the file."""

    def __init__(self, arrays: dict, meta: dict, map_location):
        self.arrays, self.map_location = arrays, map_location
        try:
            locations = json.loads(meta.get(STORAGES, "{}"))
        except ValueError as e:
            raise Bad(f"metadata {STORAGES} is not JSON: {e}") from None
        if not isinstance(locations, dict) or not all(isinstance(v, str) for v in locations.values()):
            raise Bad(f"metadata {STORAGES} must map storage names to locations")
        self.locations = locations
        self.storages: dict[str, Storage] = {}
        self.tensors: dict[int, Tensor] = {}

    def __call__(self, pid):
        if not isinstance(pid, tuple) or not pid or not isinstance(pid[0], str) or pid[0] not in (_TENSOR, _ARRAY):
            raise pickle.UnpicklingError(f"persistent id {str(pid)[:80]} is not a tensor or array record of "
                                         "tritensor's")
        if pid[0] == _ARRAY:
            if len(pid) != 2 or not isinstance(pid[1], str) or pid[1] not in self.arrays or pid[1] == PICKLE:
                raise Bad(f"persistent id {pid!r} names an array the file does not hold")
            return np.array(self.arrays[pid[1]])
        if len(pid) != 10:
            raise Bad(f"tensor record {str(pid)[:120]} has {len(pid)} fields, expected 10")
        _, index, name, dtype_name, offset, shape, stride, requires_grad, kind, saved_dtype = pid
        where = f"tensor record #{index}"
        if type(index) is not int:
            raise Bad(f"{where}: the index is not an int")
        if index in self.tensors:
            return self.tensors[index]
        if not isinstance(name, str) or name not in self.arrays or not name.startswith("storage."):
            raise Bad(f"{where} names a storage {name!r} the file does not hold")
        if not isinstance(dtype_name, str) or dtype_name not in [d.name for d in dt.ALL] or \
                not isinstance(kind, str) or kind not in ("tensor", "parameter") or type(requires_grad) is not bool:
            raise Bad(f"{where}: dtype {dtype_name!r}, kind {kind!r} or requires_grad {requires_grad!r} is not valid")
        dtype_ = dt._by_name(dtype_name)
        storage = self.storage(name)
        shape, stride, offset = check_view(shape, stride, offset, storage.nbytes() // dtype_.itemsize, where)
        if requires_grad and not dtype_.is_floating_point:
            raise Bad(f"{where}: a tensor of dtype {dtype_name} cannot require grad")
        t = tensor_over(storage, dtype_, shape, stride, offset)
        if kind == "parameter":
            t = Parameter(t, requires_grad=requires_grad)
        elif requires_grad:
            t.requires_grad_(True)
        self.tensors[index] = t
        return t

    def storage(self, name: str) -> Storage:
        if name not in self.storages:
            a = self.arrays[name]
            if a.ndim != 1 or a.dtype not in {d.np for d in dt.ALL}:
                raise Bad(f"storage entry {name!r} is not a 1-D array of a tritensor dtype")
            location = self.locations.get(name, "cpu")
            flat = tensor(a, device="cpu")  # a copy into aligned, writable host memory of our own
            self.storages[name] = restore(Storage(flat), location, self.map_location)
        return self.storages[name]


class _TrustedUnpickler(pickle.Unpickler):
    """Python's unpickler (``weights_only=False``: it runs what the file names), our tensors."""

    def __init__(self, file, persistent, **kwargs):
        super().__init__(file, **kwargs)
        self._persistent = persistent

    def persistent_load(self, pid):
        return self._persistent(pid)


def policy() -> unpickler.Policy:
    """The unpickling allowlist of a tritensor safetensors file with pickled objects: builtins, tritensor's names and
    those added with add_safe_globals; tensors come only from the file's arrays."""
    return unpickler.Policy({**allowlist.BUILTINS, **allowlist.TRITENSOR, **allowlist.user_names()},
                            never_build=(Tensor,), checked={**allowlist.BUILTINS, **allowlist.TRITENSOR})


def load(arrays: dict, meta: dict, map_location, weights_only: bool, encoding: str):
    """The object pickled in a tritensor safetensors file, its tensors taken from ``arrays``; with ``weights_only``
    through the allowlist policy, else with Python's unpickler."""
    name = meta.get(PICKLE)
    if name not in arrays or arrays[name].dtype != np.uint8:
        raise Bad(f"metadata {PICKLE} names {name!r}, not a uint8 entry of the file")
    stream = arrays[name].tobytes()
    loader = _Loader(arrays, meta, map_location)
    if weights_only:
        obj, end = unpickler.load(stream, policy(), loader, encoding=encoding)
        return obj
    return _TrustedUnpickler(io.BytesIO(stream), loader, encoding=encoding).load()

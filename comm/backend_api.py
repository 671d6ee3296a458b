"""The backend interface of tritensor.comm, and the registry of backends by name.

Why this module exists: the public collectives (:mod:`.collectives`) check their arguments and
resolve the group; *how* the bytes move (which algorithm, which wire format, which staging) is a
backend's business, as in torch.distributed, where ``all_reduce`` fills in an
``AllreduceOptions`` and calls ``group.allreduce([tensor], opts)`` on ProcessGroupGloo or
ProcessGroupNCCL. :class:`CommBackend` is that interface (torch's c10d ``Backend``): every
collective, point-to-point operation and barrier, each returning a :class:`~.work.Work`, plus
``rank()``, ``size()`` and ``name()``. :class:`Backend` is torch.distributed's ``Backend``: the
names, and ``Backend.register_backend(name, func)``, through which a backend module makes itself
known; ``init_process_group(backend=name)`` and ``new_group`` create a group's backend from it.

The public modules import this module and never a backend's; a backend imports this module
(to subclass and register) and the modules beneath both: :mod:`.reduce_op`, :mod:`.work`,
:mod:`.errors`. ``tests/test_layering.py`` checks it.

Ranks in options and in ``send``/``recv`` are group ranks, as in torch's ProcessGroup API (the
public functions take global ranks and translate). Tensors reach a backend checked (type,
dtype, writability, sizes and ranks agree with the call): :func:`check_tensor` is that check,
shared with backends that stage tensors themselves.
"""

from __future__ import annotations

import warnings
from collections import namedtuple
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np

from .reduce_op import ReduceOp

__all__ = [
    "Backend", "CommBackend", "DistributedBackendOptions", "AllreduceOptions", "BroadcastOptions", "ReduceOptions",
    "AllgatherOptions", "GatherOptions", "ScatterOptions", "ReduceScatterOptions", "AllToAllOptions",
    "BarrierOptions", "SUPPORTED_DTYPES", "TensorInfo", "check_tensor",
]


# ------------------------------------------------------------------------------- registry


class Backend(str):
    """Backend names, as ``torch.distributed.Backend``: ``Backend("TCP")`` is ``"tcp"``.

    A name is lowercased; ``"gloo"`` is an alias of tritensor's ``"tcp"`` (code ported from
    PyTorch names gloo). As in torch, an unknown name is returned lowercased, and creating a
    group with it fails naming the known ones (:meth:`_plugin`)."""

    UNDEFINED = "undefined"
    TCP = "tcp"
    GLOO = "gloo"

    _BackendPlugin = namedtuple("_BackendPlugin", ["creator_fn", "extended_api"])
    _plugins: dict = {}
    _ALIASES = {"gloo": "tcp"}
    # The registered backends (torch's list also names the backends it was built with).
    backend_list: list = [UNDEFINED]
    default_device_backend_map: dict = {}
    backend_capability: dict = {}

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError("Backend constructor parameter must be string-ish")
        low = name.lower()
        return str.__new__(cls, cls._ALIASES.get(low, low))

    @classmethod
    def register_backend(cls, name, func, extended_api: bool = False, devices=None) -> None:
        """Register backend ``name``, created by ``func``, as torch's ``Backend.register_backend``.

        ``func(store, group_rank, group_size, timeout)`` returns a :class:`CommBackend`; with
        ``extended_api=True`` it is called as ``func(DistributedBackendOptions, pg_options)``
        instead (the options carry the group's global ranks and its key prefix in ``store``).
        ``devices`` are the device types it serves ("cpu", "cuda"); None means both."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a backend name (a non-empty str), got {name!r}")
        if not callable(func):
            raise TypeError(f"func: expected a callable that creates the backend, got {func!r}")
        low = name.lower()
        if low in cls._ALIASES:
            raise ValueError(f"name: {name!r} is an alias of the built-in backend {cls._ALIASES[low]!r}")
        if low not in cls.backend_list:
            cls.backend_list.append(low)
        if devices is None:
            warnings.warn(f"Device capability of {low} unspecified, assuming `cpu` and `cuda`. Please specify it "
                          "via the `devices` argument of `register_backend`.", stacklevel=2)
            devices = ["cpu", "cuda"]
        elif isinstance(devices, str):
            devices = [devices]
        cls.backend_capability[low] = list(devices)
        for device in devices:
            cls.default_device_backend_map.setdefault(device, low)
        cls._plugins[low.upper()] = cls._BackendPlugin(func, extended_api)

    @classmethod
    def _plugin(cls, name: str, what: str):
        """The registered plugin of ``name`` (a :class:`Backend` value), or a ValueError naming the known ones."""
        plugin = cls._plugins.get(str(name).upper())
        if plugin is None:
            known = [b for b in cls.backend_list if b != cls.UNDEFINED]
            raise ValueError(f"{what}: backend: unknown backend {str(name)!r}; registered backends: {known} "
                             f"(and the alias 'gloo' of 'tcp'); add one with Backend.register_backend(name, func)")
        return plugin


@dataclass
class DistributedBackendOptions:
    """What an ``extended_api`` backend is created with, as torch's ``_DistributedBackendOptions``.

    ``group_id`` is the group's key prefix in ``store`` (keys of different groups never meet)."""

    store: object
    group_rank: int
    group_size: int
    timeout: timedelta
    group_id: str
    global_ranks_in_group: list


# -------------------------------------------------------------------------------- options
# torch's option structs, with the fields tritensor's collectives fill in. ``asyncOp`` says
# whether the caller waits at once (a backend may drive the operation in the calling thread).


@dataclass
class AllreduceOptions:
    """torch's c10d AllreduceOptions: the reduce op, and whether the call is asynchronous."""
    reduceOp: ReduceOp = ReduceOp.SUM
    asyncOp: bool = True


@dataclass
class BroadcastOptions:
    """torch's c10d BroadcastOptions: the root rank (and tensor)."""
    rootRank: int = 0
    rootTensor: int = 0
    asyncOp: bool = True


@dataclass
class ReduceOptions:
    """torch's c10d ReduceOptions: the reduce op and the root rank (and tensor)."""
    reduceOp: ReduceOp = ReduceOp.SUM
    rootRank: int = 0
    rootTensor: int = 0
    asyncOp: bool = True


@dataclass
class AllgatherOptions:
    """torch's c10d AllgatherOptions."""
    asyncOp: bool = True


@dataclass
class GatherOptions:
    """torch's c10d GatherOptions: the root rank."""
    rootRank: int = 0
    asyncOp: bool = True


@dataclass
class ScatterOptions:
    """torch's c10d ScatterOptions: the root rank."""
    rootRank: int = 0
    asyncOp: bool = True


@dataclass
class ReduceScatterOptions:
    """torch's c10d ReduceScatterOptions: the reduce op."""
    reduceOp: ReduceOp = ReduceOp.SUM
    asyncOp: bool = True


@dataclass
class AllToAllOptions:
    """torch's c10d AllToAllOptions."""
    asyncOp: bool = True


@dataclass
class BarrierOptions:
    """torch's c10d BarrierOptions: the devices to synchronise (unused by a host backend)."""
    device_ids: list = field(default_factory=list)
    asyncOp: bool = True


# -------------------------------------------------------------------------------- interface


class CommBackend:
    """The operations a backend provides, as torch's c10d ``Backend`` (ProcessGroupGloo's base).

    Each returns a :class:`~.work.Work` whose ``get_future()`` value is the output tensors.
    Arguments arrive checked by :mod:`.collectives`; a method not overridden raises torch's
    "Backend X does not support Y". ``tensors`` lists hold one tensor (torch's multi-device
    lists are gone from its Python API too)."""

    def rank(self) -> int:
        """This process's rank in the group the backend serves."""
        raise NotImplementedError

    def size(self) -> int:
        """The number of ranks in the group."""
        raise NotImplementedError

    def name(self) -> str:
        """The backend's registered name (torch's ``Backend.name()``)."""
        raise NotImplementedError

    def _unsupported(self, op: str):
        raise RuntimeError(f"Backend {self.name()} does not support {op}")

    # collectives: tensors (and the lists of a rooted op) as torch's ProcessGroup takes them
    def allreduce(self, tensors: list, opts: AllreduceOptions):
        """Reduce ``tensors[0]`` across the group in place with ``opts.reduceOp``; returns a Work."""
        self._unsupported("allreduce")

    def broadcast(self, tensors: list, opts: BroadcastOptions):
        """Send ``tensors[0]`` of rank ``opts.rootRank`` into every rank's ``tensors[0]``; returns a Work."""
        self._unsupported("broadcast")

    def reduce(self, tensors: list, opts: ReduceOptions):
        """Reduce ``tensors[0]`` of every rank into rank ``opts.rootRank``'s with ``opts.reduceOp``; returns a
        Work."""
        self._unsupported("reduce")

    def allgather(self, output_tensors: list, input_tensors: list, opts: AllgatherOptions):
        """``output_tensors[0]``: one tensor per rank; ``input_tensors[0]``: this rank's."""
        self._unsupported("allgather")

    def _allgather_base(self, output_tensor, input_tensor, opts: AllgatherOptions):
        """all_gather_into_tensor: the ranks' inputs concatenated in rank order."""
        self._unsupported("_allgather_base")

    def reduce_scatter(self, output_tensors: list, input_tensors: list, opts: ReduceScatterOptions):
        """``input_tensors[0]``: one tensor per rank; rank i's ``output_tensors[0]`` gets the i-th reduced."""
        self._unsupported("reduce_scatter")

    def _reduce_scatter_base(self, output_tensor, input_tensor, opts: ReduceScatterOptions):
        """reduce_scatter_tensor: ``input_tensor`` is world size x ``output_tensor``."""
        self._unsupported("_reduce_scatter_base")

    def alltoall(self, output_tensors: list, input_tensors: list, opts: AllToAllOptions):
        """Send ``input_tensors[i]`` to rank i and receive rank j's into ``output_tensors[j]``; returns a
        Work."""
        self._unsupported("alltoall")

    def gather(self, output_tensors: list, input_tensors: list, opts: GatherOptions):
        """``output_tensors``: ``[gather_list]`` on the root, ``[]`` elsewhere."""
        self._unsupported("gather")

    def scatter(self, output_tensors: list, input_tensors: list, opts: ScatterOptions):
        """``input_tensors``: ``[scatter_list]`` on the root, ``[]`` elsewhere."""
        self._unsupported("scatter")

    def barrier(self, opts: BarrierOptions):
        """A Work that completes when every rank has called barrier."""
        self._unsupported("barrier")

    # point to point (always asynchronous: the caller waits on the Work)
    def send(self, tensors: list, dstRank: int, tag: int):
        """Send ``tensors[0]`` to ``dstRank`` under ``tag``; returns a Work."""
        self._unsupported("send")

    def recv(self, tensors: list, srcRank: int, tag: int):
        """Receive the next message from ``srcRank`` under ``tag`` into ``tensors[0]``; returns a Work."""
        self._unsupported("recv")

    def recv_anysource(self, tensors: list, tag: int):
        """A receive from whichever rank sends first; ``Work._source_rank()`` names it."""
        self._unsupported("recv_anysource")

    def shutdown(self) -> None:
        """Release connections and threads (destroy_process_group)."""


# ------------------------------------------------------------------------- tensor arguments

# The element types tritensor.comm moves (by NumPy name; bfloat16 is ml_dtypes').
SUPPORTED_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")

TensorInfo = namedtuple("TensorInfo", ["numel", "dtype"])
_SUPPORTED: dict = {}  # NumPy dtype -> whether it is supported (dtype.name costs microseconds per call)


def _supported(dtype) -> bool:
    ok = _SUPPORTED.get(dtype)
    if ok is None:
        ok = _SUPPORTED[dtype] = dtype.name in SUPPORTED_DTYPES
    return ok


def check_tensor(obj, name: str, write: bool) -> TensorInfo:
    """Check a tensor argument (a tritensor Tensor, a device tensor or a NumPy array) before
    anything is sent: its type, its dtype, and that it is writable when ``write``; return its
    element count and NumPy dtype. Errors name the argument.

    A tensor is asked for its dtype and size, not turned into a host view (which costs
    microseconds per collective, and a device tensor has none): a CPU tensor's memory is always
    writable (``Storage.bytes_view``), so only a NumPy array can be read-only."""
    if isinstance(obj, np.ndarray):
        dtype = obj.dtype
        if not _supported(dtype):
            raise TypeError(f"{name}: dtype {dtype.name} is not supported by tritensor.comm")
        if write and not obj.flags.writeable:
            raise ValueError(f"{name}: the tensor is read-only")
        return TensorInfo(obj.size, dtype)
    if not (hasattr(obj, "device") and hasattr(obj, "numpy") and hasattr(obj, "dtype")):
        raise TypeError(f"{name}: expected a tritensor.Tensor, got {type(obj).__name__}")
    dtype = np.dtype(obj.dtype.np)
    if not _supported(dtype):
        raise TypeError(f"{name}: dtype {dtype.name} is not supported by tritensor.comm")
    return TensorInfo(obj.numel(), dtype)

"""Where loaded tensors go: ``map_location`` with every form ``torch.load`` takes, and the storage
object a ``map_location`` callable receives.

torch restores each storage of a file once: read on the CPU, then moved to its saved location
(``'cpu'``, ``'cuda:1'``) or where ``map_location`` says: ``None`` (the saved location), a device
or its string for all storages, a dict ``{saved: target}`` (others stay where saved), or a callable
``(storage, location) -> storage or None``. Tensors are then made over the restored storages, so
the views of one storage share it after loading too.
"""
from __future__ import annotations

from ..core.tensor import Tensor
from ..runtime import cuda
from ..runtime.device import device


class MapLocationTypeError(TypeError):
    """``map_location`` (the caller's argument, not the file) is of the wrong kind or gave a wrong result."""


class MapLocationValueError(ValueError):
    """``map_location`` names no device."""


PASSTHROUGH = (MapLocationTypeError, MapLocationValueError)  # errors a load reports as they are


class Storage:
    """A storage being loaded, as ``torch.UntypedStorage`` to a ``map_location`` callable: its bytes
    on a device. ``cpu()``, ``cuda(index)`` and ``to(device=...)`` give it on another device (the
    common ``lambda storage, loc: storage`` keeps it on the CPU)."""

    __slots__ = ("_flat",)

    def __init__(self, flat: Tensor):
        self._flat = flat  # a 1-D tensor over the whole storage, in the dtype it was saved as

    @property
    def device(self) -> device:
        """The device the bytes are on."""
        return self._flat.device

    @property
    def is_cuda(self) -> bool:
        """Whether the bytes are on a CUDA device."""
        return self._flat.device.type == "cuda"

    def nbytes(self) -> int:
        """The size in bytes."""
        return self._flat.numel() * self._flat.dtype.itemsize

    def size(self) -> int:
        """The size in bytes (torch's untyped storages count bytes)."""
        return self.nbytes()

    def __len__(self) -> int:
        return self.nbytes()

    def cpu(self) -> "Storage":
        """This storage if in host memory, else a copy there."""
        return self if self.device.type == "cpu" else Storage(self._flat.cpu())

    def cuda(self, device=None, non_blocking: bool = False) -> "Storage":
        """A copy on a CUDA device (``device``: an index or a device; default the current one), or this storage if
        already there."""
        target = _device("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}",
                         "Storage.cuda(): device")
        return self.to(device=target, non_blocking=non_blocking)

    def to(self, *, device=None, non_blocking: bool = False) -> "Storage":
        """A copy on ``device`` (this storage if already there); torch's map_location functions call it."""
        target = _device(device, "Storage.to(): device")
        return self if self.device == target else Storage(self._flat.to(target, non_blocking=non_blocking))

    def __repr__(self) -> str:
        return f"Storage(device={self.device}, nbytes={self.nbytes()})"


def _device(spec, what: str, error=ValueError) -> device:
    try:
        return spec if isinstance(spec, device) else device(spec.decode("ascii") if isinstance(spec, bytes) else spec)
    except (TypeError, ValueError, UnicodeDecodeError) as e:
        raise error(f"{what}: {spec!r} is not a device ({e})") from None


def check_map_location(map_location) -> None:
    """Refuse a map_location of the wrong kind before the file is read."""
    if map_location is None or isinstance(map_location, dict) or callable(map_location):
        return
    if isinstance(map_location, (str, bytes, device)):
        _device(map_location, "load(): map_location", MapLocationValueError)
        return
    raise MapLocationTypeError(f"load(): map_location must be None, a str, a device, a dict {{saved: target}} or a callable "
                    f"(storage, location) -> storage, got {type(map_location).__name__}")


def default_restore(storage: Storage, location: str) -> Storage:
    """``storage`` moved to ``location`` (torch's ``default_restore_location``, with its messages)."""
    dev = _device(location, "load(): the location")
    if dev.type == "cpu":
        return storage.cpu()
    if not cuda.is_available():
        raise RuntimeError("Attempting to deserialize object on a CUDA device but tritensor.cuda.is_available() is "
                           "False. If you are running on a CPU-only machine, please use tritensor.load with "
                           "map_location=tritensor.device('cpu') to map your storages to the CPU.")
    index = dev.index if dev.index is not None else cuda.current_device()
    if index >= cuda.device_count():
        raise RuntimeError(f"Attempting to deserialize object on CUDA device {index} but "
                           f"tritensor.cuda.device_count() is {cuda.device_count()}. Please use tritensor.load "
                           "with map_location to map your storages to an existing device.")
    return storage.to(device=device("cuda", index))


def restore(storage: Storage, location: str, map_location) -> Storage:
    """Where ``map_location`` puts a storage saved at ``location`` (torch's ``_get_restore_location``)."""
    if map_location is None:
        return default_restore(storage, location)
    if isinstance(map_location, dict):
        target = map_location.get(location, location)
        if not isinstance(target, (str, bytes, device)):
            raise MapLocationTypeError(f"load(): map_location[{location!r}] is a {type(target).__name__}, expected a device "
                            "or its name")
        return default_restore(storage, str(_device(target, f"load(): map_location[{location!r}]",
                                                    MapLocationValueError)))
    if isinstance(map_location, (str, bytes, device)):
        return default_restore(storage, str(_device(map_location, "load(): map_location", MapLocationValueError)))
    result = map_location(storage, location)
    if result is None:
        return default_restore(storage, location)
    if not isinstance(result, Storage):
        raise MapLocationTypeError(f"load(): map_location returned a {type(result).__name__} for a storage saved on "
                        f"{location!r}; it must return the storage it was given (or storage.cpu(), "
                        "storage.cuda(i)), or None")
    return result


def tensor_over(storage: Storage, dtype_, shape, stride, offset: int) -> Tensor:
    """A tensor viewing ``storage`` (bounds checked by the caller)."""
    return Tensor(storage._flat._storage, tuple(shape), tuple(stride), offset, dtype_)

"""Devices: ``cpu``, ``cuda`` and ``cuda:N``, spelled and compared as in PyTorch, and the default
device factories use when given none (``set_default_device``, as ``torch.set_default_device``)."""
from __future__ import annotations


_by_spelling: dict = {}  # (type string, index) as given -> its device (a handful of spellings)
_canonical: dict = {}  # (type, index) -> the one device object of it


class device:
    """A device. One object per device: ``device("cuda", 0) is device("cuda:0")``, so the hot path
    compares devices by identity (an ``==`` of two devices costs a Python call)."""

    __slots__ = ("type", "index")

    def __new__(cls, type_or_str, index: int | None = None):
        if type(type_or_str) is str:
            d = _by_spelling.get((type_or_str, index))
            if d is not None:
                return d
        elif isinstance(type_or_str, device):
            return type_or_str
        spelled, given = type_or_str, index
        if isinstance(type_or_str, int) and not isinstance(type_or_str, bool):
            type_or_str, index = "cuda", type_or_str
        if not isinstance(type_or_str, str):
            raise TypeError(f"device: expected a string like 'cpu' or 'cuda:0', got {type_or_str!r}")
        s = type_or_str.strip()
        if ":" in s:
            if index is not None:
                raise ValueError(f"device: index given twice in {type_or_str!r} and index={index}")
            s, _, idx = s.partition(":")
            if not idx.isdigit():
                raise ValueError(f"device: bad device index in {type_or_str!r}; expected e.g. 'cuda:0'")
            index = int(idx)
        if s not in ("cpu", "cuda"):
            raise ValueError(f"device: unknown device type {s!r}; expected 'cpu' or 'cuda'")
        if index is not None and (type(index) is not int or index < 0):
            raise ValueError(f"device: index must be a non-negative int, got {index!r}")
        if s == "cpu" and index not in (None, 0):
            raise ValueError(f"device: cpu has no index {index}")
        key = (s, None if s == "cpu" else index)
        d = _canonical.get(key)
        if d is None:
            d = _canonical[key] = object.__new__(cls)
            d.type, d.index = key
        if type(spelled) is str and len(_by_spelling) < 256:
            _by_spelling[(spelled, given)] = d
        return d

    def __reduce__(self):
        return device, (self.type, self.index)

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, TypeError):
                return False
        return isinstance(other, device) and self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __enter__(self) -> "device":
        """``with device("cpu"):`` makes this the default device inside the block, as torch's
        device context does; the previous default comes back on exit, nested blocks included."""
        global _default
        _entered.append(_default)
        _default = self
        return self

    def __exit__(self, *exc) -> None:
        global _default
        _default = _entered.pop()


CPU = device("cpu")


_default = CPU
_entered: list = []  # the defaults that ``with device(...)`` blocks replaced, innermost last


def set_default_device(d) -> None:
    """The device factories (``zeros``, ``tensor``, ``arange`` ...) use when given none; None means
    cpu again. Process-wide. ``from_numpy`` and ``as_tensor`` of an array stay on the cpu: they
    share the array's memory."""
    global _default
    _default = CPU if d is None else device(d)


def get_default_device() -> device:
    """torch.get_default_device: the device factory functions use when given none (cpu unless
    set_default_device changed it)."""
    return _default


def device_or_default(d) -> device:
    """``d`` as a device; the default device when it is None."""
    return _default if d is None else device(d)

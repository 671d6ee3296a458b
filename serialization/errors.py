"""The errors ``tritensor.load`` raises for a malformed file (a disallowed global is torch's
``pickle.UnpicklingError``, raised where it is found)."""
from __future__ import annotations


class CheckpointError(RuntimeError):
    """:func:`tritensor.load` was given a file that is not a valid checkpoint (tritensor's, a
    safetensors file, or torch's): the message names the file and the field; nothing in the file
    was run."""


class Bad(Exception):
    """What is wrong, and where in the file; ``load`` turns it into a CheckpointError naming the file."""


def count(v, what: str) -> int:
    """``v`` if it is a non-negative int (not a bool, not 1.5), else Bad naming ``what``."""
    if type(v) is not int or v < 0:
        raise Bad(f"{what} is {v!r}, expected a non-negative integer")
    return v


MAX_ELEMENTS = 1 << 62  # no shape, stride or offset in a sane file comes near this


def check_view(shape, stride, offset, numel: int, where: str) -> tuple:
    """Check a tensor's ``shape``/``stride``/``offset`` (elements) against a storage of ``numel``
    elements: integers, none negative or huge, and every element inside the storage."""
    if not isinstance(shape, (tuple, list)) or not isinstance(stride, (tuple, list)) or len(shape) != len(stride):
        raise Bad(f"{where}: size {shape!r} and stride {stride!r} must be sequences of the same length")
    shape = tuple(count(s, f"{where}: size[{i}]") for i, s in enumerate(shape))
    stride = tuple(count(s, f"{where}: stride[{i}]") for i, s in enumerate(stride))
    offset = count(offset, f"{where}: storage offset")
    if any(v > MAX_ELEMENTS for v in shape + stride + (offset,)):
        raise Bad(f"{where}: size {list(shape)}, stride {list(stride)} or offset {offset} is beyond any storage")
    if 0 in shape:
        if offset > numel:
            raise Bad(f"{where}: storage offset {offset} is past the end of its storage of {numel} elements")
        return shape, stride, offset
    last = offset + sum((s - 1) * st for s, st in zip(shape, stride))
    if last >= numel:
        raise Bad(f"{where}: a view of size {list(shape)}, stride {list(stride)} at offset {offset} reaches "
                  f"element {last}, past the end of its storage of {numel} elements")
    return shape, stride, offset

"""``Generator``: a stream of counter-based random numbers (PyTorch's ``torch.Generator``).

A generator is a (seed, offset) pair over the Philox counters ``tl.rand``/``tl.randn``/
``tl.randint4x`` draw from (``triton_kernels/random.py``): a call that needs n
numbers takes n counters starting at ``offset`` and moves ``offset`` on, so numbers depend on
(seed, offset, position) only: the same after ``manual_seed`` in CPU and GPU mode, whatever the
block size. ``default_generator`` is the one every random op uses unless given ``generator=``;
``tritensor.manual_seed`` seeds it and returns it, as in PyTorch. The stream is shared by all
devices (PyTorch keeps one per device; here a seed gives the same numbers on every device).
"""
from __future__ import annotations

import os
import struct
import threading

import numpy as np

from ..runtime import dtype as dt
from ..runtime.device import CPU, device
from .tensor_base import TensorBase

_DEFAULT_SEED = 67280421310721
_STATE_BYTES = 16  # get_state(): seed and offset, a little-endian uint64 each


class Generator:
    """``Generator(device='cpu')``: its own (seed, offset); pass it as ``generator=`` to random ops."""

    def __init__(self, device="cpu"):
        self.device = device if not isinstance(device, str) else _device(device)
        self._lock = threading.Lock()
        self._seed = _DEFAULT_SEED & 0x7FFFFFFF
        self._initial = _DEFAULT_SEED
        self._offset = 0

    def manual_seed(self, seed) -> "Generator":
        """Restart the stream from ``seed``; returns the generator."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"manual_seed: seed must be an int, got {type(seed).__name__}")
        with self._lock:
            self._initial = int(seed)
            self._seed = int(seed) & 0x7FFFFFFF  # the Philox key tl.rand takes
            self._offset = 0
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the new seed."""
        s = int.from_bytes(os.urandom(8), "little") & (2**63 - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        """torch.Generator.initial_seed: the seed this generator was last seeded with."""
        return self._initial

    def get_state(self):
        """The state as a ByteTensor (uint8, on the cpu) of 16 bytes: the seed, then the offset, each
        a little-endian 64-bit integer, the layout of torch's Philox (CUDA) generator state, which a
        (seed, offset) generator is. ``set_state`` of it resumes the stream where it was."""
        out = TensorBase._empty((_STATE_BYTES,), dt.uint8, CPU)
        with self._lock:
            packed = struct.pack("<QQ", self._initial & 0xFFFFFFFFFFFFFFFF, self._offset)
        out.numpy()[...] = np.frombuffer(packed, dtype=np.uint8)
        return out

    def set_state(self, new_state) -> "Generator":
        """Restore a state ``get_state`` returned (of this or any generator): the numbers drawn after
        it are the ones drawn after that ``get_state``."""
        if not isinstance(new_state, TensorBase):
            raise TypeError(f"expected a tritensor.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype is not dt.uint8:
            raise TypeError("RNG state must be a tritensor.ByteTensor")
        if new_state.numel() != _STATE_BYTES:
            raise RuntimeError("RNG state is wrong size")
        seed, offset = struct.unpack("<QQ", bytes(new_state.reshape(-1).tolist()))
        self.manual_seed(seed)
        with self._lock:
            self._offset = offset % (2**32)
        return self

    def _take(self, n: int) -> tuple:
        """(seed, offset) for a draw of ``n`` numbers; moves the offset past them (a multiple of 4:
        Philox makes 4 numbers per counter block, so streams of later calls stay apart)."""
        with self._lock:
            seed, off = self._seed, self._offset
            self._offset = (off + ((int(n) + 3) // 4) * 4) % (2**32)
        return seed, off

    def __repr__(self) -> str:
        return f"<tritensor.Generator object, device={self.device}, initial_seed={self._initial}>"


def _device(d):
    return device(d)


default_generator = Generator()


def get_rng_state():
    """``tritensor.get_rng_state()``: the default generator's state (a ByteTensor)."""
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    """``tritensor.set_rng_state(state)``: restore the default generator's state."""
    default_generator.set_state(new_state)


def resolve(generator, op: str) -> Generator:
    """``generator`` if given (checked), else the default generator."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"{op}(): argument 'generator' must be tritensor.Generator, not {type(generator).__name__}")
    return generator


def take_counters(n: int) -> tuple:
    """Reserve ``n`` Philox counters of the default generator: ``(seed, first counter)``. For ops
    that draw inside their own kernels with no ``generator=`` argument (dropout in
    ``scaled_dot_product_attention``), so they share the stream ``manual_seed`` restarts."""
    return default_generator._take(n)

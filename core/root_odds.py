"""torch's odd root-level names that belong to no op family: build flags, thread set-up, the tensor
predicates that torch also exposes as functions, ``get_device_module``, ``from_file`` and torch's two
exception types. They live together so the root ``__init__.py`` only imports them.

The build flags answer what tritensor has, not what torch's build had: ``has_lapack`` is True because
``tritensor.linalg`` covers LAPACK's factorizations and solvers (as Triton kernels); ``has_mkl``,
``has_openmp`` and ``has_spectral`` are False (no MKL, no OpenMP thread pool, no FFT).
"""
from __future__ import annotations

import functools
import os
import sys

import numpy as np

from ..runtime import cuda
from ..runtime import dtype as dt
from ..runtime.device import device as _device_cls
from .factories import from_numpy
from .tensor_base import TensorBase

__all__ = ["has_lapack", "has_mkl", "has_openmp", "has_spectral", "init_num_threads", "is_inference",
           "is_distributed", "get_device_module", "thread_safe_generator", "from_file", "FatalError",
           "AcceleratorError"]

has_lapack = True
has_mkl = False
has_openmp = False
has_spectral = False


class FatalError(Exception):
    """torch.FatalError: an unrecoverable error of the runtime (torch raises it from C++)."""


class AcceleratorError(RuntimeError):
    """Exception raised while executing on device"""


def init_num_threads() -> None:
    """``torch.init_num_threads()``: in torch it copies ``set_num_threads``' value into a new thread's OpenMP
    pool. tritensor's host work has no per-thread pool (``get_num_threads`` is process-wide), so a new
    thread already sees the value and there is nothing to copy."""


def _tensor_arg(where: str, value):
    if not isinstance(value, TensorBase):
        raise TypeError(f"{where}(): argument 'input' (position 1) must be Tensor, not {type(value).__name__}")
    return value


def is_inference(input) -> bool:
    """``torch.is_inference(input)``: whether ``input`` is an inference tensor (made in ``inference_mode``)."""
    return _tensor_arg("is_inference", input).is_inference()


def is_distributed(input) -> bool:
    """``torch.is_distributed(input)``: False, as in torch for every dense tensor (the flag belonged to the
    removed THD distributed tensors)."""
    _tensor_arg("is_distributed", input)
    return False


@functools.cache
def get_device_module(device=None):
    """``torch.get_device_module(device=None)``: the module of a device type (``tritensor.cuda`` for "cuda");
    with no device, the current accelerator's, or the CPU's when there is none."""
    if isinstance(device, _device_cls):
        name = device.type
    elif isinstance(device, str):
        name = _device_cls(device).type
    elif device is None:
        name = "cuda" if cuda.is_available() else "cpu"
    else:
        raise RuntimeError(f"Invalid value of device '{device}', expect torch.device, str, or None")
    root = sys.modules[__name__.split(".")[0]]
    module = getattr(root, name, None)
    if module is None:
        raise RuntimeError(f"Device '{name}' does not have a corresponding module registered as 'torch.{name}'.")
    return module


def thread_safe_generator():
    """``torch.thread_safe_generator()``: the DataLoader thread worker's generator inside a thread worker,
    else None (the global generator). tritensor's DataLoader runs its workers as processes only, so
    every caller is in the main process or a process worker and gets None, as torch gives them."""
    return None


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None, pin_memory=False):
    """``torch.from_file(filename, shared=None, size=0, *, dtype=None, ...)``: a CPU tensor of ``size``
    elements whose memory is the file mapped with numpy's memmap: with ``shared=True`` writes go to the
    file (created, or grown, to fit), else the mapping is private (copy on write)."""
    if not isinstance(filename, str):
        raise TypeError(f"from_file(): argument 'filename' (position 1) must be str, not {type(filename).__name__}")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise TypeError(f"from_file(): argument 'size' (position 3) must be a non-negative int, not {size!r}")
    d = dt.get_default_dtype() if dtype is None else dtype
    if not isinstance(d, dt.dtype):
        raise TypeError(f"from_file(): argument 'dtype' must be torch.dtype, not {type(d).__name__}")
    if device is not None and _device_cls(device).type != "cpu":
        raise RuntimeError("from_file: only CPU tensors can be mapped to files")
    if pin_memory:
        raise RuntimeError("from_file: tensors backed by a memory-mapped file cannot be created in pinned memory")
    np_dtype = d.np
    need = size * np.dtype(np_dtype).itemsize
    if shared:
        if not os.path.exists(filename) or os.path.getsize(filename) < need:
            with open(filename, "ab") as f:
                f.truncate(need)
    elif not os.path.exists(filename):
        raise RuntimeError(f"unable to open file <{filename}> in read-only mode: No such file or directory (2)")
    have = os.path.getsize(filename)
    if have < need:
        raise RuntimeError(f"file <{filename}> size <{have}> is smaller than the required mapping size <{need}>")
    if size == 0:
        return from_numpy(np.empty(0, dtype=np_dtype))
    mapped = np.memmap(filename, dtype=np_dtype, mode="r+" if shared else "c", shape=(size,))
    return from_numpy(mapped)

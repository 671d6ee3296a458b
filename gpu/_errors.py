"""torch.cuda's error types: ``CudaError`` (a CUDA call's error code and its message) and ``check_error``.

Error codes are the driver's (``CUresult``) or the runtime's (``cudaError_t``); the two agree for
the codes both have. The message is the runtime's ``cudaGetErrorString`` when cuda-python has the
runtime bindings, else the code's name.
"""
from __future__ import annotations

try:
    from cuda.bindings import runtime as _cudart
except ImportError:  # CPU mode without cuda-python
    _cudart = None


class cudaStatus:
    """The two CUDA status codes torch.cuda names: success, and an asynchronous operation not yet done."""

    SUCCESS: int = 0
    ERROR_NOT_READY: int = 34


class DeferredCudaCallError(Exception):
    """torch's error for a call queued until CUDA's lazy initialisation that then failed. tritensor
    queues no calls (a device is initialised when first used), so it raises none; the type is here
    for code that catches it."""


class CudaError(RuntimeError):
    """A CUDA call failed with error ``code`` (torch.cuda.CudaError)."""

    def __init__(self, code: int) -> None:
        self.code = int(code)
        msg = None
        if _cudart is not None:
            try:
                err, text = _cudart.cudaGetErrorString(_cudart.cudaError_t(self.code))
                msg = text.decode() if isinstance(text, bytes) else str(text)
            except Exception:  # a code the runtime does not know
                msg = None
        super().__init__(f"{msg or 'unknown error'} ({self.code})")


def check_error(res) -> None:
    """Raise :class:`CudaError` unless ``res`` (an error code) is success (0)."""
    if int(res) != 0:
        raise CudaError(int(res))


def cudart():
    """The CUDA runtime's Python bindings (cuda-python's ``cuda.bindings.runtime``), as torch.cuda.cudart()."""
    if _cudart is None:
        raise RuntimeError("cudart: cuda-python's runtime bindings (cuda.bindings.runtime) are not installed")
    return _cudart

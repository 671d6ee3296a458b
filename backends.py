"""``tritensor.backends``: PyTorch's precision switches, read by the matmul and conv launchers.

``backends.cuda.matmul.allow_tf32`` (default False, as in PyTorch >= 1.12) lets fp32 matmuls run
``tl.dot`` in TF32 on tensor cores: ~8x the fp32 throughput on an H100 for a 10-bit mantissa.
``backends.cudnn.allow_tf32`` (default True, as in PyTorch) does the same for convolutions.
Both only matter in GPU mode: the interpreter always computes in IEEE fp32.
"""
from __future__ import annotations


class _Flag:
    """A namespace with typed boolean switches; assigning anything but a bool is an error."""

    _names: tuple = ()

    def __setattr__(self, name, value):
        if name not in self._names:
            raise AttributeError(f"{type(self).__name__} has no setting {name!r}; expected one of {self._names}")
        if not isinstance(value, bool):
            raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
        object.__setattr__(self, name, value)


class _MatmulFlags(_Flag):
    _names = ("allow_tf32",)

    def __init__(self):
        self.allow_tf32 = False


class _CudnnFlags(_Flag):
    _names = ("allow_tf32",)

    def __init__(self):
        self.allow_tf32 = True


class _CudaBackend:
    def __init__(self):
        self.matmul = _MatmulFlags()


cuda = _CudaBackend()
cudnn = _CudnnFlags()

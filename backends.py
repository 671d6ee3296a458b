"""``tritensor.backends``: PyTorch's precision switches, read by the matmul and conv launchers.

``backends.cuda.matmul.allow_tf32`` (default False, as in PyTorch >= 1.12) lets fp32 matmuls run
``tl.dot`` in TF32 on tensor cores: ~8x the fp32 throughput on an H100 for a 10-bit mantissa.
``backends.cudnn.allow_tf32`` (default True, as in PyTorch) does the same for convolutions.
Both only matter in GPU mode: the interpreter always computes in IEEE fp32.

The rest of torch's switches that training scripts set are accepted and kept, with torch's
defaults: ``cudnn.benchmark``/``deterministic``/``enabled`` (tritensor has no cuDNN: its kernels
are deterministic for a given shape and autotune once per shape whatever ``benchmark`` says) and
``cuda.matmul.allow_fp16_reduced_precision_reduction`` / ``allow_bf16_...`` (its matmuls always
accumulate in fp32). ``mps.is_available()`` is False. ``cuda``, ``cudnn`` and ``mps`` are
submodules, as torch's, importable as ``tritensor.backends.cudnn``: each is a module object whose
settings are checked on assignment, registered in ``sys.modules`` under its name.
"""
from __future__ import annotations

import sys
import types


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
    _names = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")

    def __init__(self):
        object.__setattr__(self, "_fp32_precision", "highest")  # torch.get_float32_matmul_precision()
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    # allow_tf32 is a view of torch.set_float32_matmul_precision's setting, as in torch: "highest" is
    # IEEE fp32, "high" and "medium" let fp32 matmuls run in TF32; setting the flag sets "high"/"highest".
    @property
    def allow_tf32(self) -> bool:
        return self._fp32_precision != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        object.__setattr__(self, "_fp32_precision", "high" if value else "highest")


class _FlagModule(types.ModuleType):
    """A submodule of backends whose settings (``_names``) take bools only and which takes no other
    attribute, as torch's modules of properties."""

    _names: tuple = ()

    def __init__(self, name: str, **settings):
        super().__init__(f"{__name__}.{name}")
        for key, value in settings.items():
            setattr(self, key, value)

    def __setattr__(self, name, value):
        if name not in self._names:
            raise AttributeError(f"{self.__name__} has no setting {name!r}; expected one of {self._names}")
        if not isinstance(value, bool):
            raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
        super().__setattr__(name, value)


class _CudaModule(_FlagModule):
    def __init__(self):
        super().__init__("cuda")
        types.ModuleType.__setattr__(self, "matmul", _MatmulFlags())

    @staticmethod
    def is_built() -> bool:
        """tritensor always carries its CUDA path (torch's answer for a CUDA build)."""
        return True


class _CudnnModule(_FlagModule):
    _names = ("allow_tf32", "benchmark", "deterministic", "enabled")

    def __init__(self):
        super().__init__("cudnn", allow_tf32=True, benchmark=False, deterministic=False, enabled=True)

    @staticmethod
    def is_available() -> bool:
        """False: tritensor's convolutions are its own Triton kernels, not cuDNN's."""
        return False

    @staticmethod
    def version():
        return None


class _MpsModule(_FlagModule):
    def __init__(self):
        super().__init__("mps")

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_built() -> bool:
        return False


cuda = _CudaModule()
cudnn = _CudnnModule()
mps = _MpsModule()
for _module in (cuda, cudnn, mps):
    sys.modules[_module.__name__] = _module  # so `import tritensor.backends.cudnn` finds it, as torch's

"""tritensor: a torch-free GPU tensor library whose compute is hand-written Triton kernels.

Importing picks the execution mode first (``core/mode.py``): GPU mode when a CUDA driver and
device answer, otherwise CPU mode, where the same kernels run in Triton's interpreter.
"""
from .core import mode as _mode  # noqa: F401  (must run before any Triton kernel is defined)

import sys as _sys

from . import backends
from .core import cuda
from .core.device import device
from .core.dtype import (bfloat16, bool_ as bool, float16, float32, float64, int32, int64, dtype,
                         get_default_dtype, promote_types, result_type)
from .core.factories import (arange, empty, empty_like, from_numpy, full, full_like, initial_seed, manual_seed,
                             ones, ones_like, rand, rand_like, randn, randn_like, tensor, zeros, zeros_like)
from .core.tensor import Size, Tensor, broadcast_shapes
from .core.functional import *  # noqa: F401,F403  (torch-style free functions: exp, add, sum, ...)
from . import autograd
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .autograd.functions import install as _install_autograd

_install_autograd(Tensor, globals())  # differentiable Tensor methods and free functions (autograd/functions)
from . import nn, optim  # noqa: E402
from .serialization import load, save  # noqa: E402
from . import comm  # noqa: E402  (usable as `import tritensor.comm as dist`)

half, float, double, long, int = float16, float32, float64, int64, int32

_sys.modules[__name__ + ".cuda"] = cuda

__version__ = "0.1.0"

"""tritensor: a torch-free GPU tensor library whose compute is hand-written Triton kernels.

Importing picks the execution mode first (``runtime/mode.py``): GPU mode when a CUDA driver and
device answer, otherwise CPU mode, where the same kernels run in Triton's interpreter.
"""
if __name__ != "tritensor":
    # Imported by path under another name: pytest imports a folder's __init__.py so, under the
    # folder's name, and this folder is the package. Relative imports then resolve against the
    # installed tritensor, so a process never holds a second copy of the library (its own state,
    # its own fix-ups to Triton's interpreter).
    __package__ = "tritensor"

from .runtime import mode as _mode  # noqa: F401  (must run before any Triton kernel is defined)

import sys as _sys

from . import backends
from .runtime.device import device, get_default_device, set_default_device
from .runtime.dtype import (bfloat16, bool_ as bool, float16, float32, float64, int32, int64, dtype,
                         get_default_dtype, promote_types, result_type)
from .runtime.dtype import finfo, iinfo, int8, int16, uint8  # PyTorch surface, part 1: small integers
from .runtime.dtype import int16 as short
from .runtime.dtype import uint16, uint32, uint64  # torch's barebones unsigned types
from .runtime.dtype import (float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz,  # noqa: F401
                            float8_e8m0fnu)
from .core.factories import (arange, empty, empty_like, from_numpy, full, full_like, initial_seed, manual_seed,
                             seed, ones, ones_like, rand, rand_like, randn, randn_like, tensor, zeros, zeros_like)
from .core.generator import Generator, default_generator, get_rng_state, set_rng_state
from .core.creation import (as_tensor, eye, linspace, logspace, randint, randint_like, randperm, tril_indices,
                            triu_indices)
from .core.tensor import Size, Tensor, broadcast_shapes
from .runtime.dtype import set_default_dtype
from .core.factories_more import asarray, empty_permuted, empty_strided, frombuffer, range, scalar_tensor
from .core.switches import (  # torch's global switches (core/switches.py says what each steers)
    are_deterministic_algorithms_enabled, get_deterministic_debug_mode, get_float32_matmul_precision,
    get_num_interop_threads, get_num_threads, is_deterministic_algorithms_warn_only_enabled, is_storage,
    is_warn_always_enabled, set_default_tensor_type, set_deterministic_debug_mode, set_float32_matmul_precision,
    set_flush_denormal, set_num_interop_threads, set_num_threads, set_warn_always, typename,
    use_deterministic_algorithms)
from .core.shape import channels_last, contiguous_format, memory_format, preserve_format
from .core.dlpack import from_dlpack  # zero-copy interop
from .core.printing import get_printoptions, printoptions, set_printoptions  # torch's print rules
from .core.tensor_types import (BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor,
                                HalfTensor, IntTensor, LongTensor, ShortTensor)  # PyTorch's legacy type names
from .core.ops.elementwise import can_cast
from .core.shape import layout, strided
from math import e, inf, nan, pi  # torch.pi, torch.e, torch.inf, torch.nan: Python floats, as torch's

newaxis = None  # torch.newaxis, NumPy's
from .core.functional import *  # noqa: F401,F403  (torch-style free functions from the op table: exp, add, sum ...)
from . import autograd  # registers its layer with core/dispatch.py: every op call above records from here on
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .autograd import inference_mode, is_inference_mode_enabled
from . import nn, optim
from .nn.functional_rnn import (gru, gru_cell, lstm, lstm_cell, rnn_relu, rnn_relu_cell, rnn_tanh,  # torch's
                                 rnn_tanh_cell)  # native recurrent functions: what nn.LSTM/GRU/RNN run
from .nn.functional_root import *  # noqa: F401,F403  (torch's root forms of nn ops: torch.conv1d, torch.embedding ...)
from . import amp  # registers the autocast layer with core/dispatch.py
from .amp import autocast, get_autocast_dtype, is_autocast_enabled
from .serialization import load, save
from .serialization.zip_container import PyTorchFileReader, PyTorchFileWriter  # torch.save's zip container
from . import compiler  # torch.compiler: reset()
from .compiler import compile  # torch.compile(mode="reduce-overhead"): a step captured into CUDA graphs
from . import comm  # usable as `import tritensor.comm as dist`
from .nn import parallel as _nn_parallel  # tritensor.nn.parallel (DDP) sits on comm: imported after it
# torch.nn.DataParallel is nn.parallel's (nn/parallel/data_parallel.py, torch's file). tritensor.nn cannot
# import it: importing any module of nn.parallel runs that package, which loads DDP and so comm, a layer
# above nn. The root, above both, gives nn the name once both are loaded.
nn.DataParallel = _nn_parallel.DataParallel
from . import module_aliases  # torch's paths for comm and elastic (tritensor.distributed ...): see its docstring
from . import distributed  # tritensor.comm under torch's name, through module_aliases' finder
from . import futures  # torch.futures; tritensor.comm.Future is the same class
from . import accelerator, distributions, jit, profiler, testing  # torch.accelerator, .distributions, .jit ...
from .autograd import is_anomaly_check_nan_enabled, is_anomaly_enabled
from .autograd import set_anomaly_enabled
from .amp import (autocast_decrement_nesting, autocast_increment_nesting, clear_autocast_cache,  # torch's C++ state
                  get_autocast_cpu_dtype, get_autocast_gpu_dtype, is_autocast_cache_enabled, is_autocast_cpu_enabled,
                  set_autocast_cache_enabled, set_autocast_cpu_dtype, set_autocast_cpu_enabled, set_autocast_dtype,
                  set_autocast_enabled, set_autocast_gpu_dtype)
from .core.root_odds import (AcceleratorError, FatalError, from_file, get_device_module, has_lapack, has_mkl,
                             has_openmp, has_spectral, init_num_threads, is_distributed, is_inference,
                             thread_safe_generator)
from .core.vmap import vmap  # torch.vmap: runs the function once per slice (core/vmap.py says why)
from . import utils  # tritensor.utils.data: datasets, samplers, DataLoader (its DistributedSampler sits on comm)

half, float, double, long, int = float16, float32, float64, int64, int32

from . import gpu as cuda  # tritensor.cuda: devices, streams, memory, CUDA graphs (gpu/__init__.py says why the name)

_sys.modules[__name__ + ".cuda"] = cuda
_sys.modules[__name__ + ".cuda.amp"] = cuda.amp  # torch.cuda.amp (amp/cuda_amp.py)
# torch.cuda's submodules, one copy each
for _sub in ("memory", "random", "streams", "graphs", "green_contexts", "nvtx", "profiler"):
    _sys.modules[f"{__name__}.cuda.{_sub}"] = getattr(cuda, _sub)
from .gpu.streams import GenericEvent as Event, GenericStream as Stream  # torch.Stream/torch.Event: any device's
from .runtime.allocator import OutOfMemoryError  # torch.OutOfMemoryError is torch.cuda.OutOfMemoryError
from .runtime.memory import UntypedStorage  # torch.UntypedStorage: what Tensor.untyped_storage() returns
from .core.storage import TypedStorage  # torch.TypedStorage: what the deprecated Tensor.storage() returns
from .futures import Future  # torch.Future: torch.futures.Future
from .amp import GradScaler  # torch.GradScaler: torch.amp.GradScaler
from .core import linalg  # tritensor.linalg (torch.linalg): vector_norm, matrix_norm

_sys.modules[__name__ + ".linalg"] = linalg
from . import multiproc as multiprocessing  # tritensor.multiprocessing (multiproc.py says why the name)

_sys.modules[__name__ + ".multiprocessing"] = multiprocessing



def _assert(condition, message):
    """``torch._assert``: an ``assert`` that model code can call as a function."""
    assert condition, message


__version__ = "0.1.0"

"""``nn.DataParallel`` and ``nn.parallel.data_parallel`` (torch's): one process driving several GPUs.

Each forward scatters the inputs along ``dim`` over the devices, replicates the module onto them
(recorded copies of its parameters, its buffers copied from the first device), runs the replicas
at once (``parallel_apply``) and gathers the outputs on ``output_device``; autograd carries each
replica's gradients back into the original parameters. Everything here is device-to-device
copies within one process: no ``tritensor.comm`` collective is involved.
"""
from __future__ import annotations

import operator
import warnings
from itertools import chain

from ...autograd.grad_mode import is_grad_enabled
from ...runtime import cuda as _cuda
from ...runtime import mode
from ...runtime.device import device as _device
from ..modules.module import Module
from .parallel_apply import parallel_apply
from .replicate import _device_index, _restoring_context, replicate
from .scatter_gather import gather, scatter_kwargs

__all__ = ["DataParallel", "data_parallel"]

_IMBALANCE = """
    There is an imbalance between your GPUs. You may want to exclude GPU {} which
    has less than 75% of the memory or cores of GPU {}. You can do so by setting
    the device_ids argument to DataParallel, or by setting the CUDA_VISIBLE_DEVICES
    environment variable."""


def _check_balance(device_ids: list[int]) -> None:
    """torch's warning when one device has under 75% of another's memory, or else of its SMs."""
    with _restoring_context():
        props = [_cuda.get_device_properties(i) for i in device_ids]

    def warn_imbalance(get_prop) -> bool:
        values = [get_prop(p) for p in props]
        min_pos, min_val = min(enumerate(values), key=operator.itemgetter(1))
        max_pos, max_val = max(enumerate(values), key=operator.itemgetter(1))
        if min_val / max_val < 0.75:
            warnings.warn(_IMBALANCE.format(device_ids[min_pos], device_ids[max_pos]), stacklevel=3)
            return True
        return False

    if warn_imbalance(lambda p: p.total_memory):
        return
    warn_imbalance(lambda p: p.multi_processor_count)


def _output_index(device):
    """``output_device`` as an index: -1 for the host (-1, 'cpu' or a CPU device), as gather takes it."""
    if device == -1 or device == "cpu" or (not isinstance(device, int) and _device(device).type == "cpu"):
        return -1
    return _device_index(device)


def _check_on_source(module: Module, src) -> None:
    for t in chain(module.parameters(), module.buffers()):
        if t.device != src:
            raise RuntimeError("module must have its parameters and buffers "
                               f"on device {src} (device_ids[0]) but found one of "
                               f"them on device: {t.device}")


class DataParallel(Module):
    """Implements data parallelism at the module level: ``module`` is replicated on each of
    ``device_ids`` (default: all devices) every forward, the inputs are split along ``dim`` among
    the replicas, and the outputs are gathered on ``output_device`` (default ``device_ids[0]``).
    The module's parameters and buffers must be on ``device_ids[0]``; the replica there shares
    them, so in-place buffer updates (BatchNorm's running statistics) are kept. Without a GPU the
    module is called as it is and ``device_ids`` is empty."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        if not mode.GPU:
            self.module = module
            self.device_ids = []
            return
        if device_ids is None:
            device_ids = list(range(_cuda.device_count()))
        if output_device is None:
            output_device = device_ids[0]
        self.dim = dim
        self.module = module
        self.device_ids = [_device_index(x) for x in device_ids]
        self.output_device = _output_index(output_device)
        self.src_device_obj = _device("cuda", self.device_ids[0])
        _check_balance(self.device_ids)
        if len(self.device_ids) == 1:
            self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_on_source(self.module, self.src_device_obj)
        inputs, module_kwargs = self.scatter(inputs, kwargs, self.device_ids)
        # an empty input with an empty kwargs still runs the module once, on device_ids[0]
        if not inputs and not module_kwargs:
            inputs, module_kwargs = ((),), ({},)
        if len(self.device_ids) == 1:
            return self.module(*inputs[0], **module_kwargs[0])
        replicas = self.replicate(self.module, self.device_ids[:len(inputs)])
        outputs = self.parallel_apply(replicas, inputs, module_kwargs)
        return self.gather(outputs, self.output_device)

    def replicate(self, module: Module, device_ids) -> list:
        """The replicas of this forward, one per device: recorded copies under grad mode, detached
        ones without (a subclass may override how, as in torch)."""
        return replicate(module, device_ids, not is_grad_enabled())

    def scatter(self, inputs, kwargs, device_ids):
        """The positional and keyword arguments split along ``dim`` over ``device_ids``."""
        return scatter_kwargs(inputs, kwargs, device_ids, dim=self.dim)

    def parallel_apply(self, replicas, inputs, kwargs) -> list:
        """Each replica called on its piece of the inputs, on its device, all at once."""
        return parallel_apply(replicas, inputs, kwargs, self.device_ids[:len(replicas)])

    def gather(self, outputs, output_device):
        """The replicas' outputs joined along ``dim`` on ``output_device``."""
        return gather(outputs, output_device, dim=self.dim)


def data_parallel(module: Module, inputs, device_ids=None, output_device=None, dim: int = 0, module_kwargs=None):
    """The functional form of :class:`DataParallel`: ``module(*inputs, **module_kwargs)`` evaluated in
    parallel over ``device_ids``, the result on ``output_device`` (-1: the host)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    if not mode.GPU:
        raise RuntimeError("device type could not be determined")
    if device_ids is None:
        device_ids = list(range(_cuda.device_count()))
    if output_device is None:
        output_device = device_ids[0]
    device_ids = [_device_index(x) for x in device_ids]
    output_device = _output_index(output_device)
    src = _device("cuda", device_ids[0])
    _check_on_source(module, src)
    inputs, module_kwargs = scatter_kwargs(inputs, module_kwargs, device_ids, dim)
    if not inputs and not module_kwargs:
        inputs, module_kwargs = ((),), ({},)
    if len(device_ids) == 1:
        return module(*inputs[0], **module_kwargs[0])
    used = device_ids[:len(inputs)]
    replicas = replicate(module, used)
    outputs = parallel_apply(replicas, inputs, module_kwargs, used)
    return gather(outputs, output_device, dim)

"""``nn.parallel.replicate`` (torch's): copies of a module on several devices whose parameters are
recorded copies of the original's.

``nn.DataParallel`` runs one replica per device each forward. A replica's parameters are
device-to-device copies (``Tensor.to``) made under autograd, so the backward of every replica
sums into the original parameters on the first device: this is torch's differentiable broadcast,
and it needs no collective (the copies are one process's own). On the device the original lives
on, the replica gets an alias of it (a view: the same storage, recorded), as torch's broadcast
hands back the source tensors there; so in-place updates of buffers on that replica (BatchNorm's
running statistics) land in the original module, and those of the other replicas are lost.
"""
from __future__ import annotations

import contextlib
from collections import OrderedDict

from ...runtime import cuda as _cuda
from ...runtime.device import device as _device
from ..modules.module import Module

__all__ = ["replicate"]


def _device_index(device) -> int:
    """A CUDA device's index from an int, a 'cuda:N' string or a device (torch's ``_get_device_index``):
    None is the current device; a CPU device is a ValueError."""
    return _cuda._index(device)


@contextlib.contextmanager
def _restoring_context():
    """Work on other devices inside; afterwards the caller's current device's context is the
    driver's current one again. Queueing work on another device (a copy to it, a stream of it)
    makes that device's context current, and the next op on the current device, which reads its
    stream from a per-thread cache, would not switch it back."""
    index = _cuda.current_device()
    try:
        yield
    finally:
        _cuda._cu_device(index)


def _broadcast(tensors: list, devices: list[int], detach: bool) -> list[list]:
    """Per device, a copy of each tensor there: an alias on the tensor's own device, else a copy;
    recorded unless ``detach``."""
    out = []
    for index in devices:
        target = _device("cuda", index)
        copies = []
        for t in tensors:
            src = t.detach() if detach else t
            copies.append((src.view_as(src) if not detach else src) if t.device == target else src.to(target))
        out.append(copies)
    return out


def replicate(network: Module, devices, detach: bool = False) -> list:
    """One replica of ``network`` per device of ``devices`` (ints or devices), its parameters and
    buffers copied there. Parameter copies are recorded (gradients flow back to ``network``'s
    parameters) unless ``detach``; buffers are copied detached unless they require grad."""
    if not devices:
        return []
    params = list(network.parameters())
    buffers = list(network.buffers())
    if any(t.device.type != "cuda" for t in params + buffers):
        raise AssertionError("Broadcast function not implemented for CPU tensors")
    devices = [_device_index(d) for d in devices]
    grad_buffers = [b for b in buffers if b.requires_grad and not detach]
    plain_buffers = [b for b in buffers if not (b.requires_grad and not detach)]
    with _restoring_context():
        param_copies = _broadcast(params, devices, detach)
        grad_copies = _broadcast(grad_buffers, devices, detach=False)
        plain_copies = _broadcast(plain_buffers, devices, detach=True)
    param_index = {id(p): i for i, p in enumerate(params)}
    grad_index = {id(b): i for i, b in enumerate(grad_buffers)}
    plain_index = {id(b): i for i, b in enumerate(plain_buffers)}

    modules = list(network.modules())
    module_index = {id(m): i for i, m in enumerate(modules)}
    copies = [[m._replicate_for_data_parallel() for m in modules] for _ in devices]
    for j in range(len(devices)):
        for i, module in enumerate(modules):
            replica = copies[j][i]
            replica.__dict__["_former_parameters"] = former = OrderedDict()
            for key, child in module._modules.items():
                replica._modules[key] = None if child is None else copies[j][module_index[id(child)]]
            for key, param in module._parameters.items():
                if param is None:
                    replica._parameters[key] = None
                else:  # the copy is no leaf: a plain attribute of the replica, as in torch
                    replica.__dict__[key] = former[key] = param_copies[j][param_index[id(param)]]
            for key, buf in module._buffers.items():
                if buf is None:
                    replica._buffers[key] = None
                elif id(buf) in grad_index:
                    replica._buffers[key] = grad_copies[j][grad_index[id(buf)]]
                else:
                    replica._buffers[key] = plain_copies[j][plain_index[id(buf)]]
    return [copies[j][0] for j in range(len(devices))]

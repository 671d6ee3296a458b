"""``nn.parallel.parallel_apply`` (torch's): each replica called on its own device, in a thread of its
own, at once.

Each thread makes its replica's device current and runs on that device's current stream (taken in
the calling thread, as torch's), with the caller's grad mode and autocast state (both are
per-thread). An exception in a replica is re-raised in the caller, its type kept and its message
naming the replica and the device (torch's ``ExceptionWrapper`` text, the one the DataLoader's
workers use).
"""
from __future__ import annotations

import sys
import threading

from ...amp import autocast, get_autocast_dtype, is_autocast_enabled
from ...autograd.grad_mode import is_grad_enabled, set_grad_enabled
from ...core.tensor import Tensor
from ...runtime import cuda as _cuda
from ...runtime import mode
from ...utils.data.worker import ExceptionWrapper
from .replicate import _device_index, _restoring_context

__all__ = ["get_a_var", "parallel_apply"]


def get_a_var(obj):
    """The first tensor found in ``obj`` (a tensor, or nested lists, tuples and dicts), else None."""
    if isinstance(obj, Tensor):
        return obj
    if isinstance(obj, (list, tuple)):
        for result in map(get_a_var, obj):
            if isinstance(result, Tensor):
                return result
    if isinstance(obj, dict):
        for result in map(get_a_var, obj.items()):
            if isinstance(result, Tensor):
                return result
    return None


def parallel_apply(modules, inputs, kwargs_tup=None, devices=None) -> list:
    """Call ``modules[i](*inputs[i], **kwargs_tup[i])`` on ``devices[i]``, all at once in threads, and
    return the outputs in order. ``inputs[i]`` that is not a list or tuple is the one argument;
    without ``devices`` each replica runs on the device of its first tensor argument."""
    if len(modules) != len(inputs):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of inputs {len(inputs)}")
    if kwargs_tup is not None:
        if len(modules) != len(kwargs_tup):
            raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of "
                                 f"kwargs_tup {len(kwargs_tup)}")
    else:
        kwargs_tup = ({},) * len(modules)
    if devices is not None:
        if len(modules) != len(devices):
            raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of "
                                 f"devices {len(devices)}")
    else:
        devices = [None] * len(modules)
    if not mode.GPU:
        raise RuntimeError("Cannot access accelerator device when none is available.")
    devices = [None if d is None else _device_index(d) for d in devices]
    with _restoring_context():
        streams = [None if d is None else _cuda.current_stream(d) for d in devices]
    lock = threading.Lock()
    results = {}
    grad_enabled, autocast_enabled, autocast_dtype = is_grad_enabled(), is_autocast_enabled("cuda"), \
        get_autocast_dtype("cuda")

    def worker(i, module, input, kwargs, device=None, stream=None):
        set_grad_enabled(grad_enabled)
        if device is None:
            t = get_a_var(input)
            if t is None:
                with lock:
                    results[i] = ExceptionWrapper(
                        (AssertionError, AssertionError(), None),
                        f"in replica {i}, no device was provided and no tensor input was found; "
                        "device cannot be resolved")
                return
            device = t.get_device()
        try:
            _cuda.set_device(device)
            if stream is None:
                stream = _cuda.current_stream(device)
            with _cuda.stream(stream), autocast("cuda", dtype=autocast_dtype, enabled=autocast_enabled):
                output = module(*(input if isinstance(input, (list, tuple)) else (input,)), **kwargs)
            with lock:
                results[i] = output
        except Exception:
            with lock:
                results[i] = ExceptionWrapper(sys.exc_info(), f"in replica {i} on device {device}")

    work = list(zip(modules, inputs, kwargs_tup, devices, streams))
    if len(work) > 1:
        threads = [threading.Thread(target=worker, args=(i, *args)) for i, args in enumerate(work)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        # in the caller's thread: its current device is put back afterwards
        previous = _cuda.current_device()
        try:
            worker(0, *work[0])
        finally:
            _cuda.set_device(previous)
    outputs = []
    for i in range(len(inputs)):
        output = results[i]
        if isinstance(output, ExceptionWrapper):
            output.reraise()
        outputs.append(output)
    return outputs

"""The stateless DDP communication hooks, as torch's ``ddp_comm_hooks.default_hooks``.

Why they exist: DDP's default reduction is ``allreduce_hook``; the compression hooks trade
precision for half the bytes. Each hook is ``hook(process_group, bucket) -> Future`` of the
reduced flat buffer; ``process_group=None`` means the default group.

* ``allreduce_hook``: average-allreduce the bucket (``ReduceOp.AVG``: the mean, divided on the host).
* ``fp16_compress_hook`` / ``bf16_compress_hook``: cast the bucket to fp16/bf16, average-allreduce
  (the transport accumulates and divides in fp32 and rounds once), copy back into the fp32 buffer.
* ``fp16_compress_wrapper(hook)`` / ``bf16_compress_wrapper(hook)``: run another hook (e.g.
  PowerSGD) on the compressed buffer and decompress its result.
"""
from __future__ import annotations

from ....runtime.dtype import bfloat16, float16
from ... import Future, ReduceOp, all_reduce

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "fp16_compress_wrapper",
           "bf16_compress_wrapper"]


def _allreduce_fut(process_group, tensor) -> Future:
    """Average ``tensor`` over the group in place; a future of ``tensor``.

    ``ReduceOp.AVG`` divides on the host copy the transport reduces anyway, instead of a
    ``div_`` kernel over the whole bucket first (in CPU mode an interpreter pass of ~50 ns an
    element); for a power-of-two world size it is bitwise what dividing first gives (that division is exact)."""
    work = all_reduce(tensor, op=ReduceOp.AVG, group=process_group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def allreduce_hook(process_group, bucket) -> Future:
    """Plain allreduce of the bucket, averaged: DDP's behaviour without a hook."""
    return _allreduce_fut(process_group, bucket.buffer())


def _compress_hook(dtype, process_group, bucket) -> Future:
    buffer = bucket.buffer()
    compressed = buffer.to(dtype)
    # the mean in fp32 on the host, rounded to ``dtype`` once (see _allreduce_fut)
    work = all_reduce(compressed, op=ReduceOp.AVG, group=process_group, async_op=True)

    def decompress(fut):
        buffer.copy_(fut.value()[0])
        return buffer

    return work.get_future().then(decompress)


def fp16_compress_hook(process_group, bucket) -> Future:
    """Allreduce the bucket cast to float16, then copy the mean back into the fp32 bucket."""
    return _compress_hook(float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket) -> Future:
    """Allreduce the bucket cast to bfloat16, then copy the mean back into the fp32 bucket."""
    return _compress_hook(bfloat16, process_group, bucket)


def _compress_wrapper(dtype, hook):
    if not callable(hook):
        raise TypeError(f"hook: expected a callable communication hook, got {type(hook).__name__}")

    def wrapper(hook_state, bucket) -> Future:
        buffer = bucket.buffer()
        bucket.set_buffer(buffer.to(dtype))
        fut = hook(hook_state, bucket)
        if not isinstance(fut, Future):
            raise TypeError(f"{getattr(hook, '__name__', 'hook')} must return a tritensor.comm.Future, "
                            f"got {type(fut).__name__}")

        def decompress(f):
            buffer.copy_(f.value())
            bucket.set_buffer(buffer)
            return buffer

        return fut.then(decompress)

    wrapper.__name__ = f"{dtype.name}_compress_wrapper({getattr(hook, '__name__', 'hook')})"
    return wrapper


def fp16_compress_wrapper(hook):
    """``hook`` run on the bucket cast to float16; its result is cast back into the bucket."""
    return _compress_wrapper(float16, hook)


def bf16_compress_wrapper(hook):
    """``hook`` run on the bucket cast to bfloat16; its result is cast back into the bucket."""
    return _compress_wrapper(bfloat16, hook)

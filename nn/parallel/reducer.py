"""The gradient reducer behind :class:`~tritensor.nn.parallel.DistributedDataParallel`.

Why it exists: DDP's work during backward is here, apart from the module wrapper.

* **Buckets** (:func:`assign_buckets`): parameters in *reverse* registration order (backward
  produces the last layers' gradients first), grouped by dtype and device, a bucket closing
  once it holds ``limit`` bytes; the first bucket's limit is ``min(1 MiB, cap)`` (PyTorch's
  ``_DEFAULT_FIRST_BUCKET_BYTES``, so communication starts early), the others ``cap``.
* **Readiness**: a post-accumulate-grad hook on every parameter copies its ``.grad`` into its
  bucket's flat buffer; when a bucket's last gradient arrives, the bucket is handed to the
  communication thread at once, while backward goes on computing earlier layers.
* **Communication thread** (:class:`_CommRunner`): calls the comm hook for bucket 0, 1, ...
  in index order and waits for each hook's future before calling the next. Every rank thus
  posts its collectives (including those a hook chains in future callbacks, as PowerSGD
  does) in the same order, which the transport requires; the price is that two buckets'
  communications do not overlap each other, only the backward pass.
* **Finalize**: when the last parameter is ready (still inside ``backward``), wait for the
  thread (bounded by the group's timeout), copy each bucket's result into the ``.grad``s,
  and re-raise a hook's error there, so ``backward`` raises it.
"""
from __future__ import annotations

import threading
import time

from ...autograd.grad_mode import no_grad
from ...comm import collectives
from ...futures import Future
from ...comm.grad_bucket import DEFAULT_FIRST_BUCKET_BYTES, GradBucket
from ...core.factories import zeros

__all__ = ["assign_buckets", "Reducer", "DEFAULT_FIRST_BUCKET_BYTES"]


def assign_buckets(params, cap_bytes: int, first_bytes: int = DEFAULT_FIRST_BUCKET_BYTES) -> list:
    """Lists of parameter indices, one per bucket, bucket 0 holding the last-registered ones."""
    limits = [min(first_bytes, cap_bytes), cap_bytes]
    open_buckets: dict = {}  # (dtype, device) -> [indices, bytes, limit index]
    out = []
    for i in reversed(range(len(params))):
        p = params[i]
        key = (str(p.dtype), str(p.device))
        b = open_buckets.setdefault(key, [[], 0, 0])
        b[0].append(i)
        b[1] += p.numel() * p.dtype.itemsize
        if b[1] >= limits[min(b[2], 1)]:
            out.append(b[0])
            open_buckets[key] = [[], 0, b[2] + 1]
    out.extend(b[0] for b in open_buckets.values() if b[0])
    return out


class _CommRunner:
    """One backward pass's communication: hooks called in bucket order on a thread."""

    def __init__(self, reducer: "Reducer"):
        self.r = reducer
        n = len(reducer.buckets)
        self.ready = [threading.Event() for _ in range(n)]
        self.results: list = [None] * n
        self.launch_times: list = [None] * n
        self.error: BaseException | None = None
        self.failed_bucket: int | None = None
        self.cancelled = False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tritensor-ddp-comm", daemon=True)
        self.thread.start()

    def _run(self):
        r = self.r
        try:
            for b, bucket in enumerate(r.buckets):
                while not self.ready[b].wait(0.5):
                    if self.cancelled:
                        return
                self.launch_times[b] = time.monotonic()
                fut = r.hook(r.hook_state, bucket)
                if not isinstance(fut, Future):
                    raise TypeError(f"the communication hook {r.hook_name} must return a tritensor.comm.Future, "
                                    f"got {type(fut).__name__}")
                self.results[b] = fut.wait(r.timeout)
        except BaseException as e:  # noqa: BLE001 - re-raised by finalize in backward's thread
            self.error, self.failed_bucket = e, b
        finally:
            self.done.set()


class Reducer:
    """Buckets, readiness bookkeeping and the comm hook of one DDP module."""

    def __init__(self, params, names, process_group, world_size: int, timeout: float, cap_bytes: int,
                 find_unused_parameters: bool, gradient_as_bucket_view: bool, default_hook):
        self.params, self.names = params, names
        self.process_group, self.world_size, self.timeout = process_group, world_size, timeout
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.hook, self.hook_state, self.hook_name = default_hook, process_group, "allreduce_hook"
        self.hook_registered = False
        indices = assign_buckets(params, cap_bytes)
        self.bucket_indices = indices
        self.buckets: list[GradBucket] = []
        self.where = {}  # param index -> (bucket, offset)
        for b, idx in enumerate(indices):
            offsets, off = [], 0
            for i in idx:
                self.where[i] = (b, off)
                offsets.append(off)
                off += params[i].numel()
            p0 = params[idx[0]]
            buf = zeros(off, dtype=p0.dtype, device=p0.device)
            self.buckets.append(GradBucket(b, buf, [params[i] for i in idx], offsets, b == len(indices) - 1))
        self.views = {i: self._view(i) for i in range(len(params))}  # slots in the persistent buffers
        self.expect_hooks = False
        self.runner: _CommRunner | None = None
        self.last_launch_times: list = []
        self.handles = [p.register_post_accumulate_grad_hook(self._hook_for(i)) for i, p in enumerate(params)]

    def _view(self, i):
        b, off = self.where[i]
        p = self.params[i]
        return self.buckets[b].buffer().narrow(0, off, p.numel()).view(*p.shape)

    def _hook_for(self, i):
        def hook(param):
            self._on_grad_ready(i)
        return hook

    # -- one iteration ---------------------------------------------------------------------
    def check_previous_finished(self):
        """Before a forward: torch's error naming the parameters that got no gradient when the last backward
        reduced only some of them (pass find_unused_parameters=True when some take no part in the loss)."""
        if self.expect_hooks and self.ready:  # some gradients of the last forward arrived, not all
            missing = [self.names[i] for i in range(len(self.params)) if i not in self.ready]
            raise RuntimeError(
                "DistributedDataParallel: expected to have finished reduction in the prior iteration before starting "
                "a new one. The parameters that did not receive a gradient are: "
                f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}. Pass find_unused_parameters=True "
                "to the constructor if some parameters do not take part in the loss, and make sure every forward "
                "output takes part in the loss.")

    def prepare_for_backward(self, unused: set):
        """Called by forward: the next backward reduces; ``unused`` params are marked ready then."""
        if self.runner is not None:
            self.runner.cancelled = True
        self.runner = None
        self.expect_hooks = True
        self.ready: set = set()
        self.unused = set(unused)
        self.pending = [len(idx) for idx in self.bucket_indices]
        self.marked_unused = False

    def _on_grad_ready(self, i: int):
        if not self.expect_hooks:
            return  # no_sync(), eval, or a second backward after this iteration finished: local only
        if i in self.ready:
            raise RuntimeError(
                f"DistributedDataParallel: parameter '{self.names[i]}' got a gradient twice in one iteration: a second "
                "backward ran before the first backward's buckets finished (every parameter must be ready exactly "
                "once per forward; use no_sync() to accumulate over several backwards)")
        if self.runner is None:
            self.runner = _CommRunner(self)
        if not self.marked_unused:
            self.marked_unused = True
            for u in sorted(self.unused):
                if u != i:
                    self._mark_ready(u)
        self._mark_ready(i)
        if len(self.ready) == len(self.params):
            self._finalize()

    def _mark_ready(self, i: int):
        self.ready.add(i)
        p, view = self.params[i], self.views[i]
        with no_grad():
            if p.grad is None:
                view.fill_(0)
            elif p.grad is not view:
                view.copy_(p.grad)
        b, _ = self.where[i]
        self.pending[b] -= 1
        if self.pending[b] == 0:
            self.runner.ready[b].set()

    def _finalize(self):
        runner = self.runner
        self.expect_hooks = False
        self.runner = None
        if not runner.done.wait(self.timeout + 5.0):
            runner.cancelled = True
            waiting = next((b for b, t in enumerate(runner.launch_times) if t is not None and runner.results[b] is None),
                           0)
            raise TimeoutError(f"DistributedDataParallel: bucket {waiting}'s communication ({self.hook_name}) did not "
                               f"finish within the process group's timeout ({self.timeout:g}s)")
        self.last_launch_times = list(runner.launch_times)
        if runner.error is not None:
            err = runner.error
            msg = f"DistributedDataParallel: the communication hook {self.hook_name} failed on bucket " \
                  f"{runner.failed_bucket}: {err}"
            try:
                wrapped = type(err)(msg)
            except Exception:  # noqa: BLE001 - an exception type with another constructor
                wrapped = RuntimeError(msg)
            raise wrapped from err
        globally_used = self._globally_used() if self.find_unused_parameters else None
        with no_grad():
            for b, bucket in enumerate(self.buckets):
                result, buf = runner.results[b], bucket.buffer()
                if getattr(result, "shape", None) != buf.shape:
                    raise RuntimeError(f"DistributedDataParallel: the communication hook {self.hook_name} returned "
                                       f"{type(result).__name__} {getattr(result, 'shape', '')} for bucket {b}; "
                                       f"expected a future of a tensor of shape {tuple(buf.shape)}")
                if result is not buf:
                    buf.copy_(result)
                for i in self.bucket_indices[b]:
                    if globally_used is not None and not globally_used[i]:
                        continue  # unused on every rank: its .grad stays as it was (None or unchanged)
                    p, view = self.params[i], self.views[i]
                    if self.gradient_as_bucket_view:
                        p.grad = view
                    elif p.grad is None:
                        p.grad = view.clone()
                    elif p.grad is not view:
                        p.grad.copy_(view)

    def _globally_used(self) -> list:
        """Which parameters took part in the loss on at least one rank (one small allreduce)."""
        # A host tensor, whatever the default device: the flags are written through numpy(), which
        # a device tensor refuses (or, where made to copy, writes into a copy the allreduce never sees).
        used = zeros(len(self.params), dtype=self.buckets[0].buffer().dtype, device="cpu")
        arr = used.numpy()
        for i in range(len(self.params)):
            arr[i] = 0 if i in self.unused else 1
        collectives.all_reduce(used, group=self.process_group)
        return [v > 0 for v in used.numpy()]

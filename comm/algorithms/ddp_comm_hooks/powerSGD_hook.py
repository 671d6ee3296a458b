"""PowerSGD gradient compression (Vogels et al., NeurIPS 2019) as a DDP communication hook.

Why it exists: torch's ``ddp_comm_hooks.powerSGD_hook`` with the same names, state and
algorithm, on tritensor's collectives. ``powerSGD_hook`` compresses each parameter's gradient
(viewed as ``n x m``) to rank-``r`` factors ``P`` (``n x r``) and ``Q`` (``m x r``):

1. before ``start_powerSGD_iter`` steps: plain averaged allreduce (``default_hooks``);
2. error feedback: the bucket gets last step's local error added (``error_dict[bucket]``);
3. tensors that would not shrink by ``min_compression_rate`` (``(n + m) * r * rate < n * m``
   fails; with the default rate 2 every 1-D tensor, seen as ``n x 1``) are allreduced
   uncompressed, as one flat buffer; a rate of 0 compresses every non-empty tensor;
4. ``Q`` is warm-started from last step (``q_memory_dict``) and orthogonalised, or drawn from
   a normal distribution seeded identically on every rank (``random_seed``);
5. ``P = M Q``; every ``P`` allreduced as one flat buffer; ``P`` orthogonalised (Gram-Schmidt,
   ``tritensor.orthogonalize_``); ``Q = M^T P``; every ``Q`` allreduced as one flat
   buffer and divided by the world size; ``M ~= P Q^T``;
6. the new local error is (input with error) - (what was sent back), in the bucket's dtype.

``batched_powerSGD_hook`` compresses the whole bucket as one zero-padded square matrix.
The chained steps run in future callbacks; each inner allreduce waits under the group's timeout.
"""
from __future__ import annotations

import logging
import math
import numbers
from collections import defaultdict

import numpy as np

from ....core.factories import from_numpy, zeros
from ....core.functional import orthogonalize_
from ... import Future, GroupMember, all_reduce, get_world_size, is_initialized
from . import default_hooks as default

__all__ = ["PowerSGDState", "powerSGD_hook", "batched_powerSGD_hook"]

log = logging.getLogger(__name__)


def _should_compress(num_rows, num_cols, matrix_approximation_rank, min_compression_rate):
    uncompressed = num_rows * num_cols
    compressed = (num_rows + num_cols) * matrix_approximation_rank
    return compressed * min_compression_rate < uncompressed, uncompressed, compressed


def _report_compression_stats(bucket, state):
    if bucket.is_last() and state.iter >= state.next_stats_report:
        rate, before, after = state.compression_stats()
        log.info("Compression stats: iter %s, total before compression %s, total after compression %s, rate %s",
                 state.iter, before, after, rate)
        state.next_stats_report = state.iter + state.compression_stats_logging_frequency


_TENSOR_DICTS = ("error_dict", "p_memory_dict", "q_memory_dict")


class _TensorRecord:
    """A tensor's values, dtype and device, for pickling: a pickled Tensor would hold the
    address of its memory, not the values."""

    __slots__ = ("values", "dtype", "device")

    @classmethod
    def of(cls, t):
        rec = cls()
        rec.values, rec.dtype, rec.device = t.detach().cpu().numpy().copy(), t.dtype, str(t.device)
        return rec

    def tensor(self):
        return from_numpy(self.values.copy()).to(device=self.device, dtype=self.dtype)

    def __getstate__(self):
        return self.values, self.dtype, self.device

    def __setstate__(self, state):
        self.values, self.dtype, self.device = state


class PowerSGDState:
    """Hyperparameters and per-bucket memory of PowerSGD (torch's names and defaults)."""

    __slots__ = ["process_group", "matrix_approximation_rank", "start_powerSGD_iter", "min_compression_rate",
                 "orthogonalization_epsilon", "use_error_feedback", "warm_start", "batch_tensors_with_same_shape",
                 "rng", "error_dict", "p_memory_dict", "q_memory_dict", "iter", "total_numel_before_compression",
                 "total_numel_after_compression", "compression_stats_logging_frequency", "next_stats_report"]

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000, min_compression_rate=2,
                 use_error_feedback=True, warm_start=True, orthogonalization_epsilon=0, random_seed=0,
                 compression_stats_logging_frequency=10_000, batch_tensors_with_same_shape: bool = False):
        for name, value, lo in (("matrix_approximation_rank", matrix_approximation_rank, 1),
                                ("start_powerSGD_iter", start_powerSGD_iter, 0), ("random_seed", random_seed, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise ValueError(f"PowerSGDState: '{name}' must be an int >= {lo}, got {value!r}")
        if (use_error_feedback or warm_start) and start_powerSGD_iter <= 1:
            raise ValueError("PowerSGDState: expect 'start_powerSGD_iter' > 1 if 'use_error_feedback' or 'warm_start' "
                             "is enabled, because PowerSGD can only be applied after the first two iterations in DDP")
        # torch checks nothing here: any rate is used in _should_compress's test as it is
        # (0 or less compresses every tensor); only a value that is not a number is refused, now
        # rather than at the first compressed step.
        if isinstance(min_compression_rate, bool) or not isinstance(min_compression_rate, numbers.Real):
            raise TypeError("PowerSGDState: 'min_compression_rate' must be a real number, "
                            f"got {type(min_compression_rate).__name__}")
        if not float(orthogonalization_epsilon) >= 0:
            raise ValueError(f"PowerSGDState: 'orthogonalization_epsilon' must be >= 0, got {orthogonalization_epsilon!r}")
        self.process_group = process_group
        self.matrix_approximation_rank = matrix_approximation_rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = bool(use_error_feedback)
        self.warm_start = bool(warm_start)
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.rng = np.random.RandomState(random_seed)
        self.error_dict: dict = {}
        self.p_memory_dict: dict = {}
        self.q_memory_dict: dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = max(1, int(compression_stats_logging_frequency))
        self.next_stats_report = 0
        self.batch_tensors_with_same_shape = bool(batch_tensors_with_same_shape)

    def __getstate__(self):
        """Everything but the process group (it cannot travel between processes); the
        error-feedback and warm-start tensors travel as NumPy copies with their dtype and device."""
        log.warning("NOTE: Process group is not serializable and excluded from a saved state.")
        state = {slot: getattr(self, slot) for slot in self.__slots__ if slot != "process_group"}
        for slot in _TENSOR_DICTS:
            state[slot] = {k: _TensorRecord.of(t) for k, t in state[slot].items()}
        return state

    def __setstate__(self, state):
        """Restore; the process group becomes the default one (set ``process_group`` to change it).

        As torch's: without an initialized default group this raises ``ValueError``."""
        if not is_initialized():
            raise ValueError("PowerSGDState: restoring a pickled state sets its process group to the default group, "
                             "which has not been initialized, please make sure to call init_process_group.")
        self.process_group = GroupMember.WORLD
        log.warning("NOTE: Process group will be set to a default group (i.e. the world size). If a different group "
                    "is desired, please set `self.process_group` after PowerSGD state is loaded.")
        for slot, value in state.items():
            if slot in _TENSOR_DICTS:
                value = {k: rec.tensor() for k, rec in value.items()}
            setattr(self, slot, value)

    def maybe_increase_iter(self, bucket):
        """Count a training step when the last bucket of the step comes through (torch's
        PowerSGDState.maybe_increase_iter), logging when compression starts."""
        if bucket.is_last():
            self.iter += 1
        if self.iter == self.start_powerSGD_iter:
            log.info("Start to apply PowerSGD after %s iterations.", self.iter)

    def compression_stats(self):
        """``(rate, elements before compression, elements after)`` summed over every compressed step."""
        after = self.total_numel_after_compression
        rate = self.total_numel_before_compression / after if after > 0 else 0
        return rate, self.total_numel_before_compression, after


def _check_state(state, what):
    if not isinstance(state, PowerSGDState):
        raise TypeError(f"{what}: 'state' must be a PowerSGDState, got {type(state).__name__}")


def _random_like(shape, dtype, device, rng):
    """Standard normal values, the same on every rank (``rng`` is seeded alike everywhere)."""
    seed = rng.randint(1_000_000_000)
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return from_numpy(values).to(device=device, dtype=dtype)


def _allreduce_now(tensor, group):
    """A blocking sum-allreduce inside a callback (the group's timeout bounds it)."""
    all_reduce(tensor, group=group)
    return tensor


def _flat_views(memory, shapes):
    out, idx = [], 0
    for shape in shapes:
        n = math.prod(shape)
        out.append(memory.narrow(0, idx, n).view(*shape))
        idx += n
    return out


def powerSGD_hook(state: PowerSGDState, bucket) -> Future:
    """PowerSGD, layer by layer (see the module docstring); a future of the bucket's buffer."""
    _check_state(state, "powerSGD_hook")
    group = state.process_group
    world_size = get_world_size(group)
    input_tensor = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return default._allreduce_fut(group, input_tensor)

    device, dtype = input_tensor.device, input_tensor.dtype
    bucket_index = bucket.index()
    total_length = input_tensor.shape[0]
    input_tensor_cp = None
    if state.use_error_feedback:
        if bucket_index in state.error_dict:
            input_tensor.add_(state.error_dict[bucket_index])
        else:
            log.info("A zero tensor of length %s that represents local error is created.", total_length)
            state.error_dict[bucket_index] = zeros(total_length, device=device, dtype=dtype)
        input_tensor_cp = input_tensor.detach().clone()

    to_compress, uncompressed = [], []
    total_ps = total_qs = 0
    for tensor in bucket.gradients():
        matrix = tensor.reshape(tensor.shape[0], -1) if tensor.ndim > 0 else tensor.reshape(1, 1)
        n, m = matrix.shape
        rank = min(n, m, state.matrix_approximation_rank)
        compress, before, after = _should_compress(n, m, rank, state.min_compression_rate)
        state.total_numel_before_compression += before
        if compress:  # as torch's: a 1-D tensor is an n x 1 matrix, compressed when the rate allows
            to_compress.append(matrix)
            total_ps += n * rank
            total_qs += m * rank
            state.total_numel_after_compression += after
        else:
            uncompressed.append(tensor)
            state.total_numel_after_compression += before
    _report_compression_stats(bucket, state)

    uncompressed_memory = zeros(sum(t.numel() for t in uncompressed), device=device, dtype=dtype)
    for t, view in zip(uncompressed, _flat_views(uncompressed_memory, [t.shape for t in uncompressed])):
        view.copy_(t)

    need_randomize_qs = not state.warm_start or bucket_index not in state.p_memory_dict
    if need_randomize_qs:
        if state.warm_start:
            log.info("Allocating contiguous memory of length %s for Ps, and of length %s for Qs, respectively.",
                     total_ps, total_qs)
        state.p_memory_dict[bucket_index] = zeros(total_ps, device=device, dtype=dtype)
        state.q_memory_dict[bucket_index] = zeros(total_qs, device=device, dtype=dtype)

    # Same-shaped matrices are batched into one (b, n, m) stack when asked to (one bmm each).
    shape_to_tensors = defaultdict(list)
    for matrix in to_compress:
        shape_to_tensors[tuple(matrix.shape)].append(matrix)
    groups = []  # (list of original matrices, batched tensor b x n x m)
    for tensors in shape_to_tensors.values():
        if state.batch_tensors_with_same_shape and len(tensors) > 1:
            stacked = zeros(len(tensors), *tensors[0].shape, device=device, dtype=dtype)
            for i, t in enumerate(tensors):
                stacked.select(0, i).copy_(t)
            groups.append((tensors, stacked))
        else:
            groups.extend(([t], t.unsqueeze(0)) for t in tensors)
    p_shapes, q_shapes = [], []
    for _, batch in groups:
        b, n, m = batch.shape
        rank = min(n, m, state.matrix_approximation_rank)
        p_shapes.append((b, n, rank))
        q_shapes.append((b, m, rank))
    ps = _flat_views(state.p_memory_dict[bucket_index], p_shapes)
    qs = _flat_views(state.q_memory_dict[bucket_index], q_shapes)
    eps = state.orthogonalization_epsilon
    for q in qs:
        if need_randomize_qs:
            q.copy_(_random_like(tuple(q.shape), dtype, device, state.rng))
        orthogonalize_(q, eps)
    for (_, batch), p, q in zip(groups, ps, qs):
        p.copy_(batch @ q)

    fut = all_reduce(uncompressed_memory, group=group, async_op=True).get_future()

    def unpack_uncompressed_and_allreduce_ps(f):
        memory = f.value()[0].div_(world_size)
        for t, view in zip(uncompressed, _flat_views(memory, [t.shape for t in uncompressed])):
            t.copy_(view)
        return _allreduce_now(state.p_memory_dict[bucket_index], group)

    def compute_qs(f):
        f.value()
        for p in ps:
            orthogonalize_(p, eps)
        for (_, batch), p, q in zip(groups, ps, qs):
            q.copy_(batch.transpose(1, 2) @ p)
        return _allreduce_now(state.q_memory_dict[bucket_index], group)

    def decompress(f):
        f.value().div_(world_size)
        for (originals, batch), p, q in zip(groups, ps, qs):
            approx = p @ q.transpose(1, 2)
            for i, original in enumerate(originals):
                original.copy_(approx.select(0, i))
        if state.use_error_feedback:
            state.error_dict[bucket_index] = input_tensor_cp - input_tensor
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        state.maybe_increase_iter(bucket)
        return input_tensor

    return fut.then(unpack_uncompressed_and_allreduce_ps).then(compute_qs).then(decompress)


def batched_powerSGD_hook(state: PowerSGDState, bucket) -> Future:
    """PowerSGD on the whole bucket viewed as one zero-padded square matrix."""
    _check_state(state, "batched_powerSGD_hook")
    group = state.process_group
    world_size = get_world_size(group)
    input_tensor = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return default._allreduce_fut(group, input_tensor)

    device, dtype = input_tensor.device, input_tensor.dtype
    total_length = input_tensor.shape[0]
    state.total_numel_before_compression += total_length
    side = math.ceil(math.sqrt(total_length))
    rank = min(side, state.matrix_approximation_rank)
    state.total_numel_after_compression += side * rank * 2
    padded = zeros(side * side, device=device, dtype=dtype)
    padded.narrow(0, 0, total_length).copy_(input_tensor)
    _report_compression_stats(bucket, state)

    bucket_index = bucket.index()
    padded_cp = None
    if state.use_error_feedback:
        if bucket_index in state.error_dict:
            padded.add_(state.error_dict[bucket_index])
        else:
            log.info("A zero tensor of length %s that represents local error is created.", side * side)
            state.error_dict[bucket_index] = zeros(side * side, device=device, dtype=dtype)
        padded_cp = padded.clone()
    matrix = padded.view(side, side)
    if not state.warm_start or bucket_index not in state.p_memory_dict:
        state.p_memory_dict[bucket_index] = zeros(side, rank, device=device, dtype=dtype)
        state.q_memory_dict[bucket_index] = _random_like((side, rank), dtype, device, state.rng)
    p_mem, q_mem = state.p_memory_dict[bucket_index], state.q_memory_dict[bucket_index]
    eps = state.orthogonalization_epsilon
    orthogonalize_(q_mem, eps)
    p_mem.copy_(matrix @ q_mem)
    fut = all_reduce(p_mem, group=group, async_op=True).get_future()

    def compute_q(f):
        f.value()
        orthogonalize_(p_mem, eps)
        q_mem.copy_(matrix.T @ p_mem)
        return _allreduce_now(q_mem, group)

    def decompress(f):
        f.value().div_(world_size)
        matrix.copy_(p_mem @ q_mem.T)
        if state.use_error_feedback:
            state.error_dict[bucket_index] = padded_cp - padded
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        input_tensor.copy_(padded.narrow(0, 0, total_length))
        state.maybe_increase_iter(bucket)
        return input_tensor

    return fut.then(compute_q).then(decompress)

"""Rank workers for the DDP, comm-hook and PowerSGD tests (run by comm_helpers.run_world).

Every worker builds its model from a seed that differs per rank, so equal results also show
that DDP broadcast rank 0's parameters; data is one global batch drawn from a fixed seed, each
rank taking its contiguous shard (equal shard sizes: the mean of the ranks' mean losses is the
full-batch mean loss, whose gradient the single-process reference computes).
"""
from __future__ import annotations

import pickle
import time

import numpy as np

import tritensor as tt
import tritensor.comm as dist
from tritensor import nn
from tritensor.comm.algorithms.ddp_comm_hooks import default_hooks as D, powerSGD_hook as P
from tritensor.nn.parallel import DistributedDataParallel as DDP

BATCH = 12  # divisible by 2 and 3 ranks, and by 2 micro-batches per rank


def build(kind: str, seed: int):
    tt.manual_seed(seed)
    if kind == "mlp":
        return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    if kind == "conv":
        return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(2 * 2 * 2, 3))
    raise ValueError(kind)


def data(kind: str):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((BATCH, 6) if kind == "mlp" else (BATCH, 1, 4, 4)).astype(np.float32)
    y = rng.integers(0, 3, BATCH).astype(np.int64)
    return x, y


def loss_of(model, x, y):
    # tt.tensor follows the default device, as the model's parameters do (from_numpy stays on the cpu)
    return nn.CrossEntropyLoss()(model(tt.tensor(x)), tt.tensor(y))


def grads(model) -> dict:
    return {n: None if p.grad is None else p.grad.numpy().copy() for n, p in model.named_parameters()}


def reference_grads(kind: str) -> dict:
    """Single-process full-batch gradients of rank 0's model."""
    model = build(kind, 1)
    x, y = data(kind)
    loss_of(model, x, y).backward()
    return grads(model)


def shard(a, rank, world):
    n = len(a) // world
    return a[rank * n:(rank + 1) * n]


HOOKS = {"allreduce": D.allreduce_hook, "fp16": D.fp16_compress_hook, "bf16": D.bf16_compress_hook,
         "fp16_wrap": D.fp16_compress_wrapper(D.allreduce_hook), "bf16_wrap": D.bf16_compress_wrapper(D.allreduce_hook)}


# ------------------------------------------------------------------------------- DDP


def ddp_grads(rank, world, kind, bucket_cap_mb=25, hook=None, grad_view=False):
    """One DDP backward on this rank's shard: every ``.grad``, the bucket count, whether the
    replica equals rank 0's init, and whether ``ddp.module.state_dict()`` has the module's keys."""
    model = build(kind, 1 + rank)
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb, gradient_as_bucket_view=grad_view)
    if hook is not None:
        ddp.register_comm_hook(None, HOOKS[hook])
    x, y = data(kind)
    loss_of(ddp, shard(x, rank, world), shard(y, rank, world)).backward()
    ref = build(kind, 1)
    same = all(np.array_equal(p.detach().numpy(), q.detach().numpy()) for p, q in zip(model.parameters(), ref.parameters()))
    keys = sorted(ddp.module.state_dict()) == sorted(ref.state_dict())
    local = {n: g.copy() for n, g in grads(model).items()}
    # the rank's own (unreduced) gradients, for the compression hooks' error bounds
    loss_of(ref, shard(x, rank, world), shard(y, rank, world)).backward()
    return local, len(ddp.reducer.buckets), same, keys, grads(ref)


def ddp_no_sync(rank, world):
    model = build("mlp", 1 + rank)
    ddp = DDP(model)
    x, y = data("mlp")
    xs, ys = shard(x, rank, world), shard(y, rank, world)
    half = len(xs) // 2
    with ddp.no_sync():
        loss_of(ddp, xs[:half], ys[:half]).backward()
    after_first = grads(model)
    loss_of(ddp, xs[half:], ys[half:]).backward()
    return after_first, grads(model)


class Branchy(nn.Module):
    """lin_c is never used; lin_b only when ``use_b``."""

    def __init__(self, use_b: bool):
        super().__init__()
        self.use_b = use_b
        self.lin_a, self.lin_b, self.lin_c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin_a(x)
        return self.lin_b(h) if self.use_b else h


def ddp_unused(rank, world):
    """lin_c unused everywhere (its .grad stays None); lin_b used on rank 1 only (its gradient is
    rank 1's divided by the world); each rank also returns its own local gradients."""
    tt.manual_seed(3)
    model = Branchy(use_b=rank == 1)
    ddp = DDP(model, find_unused_parameters=True)
    x = tt.tensor(np.full((2, 4), 0.5 + rank, np.float32))
    for _ in range(2):  # twice: the second iteration must work too
        model.zero_grad()
        ddp(x).sum().backward()
    ref = Branchy(use_b=rank == 1)
    ref.load_state_dict(model.state_dict())
    ref(x).sum().backward()
    return grads(model), grads(ref)


def ddp_errors(rank, world):
    """The errors of misuse: a reduction left unfinished, and a second backward within one iteration."""
    out = {}
    tt.manual_seed(0)
    ddp = DDP(Branchy(use_b=False))  # lin_b, lin_c get no gradient, no find_unused_parameters
    x = tt.ones(2, 4)
    ddp(x).sum().backward()
    try:
        ddp(x)
    except RuntimeError as e:
        out["unfinished"] = str(e)
    tt.manual_seed(0)
    ddp2 = DDP(Branchy(use_b=True), find_unused_parameters=True)
    h = ddp2.module.lin_a(x)
    y = ddp2(x)
    (y.sum() + h.sum()).backward(retain_graph=True)  # finishes: every parameter is ready once
    ddp2(x)  # a new iteration
    part = ddp2.module.lin_a(x).sum()  # outside the wrapper: marks lin_a's parameters ready...
    part.backward(retain_graph=True)
    try:
        part.backward()  # ...and again, before the buckets of this iteration finished
    except RuntimeError as e:
        out["twice"] = str(e)
    return out


def ddp_mismatch(rank, world):
    model = nn.Sequential(nn.Linear(3, 4 if rank == 0 else 5))
    try:
        DDP(model)
    except RuntimeError as e:
        return str(e)
    return "no error"


# ----------------------------------------------------------------------------- hooks


def custom_future_hook(state, bucket):
    """A user hook: a Future it completes itself, after a blocking allreduce."""
    fut = tt.futures.Future()
    buf = bucket.buffer()
    dist.all_reduce(buf)
    fut.set_result(buf.div_(dist.get_world_size()))
    state.append((bucket.index(), len(bucket.parameters()), bucket.is_last()))
    return fut


def ddp_custom_hook(rank, world):
    model = build("mlp", 1 + rank)
    ddp = DDP(model, bucket_cap_mb=0.00001)
    seen = []
    ddp.register_comm_hook(seen, custom_future_hook)
    x, y = data("mlp")
    loss_of(ddp, shard(x, rank, world), shard(y, rank, world)).backward()
    return grads(model), seen


def failing_hook(state, bucket):
    if dist.get_rank() == 1:
        raise ValueError("this hook fails on purpose")
    return D.allreduce_hook(state, bucket)


def ddp_failing_hook(rank, world):
    model = build("mlp", 1 + rank)
    ddp = DDP(model)
    ddp.register_comm_hook(None, failing_hook)
    x, y = data("mlp")
    t0 = time.monotonic()
    try:
        loss_of(ddp, shard(x, rank, world), shard(y, rank, world)).backward()
    except Exception as e:  # noqa: BLE001 - the message is what the test checks
        return f"{type(e).__name__}: {e}", time.monotonic() - t0
    return "no error", time.monotonic() - t0


def ddp_overlap(rank, world):
    """When each bucket's hook starts, when the first layer's gradient is computed (the last
    gradient of backward) and when backward returns, all relative to backward's start."""
    model = nn.Sequential(*[nn.Linear(16, 16) for _ in range(4)])
    ddp = DDP(model, bucket_cap_mb=0.001)  # ~1 KiB: one 16x16 weight per bucket
    starts = {}

    def timing_hook(state, bucket):
        starts[bucket.index()] = time.monotonic()
        return D.allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, timing_hook)
    last_grad = []
    model[0].weight.register_hook(lambda g: last_grad.append(time.monotonic()))
    # On a device (a GPU, the simulated one) backward only queues kernels: this model's pass is over
    # on the host in milliseconds, sooner than the communication thread is scheduled to start bucket
    # 0, though it was handed the bucket at once. A pause before the first layer's gradient stands
    # for the compute a real model's earlier layers take; a reducer that communicated only after
    # backward would still start bucket 0 after the last gradient, so the check keeps its meaning.
    model[1].weight.register_hook(lambda g: time.sleep(0.25))
    x = tt.ones(4, 16)
    loss = ddp(x).sum()
    t0 = time.monotonic()
    loss.backward()
    t_end = time.monotonic()
    return {b: t - t0 for b, t in starts.items()}, last_grad[0] - t0, t_end - t0, len(ddp.reducer.buckets)


# --------------------------------------------------------------------------- PowerSGD

PSGD_SHAPES = [(6, 5), (5,), (6, 5), (4, 3, 2), (7, 1)]


def make_bucket(arrays, dtype=np.float64, index=0):
    shapes = [a.shape for a in arrays]
    flat = np.concatenate([a.reshape(-1) for a in arrays]).astype(dtype)
    params = [tt.zeros(*s, dtype=tt.float64) for s in shapes]
    offsets = list(np.cumsum([0] + [int(np.prod(s)) for s in shapes[:-1]]))
    return dist.GradBucket(index, tt.tensor(flat), params, [int(o) for o in offsets], True)


def rank_grads(rank, step):
    rng = np.random.default_rng(100 * step + rank)
    return [rng.standard_normal(s) for s in PSGD_SHAPES]


def powersgd_steps(rank, world, batched, rank_r, steps, min_rate=2, epsilon=0.0):
    """Call the hook directly on float64 buckets: per step the input (with the old error), the
    output, the old and new error."""
    state = P.PowerSGDState(None, matrix_approximation_rank=rank_r, start_powerSGD_iter=2,
                            min_compression_rate=min_rate, orthogonalization_epsilon=epsilon,
                            batch_tensors_with_same_shape=not batched)
    hook = P.batched_powerSGD_hook if batched else P.powerSGD_hook
    out = []
    for step in range(steps):
        g = rank_grads(rank, step)
        bucket = make_bucket(g)
        old_err = state.error_dict.get(0)
        old_err = None if old_err is None else old_err.numpy().copy()
        flat_in = bucket.buffer().numpy().copy()
        res = hook(state, bucket).wait(30).numpy().copy()
        new_err = state.error_dict.get(0)
        out.append((flat_in, res, old_err, None if new_err is None else new_err.numpy().copy()))
    return out, state.iter, state.compression_stats()


def powersgd_pickle(rank, world, batched):
    state = P.PowerSGDState(None, matrix_approximation_rank=1, start_powerSGD_iter=2)
    hook = P.batched_powerSGD_hook if batched else P.powerSGD_hook
    for step in range(3):
        hook(state, make_bucket(rank_grads(rank, step))).wait(30)
    restored = pickle.loads(pickle.dumps(state))
    # as torch's __setstate__: the default group, not None
    assert restored.process_group is dist.group.WORLD and restored.iter == state.iter
    a = hook(state, make_bucket(rank_grads(rank, 3))).wait(30).numpy().copy()
    b = hook(restored, make_bucket(rank_grads(rank, 3))).wait(30).numpy().copy()
    return a, b


def powersgd_unpickle(rank, world, data):
    """A state pickled where no group existed, restored under an initialized one."""
    restored = pickle.loads(data)
    return (restored.process_group is dist.group.WORLD, restored.start_powerSGD_iter, restored.iter,
            restored.rng.randint(1000))


def powersgd_training(rank, world):
    """A few SGD steps of DDP with rank-1 PowerSGD from step 2: the losses of the full batch."""
    model = build("mlp", 1 + rank)
    ddp = DDP(model)
    state = P.PowerSGDState(None, matrix_approximation_rank=1, start_powerSGD_iter=2, min_compression_rate=1)
    ddp.register_comm_hook(state, P.powerSGD_hook)
    opt = tt.optim.SGD(model.parameters(), lr=0.5)
    x, y = data("mlp")
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = loss_of(ddp, shard(x, rank, world), shard(y, rank, world))
        loss.backward()
        opt.step()
        with tt.no_grad():
            losses.append(float(loss_of(model, x, y).item()))
    return losses, state.iter, state.compression_stats()

"""Collectives and point-to-point operations, with torch.distributed's signatures.

Why this module exists: it is the public front, as torch's ``distributed_c10d``. Each function
resolves its group, checks every argument (types, dtypes, sizes, ranks, reduce ops) before any
byte is sent, fills in the operation's options (:mod:`.backend_api`: ``AllreduceOptions`` ...,
with group ranks) and calls the group's backend (``group.allreduce([tensor], opts)``), which
returns a :class:`~.work.Work`; then it waits, or returns the Work when ``async_op``. How the
bytes move (algorithms, staging, the wire) is the backend's business: the "tcp" backend's is
described in :mod:`.backend.tcp`.

Tensors: CPU tensors, CUDA tensors and NumPy arrays are accepted. With the tcp backend, CPU
tensors are read and written in place through ``tensor.numpy()`` views; non-contiguous tensors
go through a contiguous copy; CUDA tensors are staged to host memory (on a side stream when
``tritensor.cuda`` provides one) and copied back when the operation completes.

A failed operation leaves its outputs untouched: a message's header is checked before any
of its payload is read, and operations whose ranks could disagree without every rank seeing
it (``broadcast``, ``scatter``, ``gather``, ``all_to_all``, and the direct ``all_gather``)
receive into scratch buffers that are copied into the outputs only once every rank has
confirmed. Two exceptions, for speed on large tensors: the tcp backend's ring paths of
``all_reduce`` and ``all_gather`` work in place, and a receive (``recv``) whose sender fails
mid-message; their outputs may then hold partial results.
"""

from __future__ import annotations

import numpy as np

from .backend_api import (AllgatherOptions, AllreduceOptions, AllToAllOptions, BarrierOptions, BroadcastOptions,
                          GatherOptions, ReduceOptions, ReduceScatterOptions, ScatterOptions, check_tensor)
from .process_group import _resolve
from .reduce_op import ReduceOp

__all__ = [
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "barrier", "send", "recv", "isend", "irecv",
]


# -------------------------------------------------------------------------- argument checks


def _check_op(op, dtype, what):
    try:
        op = ReduceOp(op)
    except (ValueError, TypeError):
        raise ValueError(f"{what}: op: expected a ReduceOp, got {op!r}") from None
    floating = dtype.kind == "f" or dtype.name == "bfloat16"
    if op == ReduceOp.AVG and not floating:
        raise TypeError(f"{what}: ReduceOp.AVG needs a floating-point tensor, got {dtype.name}")
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and floating:
        raise TypeError(f"{what}: {op.name} needs an integer or bool tensor, got {dtype.name}")
    return op


def _peer_rank(pg, rank, name, what) -> int:
    """Group rank of global rank ``rank`` (torch's src/dst arguments are global ranks)."""
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
        raise TypeError(f"{what}: {name}: expected an int rank, got {rank!r}")
    if int(rank) not in pg.global_ranks:
        raise ValueError(f"{what}: {name}={rank} is not a rank of this group (ranks {pg.global_ranks})")
    return pg.global_ranks.index(int(rank))


def _same_shape(bufs, ref, name, what):
    for i, b in enumerate(bufs):
        if b.numel != ref.numel or b.dtype != ref.dtype:
            raise ValueError(f"{what}: {name}[{i}] has {b.numel} x {b.dtype.name}; expected "
                             f"{ref.numel} x {ref.dtype.name} like the input tensor")


def _done(work, async_op):
    """The Work when ``async_op``; else wait for it (raising its error) and return None."""
    if async_op:
        return work
    work.wait()
    return None


# ------------------------------------------------------------------------------ all_reduce


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group in place; every rank gets the result."""
    pg = _resolve(group, "all_reduce")
    if pg is None:
        return None
    info = check_tensor(tensor, "tensor", write=True)
    op = _check_op(op, info.dtype, "all_reduce")
    return _done(pg._backend.allreduce([tensor], AllreduceOptions(op, async_op)), async_op)


# ----------------------------------------------------------------------- rooted collectives


def broadcast(tensor, src, group=None, async_op=False):
    """Copy ``tensor`` of rank ``src`` (a global rank) into ``tensor`` on every rank."""
    pg = _resolve(group, "broadcast")
    if pg is None:
        return None
    root = _peer_rank(pg, src, "src", "broadcast")
    check_tensor(tensor, "tensor", write=pg.rank() != root)
    return _done(pg._backend.broadcast([tensor], BroadcastOptions(root, 0, async_op)), async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group into rank ``dst``'s ``tensor`` (others unchanged)."""
    pg = _resolve(group, "reduce")
    if pg is None:
        return None
    root = _peer_rank(pg, dst, "dst", "reduce")
    info = check_tensor(tensor, "tensor", write=pg.rank() == root)
    op = _check_op(op, info.dtype, "reduce")
    return _done(pg._backend.reduce([tensor], ReduceOptions(op, root, 0, async_op)), async_op)


def _rooted_list(pg, root, lst, list_name, what, write, mine):
    """Check the root's list of one tensor per rank against ``mine``; elsewhere the list must be
    None or empty. Returns the backend's list argument: ``[lst]`` at the root, else ``[]``."""
    side = "dst" if what == "gather" else "src"
    if pg.rank() != root:
        if lst:
            raise ValueError(f"{what}: {list_name} must be None or empty on non-{side} ranks")
        return []
    if lst is None or len(lst) != pg.size():
        raise ValueError(f"{what}: {list_name}: expected a list of {pg.size()} tensors on the {side} rank")
    infos = [check_tensor(t, f"{list_name}[{i}]", write=write) for i, t in enumerate(lst)]
    _same_shape(infos, mine, list_name, what)
    return [list(lst)]


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """Collect every rank's ``tensor`` into ``gather_list`` on rank ``dst``."""
    pg = _resolve(group, "gather")
    if pg is None:
        return None
    root = _peer_rank(pg, dst, "dst", "gather")
    info = check_tensor(tensor, "tensor", write=False)
    outs = _rooted_list(pg, root, gather_list, "gather_list", "gather", True, info)
    return _done(pg._backend.gather(outs, [tensor], GatherOptions(root, async_op)), async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """Rank ``src`` sends ``scatter_list[i]`` to rank i, which receives it into ``tensor``."""
    pg = _resolve(group, "scatter")
    if pg is None:
        return None
    root = _peer_rank(pg, src, "src", "scatter")
    info = check_tensor(tensor, "tensor", write=True)
    ins = _rooted_list(pg, root, scatter_list, "scatter_list", "scatter", False, info)
    return _done(pg._backend.scatter([tensor], ins, ScatterOptions(root, async_op)), async_op)


# -------------------------------------------------------------------- gather / scatter all


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's ``tensor`` into ``tensor_list`` (one tensor per rank) on every rank."""
    pg = _resolve(group, "all_gather")
    if pg is None:
        return None
    info = check_tensor(tensor, "tensor", write=False)
    if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list: expected a list of {pg.size()} tensors")
    outs = [check_tensor(t, f"tensor_list[{i}]", write=True) for i, t in enumerate(tensor_list)]
    _same_shape(outs, info, "tensor_list", "all_gather")
    return _done(pg._backend.allgather([list(tensor_list)], [tensor], AllgatherOptions(async_op)), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Concatenate every rank's ``input_tensor`` (in rank order) into ``output_tensor``."""
    pg = _resolve(group, "all_gather_into_tensor")
    if pg is None:
        return None
    buf = check_tensor(input_tensor, "input_tensor", write=False)
    out = check_tensor(output_tensor, "output_tensor", write=True)
    if out.numel != buf.numel * pg.size() or out.dtype != buf.dtype:
        raise ValueError(f"all_gather_into_tensor: output_tensor: expected {buf.numel * pg.size()} x "
                         f"{buf.dtype.name} (world size x input), got {out.numel} x {out.dtype.name}")
    return _done(pg._backend._allgather_base(output_tensor, input_tensor, AllgatherOptions(async_op)), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input_list[i]`` across ranks into rank i's ``output``."""
    pg = _resolve(group, "reduce_scatter")
    if pg is None:
        return None
    out = check_tensor(output, "output", write=True)
    op = _check_op(op, out.dtype, "reduce_scatter")
    if not isinstance(input_list, (list, tuple)) or len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list: expected a list of {pg.size()} tensors")
    ins = [check_tensor(t, f"input_list[{i}]", write=False) for i, t in enumerate(input_list)]
    _same_shape(ins, out, "input_list", "reduce_scatter")
    return _done(pg._backend.reduce_scatter([output], [list(input_list)], ReduceScatterOptions(op, async_op)),
                 async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` (world size x output) across ranks; rank i gets the i-th slice."""
    pg = _resolve(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    out = check_tensor(output, "output", write=True)
    inp = check_tensor(input, "input", write=False)
    op = _check_op(op, out.dtype, "reduce_scatter_tensor")
    if inp.numel != out.numel * pg.size() or inp.dtype != out.dtype:
        raise ValueError(f"reduce_scatter_tensor: input: expected {out.numel * pg.size()} x {out.dtype.name} "
                         f"(world size x output), got {inp.numel} x {inp.dtype.name}")
    return _done(pg._backend._reduce_scatter_base(output, input, ReduceScatterOptions(op, async_op)), async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank i sends ``input_tensor_list[j]`` to rank j, which receives it in ``output_tensor_list[i]``."""
    pg = _resolve(group, "all_to_all")
    if pg is None:
        return None
    n = pg.size()
    for name, lst in (("output_tensor_list", output_tensor_list), ("input_tensor_list", input_tensor_list)):
        if not isinstance(lst, (list, tuple)) or len(lst) != n:
            raise ValueError(f"all_to_all: {name}: expected a list of {n} tensors")
    outs = [check_tensor(t, f"output_tensor_list[{i}]", write=True) for i, t in enumerate(output_tensor_list)]
    ins = [check_tensor(t, f"input_tensor_list[{i}]", write=False) for i, t in enumerate(input_tensor_list)]
    for i in range(n):
        if outs[i].dtype != ins[0].dtype or ins[i].dtype != ins[0].dtype:
            raise ValueError("all_to_all: every input and output tensor must have the same dtype")
    r = pg.rank()
    if outs[r].numel != ins[r].numel:
        raise ValueError(f"all_to_all: output_tensor_list[{r}] must have as many elements as input_tensor_list[{r}]")
    return _done(pg._backend.alltoall(list(output_tensor_list), list(input_tensor_list), AllToAllOptions(async_op)),
                 async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Return once every rank of the group has entered the barrier."""
    pg = _resolve(group, "barrier")
    if pg is None:
        return None
    return _done(pg._backend.barrier(BarrierOptions(list(device_ids or []), async_op)), async_op)


# ------------------------------------------------------------------------- point to point


def _tag(tag):
    if isinstance(tag, bool) or not isinstance(tag, int) or not -(1 << 31) <= tag < (1 << 31):
        raise ValueError(f"tag: expected a 32-bit int, got {tag!r}")
    return tag


def isend(tensor, dst, group=None, tag=0):
    """Send ``tensor`` to global rank ``dst`` asynchronously; returns a Work.

    Messages between two ranks are matched in the order they are posted (as with NCCL); the
    tag is checked, not used to reorder."""
    pg = _resolve(group, "isend")
    if pg is None:
        return None
    peer = _peer_rank(pg, dst, "dst", "isend")
    if peer == pg.rank():
        raise ValueError("isend: dst: cannot send to this rank itself")
    check_tensor(tensor, "tensor", write=False)
    tag = _tag(tag)
    return pg._backend.send([tensor], peer, tag)


def irecv(tensor, src=None, group=None, tag=0):
    """Receive into ``tensor`` from global rank ``src`` asynchronously; returns a Work.

    ``src=None`` receives from any rank, as in torch: ``work.wait()``, then
    ``work._source_rank()`` is the sender's rank in ``group`` (``recv`` returns its global
    rank). Matching is MPI's rule: each message goes to the earliest-posted receive that can
    take it. A receive from a given rank takes that rank's messages in posting order (the
    tag is checked, not used to reorder); an any-source receive takes the first send/recv
    message addressed to this rank, from whichever rank, that carries its ``tag`` and is not
    claimed by a receive posted before it. So a receive from rank 1 posted before
    ``irecv(t, src=None)`` still gets rank 1's earlier message, and one posted after it gets
    rank 1's next message if the any-source receive took one. Size and dtype are checked
    against the sender's header: the receive raises naming the sender, and the sender's next
    call raises with that reason (sent in band, as for collectives; a send itself completes
    once its bytes are handed to the network). The wait times out after the group's timeout
    naming "any rank"; a sender that dies makes it raise naming that rank."""
    pg = _resolve(group, "irecv")
    if pg is None:
        return None
    if src is None:
        if pg.size() < 2:
            raise ValueError("irecv: src=None: this group has no other rank to receive from")
        peer = None
    else:
        peer = _peer_rank(pg, src, "src", "irecv")
        if peer == pg.rank():
            raise ValueError("irecv: src: cannot receive from this rank itself")
    check_tensor(tensor, "tensor", write=True)
    tag = _tag(tag)
    if peer is None:
        return pg._backend.recv_anysource([tensor], tag)
    return pg._backend.recv([tensor], peer, tag)


def send(tensor, dst, group=None, tag=0) -> None:
    """Send ``tensor`` to global rank ``dst``; returns once the data is handed to the network."""
    w = isend(tensor, dst, group, tag)
    if w is not None:
        w.wait()


def recv(tensor, src=None, group=None, tag=0) -> int:
    """Receive into ``tensor`` from global rank ``src``, or from any rank when ``src`` is None
    (see :func:`irecv` for how messages are matched); returns the sender's global rank, or
    -1 on a rank outside ``group`` (as torch does)."""
    w = irecv(tensor, src, group, tag)
    if w is None:
        return -1
    w.wait()
    if src is not None:
        return src
    return _resolve(group, "recv").global_ranks[w._source_rank()]


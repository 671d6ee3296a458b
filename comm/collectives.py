"""Collectives and point-to-point operations, with torch.distributed's signatures.

Why this module exists: it is the public front. Each function resolves its group, checks
every argument (types, dtypes, sizes, ranks, reduce ops) before any byte is sent, turns
its tensors into host buffers (:mod:`.backend.staging`), picks an algorithm
(:mod:`.backend.direct` or :mod:`.backend.ring`) and posts its plan to the group's
engine (:mod:`.backend.transport`); then it waits, or returns a Work when ``async_op``. The work
keeps the plan, and so the caller's tensors, alive until it completes.

The algorithms, in short: ``all_reduce``, ``all_gather`` and ``reduce_scatter`` use a
direct exchange for small sizes (one network latency) and a chunked, pipelined ring for
large ones; ``broadcast``, ``reduce``, ``gather``, ``scatter`` are one-to-all or
all-to-one, and ``all_to_all`` is pairwise; these end with zero-byte confirmations between
all ranks, so a rank whose sizes disagree makes *every* rank's call raise. ``barrier`` is a
direct zero-byte exchange. fp16 and bf16 are reduced in fp32 and rounded once at the end.

Tensors: CPU tensors are read and written in place through ``tensor.numpy()`` views;
non-contiguous tensors go through a contiguous copy. CUDA tensors are staged to host memory (on a side
stream when ``tritensor.cuda`` provides one) and copied back when the operation completes.
NumPy arrays are accepted too.

A failed operation leaves its outputs untouched: a message's header is checked before any
of its payload is read (:mod:`.backend.peer_io`), and operations whose ranks could disagree
without every rank seeing it (``broadcast``, ``scatter``, ``gather``, ``all_to_all``, and
the direct ``all_gather``) receive into scratch buffers that are copied into the outputs
only once every rank has confirmed. Two exceptions, for speed on large tensors: the ring
paths of ``all_reduce`` and ``all_gather`` work in place, and a receive (``recv``) whose
sender fails mid-message; their outputs may then hold partial results.
"""

from __future__ import annotations

import numpy as np

from .backend import direct, ring
from .backend.framing import (ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BARRIER, BROADCAST, GATHER, P2P, REDUCE,
                              REDUCE_SCATTER, SCATTER)
from .backend.plan import UFUNCS, Plan, use_direct
from .backend.staging import HostBuffer
from .process_group import ReduceOp, _resolve

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


def _run(pg, build, async_op):
    """Post an operation under the engine lock, then wait for it unless ``async_op``.

    ``build`` is the operation's plan: a closure over its arguments (their
    :class:`~.backend.staging.HostBuffer`, which hold the caller's tensors). The work keeps it
    until the operation completes, so an asynchronous operation's inputs stay alive while its
    bytes are in flight, whatever the caller drops before ``wait()`` (as torch's work objects
    hold their tensors)."""
    eng = pg.engine
    with eng.posting():
        op = build()
        op.work._keep = build
        op.then(op.release_scratch)
        eng.finish_posting(op.work, async_op)
    if async_op:
        eng._flush_notifications()  # it may have completed while posting (world size 1)
        return op.work
    op.work.wait()
    return None


# ------------------------------------------------------------------------------ all_reduce


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group in place; every rank gets the result."""
    pg = _resolve(group, "all_reduce")
    if pg is None:
        return None
    buf = HostBuffer(tensor, "tensor", write=True, defer=True)
    op = _check_op(op, buf.dtype, "all_reduce")
    ufunc, avg = UFUNCS[op], op == ReduceOp.AVG

    def build():
        o = Plan(pg, ALL_REDUCE, "all_reduce", buf.dtype, buf.numel, op, [tensor])
        algo = direct if o.n > 1 and use_direct(o, buf.flat.nbytes) else ring
        algo.all_reduce(o, buf, ufunc, avg)
        o.then(buf.writeback)
        return o

    return _run(pg, build, async_op)


# ----------------------------------------------------------------------- rooted collectives


def broadcast(tensor, src, group=None, async_op=False):
    """Copy ``tensor`` of rank ``src`` (a global rank) into ``tensor`` on every rank."""
    pg = _resolve(group, "broadcast")
    if pg is None:
        return None
    root = _peer_rank(pg, src, "src", "broadcast")
    buf = HostBuffer(tensor, "tensor", write=pg.rank() != root)

    def build():
        o = Plan(pg, BROADCAST, "broadcast", buf.dtype, buf.numel, 0, [tensor], root=root)
        direct.broadcast(o, root, buf)
        return o

    return _run(pg, build, async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group into rank ``dst``'s ``tensor`` (others unchanged)."""
    pg = _resolve(group, "reduce")
    if pg is None:
        return None
    root = _peer_rank(pg, dst, "dst", "reduce")
    buf = HostBuffer(tensor, "tensor", write=pg.rank() == root)
    op = _check_op(op, buf.dtype, "reduce")

    def build():
        o = Plan(pg, REDUCE, "reduce", buf.dtype, buf.numel, op, [tensor], root=root)
        direct.reduce(o, root, buf, UFUNCS[op], op == ReduceOp.AVG)
        return o

    return _run(pg, build, async_op)


def _rooted_list(pg, root, lst, list_name, what, write, mine):
    """The root's list of one tensor per rank as host buffers, checked against ``mine``;
    None elsewhere, where the list must be None or empty."""
    side = "dst" if what == "gather" else "src"
    if pg.rank() != root:
        if lst:
            raise ValueError(f"{what}: {list_name} must be None or empty on non-{side} ranks")
        return None
    if lst is None or len(lst) != pg.size():
        raise ValueError(f"{what}: {list_name}: expected a list of {pg.size()} tensors on the {side} rank")
    bufs = [HostBuffer(t, f"{list_name}[{i}]", write=write) for i, t in enumerate(lst)]
    _same_shape(bufs, mine, list_name, what)
    return bufs


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """Collect every rank's ``tensor`` into ``gather_list`` on rank ``dst``."""
    pg = _resolve(group, "gather")
    if pg is None:
        return None
    root = _peer_rank(pg, dst, "dst", "gather")
    buf = HostBuffer(tensor, "tensor", write=False)
    outs = _rooted_list(pg, root, gather_list, "gather_list", "gather", True, buf)

    def build():
        o = Plan(pg, GATHER, "gather", buf.dtype, buf.numel, 0, gather_list, root=root)
        direct.gather_or_scatter(o, root, buf, outs, to_root=True)
        return o

    return _run(pg, build, async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """Rank ``src`` sends ``scatter_list[i]`` to rank i, which receives it into ``tensor``."""
    pg = _resolve(group, "scatter")
    if pg is None:
        return None
    root = _peer_rank(pg, src, "src", "scatter")
    buf = HostBuffer(tensor, "tensor", write=True)
    ins = _rooted_list(pg, root, scatter_list, "scatter_list", "scatter", False, buf)

    def build():
        o = Plan(pg, SCATTER, "scatter", buf.dtype, buf.numel, 0, [tensor], root=root)
        direct.gather_or_scatter(o, root, buf, ins, to_root=False)
        return o

    return _run(pg, build, async_op)


# -------------------------------------------------------------------- gather / scatter all


def _all_gather_plan(pg, outs, buf, what, result, writebacks):
    """The plan of an all_gather of ``buf`` into ``outs`` (n flat arrays, one per rank)."""
    def build():
        o = Plan(pg, ALL_GATHER, what, buf.dtype, buf.numel, 0, result)
        if o.n > 1 and use_direct(o, buf.flat.nbytes):
            direct.all_gather(o, outs, buf.flat)
        else:
            ring.all_gather(o, outs, buf.flat)
        for b in writebacks:
            o.then(b.writeback)
        return o

    return build


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's ``tensor`` into ``tensor_list`` (one tensor per rank) on every rank."""
    pg = _resolve(group, "all_gather")
    if pg is None:
        return None
    buf = HostBuffer(tensor, "tensor", write=False)
    if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list: expected a list of {pg.size()} tensors")
    outs = [HostBuffer(t, f"tensor_list[{i}]", write=True) for i, t in enumerate(tensor_list)]
    _same_shape(outs, buf, "tensor_list", "all_gather")
    build = _all_gather_plan(pg, [b.flat for b in outs], buf, "all_gather", list(tensor_list), outs)
    return _run(pg, build, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Concatenate every rank's ``input_tensor`` (in rank order) into ``output_tensor``."""
    pg = _resolve(group, "all_gather_into_tensor")
    if pg is None:
        return None
    buf = HostBuffer(input_tensor, "input_tensor", write=False)
    out = HostBuffer(output_tensor, "output_tensor", write=True)
    if out.numel != buf.numel * pg.size() or out.dtype != buf.dtype:
        raise ValueError(f"all_gather_into_tensor: output_tensor: expected {buf.numel * pg.size()} x "
                         f"{buf.dtype.name} (world size x input), got {out.numel} x {out.dtype.name}")
    segs = [out.flat[i * buf.numel:(i + 1) * buf.numel] for i in range(pg.size())]
    build = _all_gather_plan(pg, segs, buf, "all_gather_into_tensor", [output_tensor], [out])
    return _run(pg, build, async_op)


def _reduce_scatter_plan(pg, out, inputs, op, what, result):
    """The plan of a reduce_scatter into ``out``; ``inputs()``: the n flat input views, taken
    from the input host buffers when the plan runs (so the plan holds them, see :func:`_run`)."""
    ufunc, avg = UFUNCS[op], op == ReduceOp.AVG

    def build():
        ins = inputs()
        o = Plan(pg, REDUCE_SCATTER, what, out.dtype, out.numel, op, result)
        algo = direct if o.n > 1 and use_direct(o, out.flat.nbytes) else ring
        algo.reduce_scatter(o, out, ins, ufunc, avg)
        o.then(out.writeback)
        return o

    return build


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input_list[i]`` across ranks into rank i's ``output``."""
    pg = _resolve(group, "reduce_scatter")
    if pg is None:
        return None
    out = HostBuffer(output, "output", write=True)
    op = _check_op(op, out.dtype, "reduce_scatter")
    if not isinstance(input_list, (list, tuple)) or len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list: expected a list of {pg.size()} tensors")
    ins = [HostBuffer(t, f"input_list[{i}]", write=False) for i, t in enumerate(input_list)]
    _same_shape(ins, out, "input_list", "reduce_scatter")
    build = _reduce_scatter_plan(pg, out, lambda: [b.flat for b in ins], op, "reduce_scatter", [output])
    return _run(pg, build, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` (world size x output) across ranks; rank i gets the i-th slice."""
    pg = _resolve(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    out = HostBuffer(output, "output", write=True)
    inp = HostBuffer(input, "input", write=False)
    op = _check_op(op, out.dtype, "reduce_scatter_tensor")
    if inp.numel != out.numel * pg.size() or inp.dtype != out.dtype:
        raise ValueError(f"reduce_scatter_tensor: input: expected {out.numel * pg.size()} x {out.dtype.name} "
                         f"(world size x output), got {inp.numel} x {inp.dtype.name}")
    n = out.numel
    build = _reduce_scatter_plan(pg, out, lambda: [inp.flat[i * n:(i + 1) * n] for i in range(pg.size())], op,
                                 "reduce_scatter_tensor", [output])
    return _run(pg, build, async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank i sends ``input_tensor_list[j]`` to rank j, which receives it in ``output_tensor_list[i]``."""
    pg = _resolve(group, "all_to_all")
    if pg is None:
        return None
    n = pg.size()
    for name, lst in (("output_tensor_list", output_tensor_list), ("input_tensor_list", input_tensor_list)):
        if not isinstance(lst, (list, tuple)) or len(lst) != n:
            raise ValueError(f"all_to_all: {name}: expected a list of {n} tensors")
    outs = [HostBuffer(t, f"output_tensor_list[{i}]", write=True) for i, t in enumerate(output_tensor_list)]
    ins = [HostBuffer(t, f"input_tensor_list[{i}]", write=False) for i, t in enumerate(input_tensor_list)]
    for i in range(n):
        if outs[i].dtype != ins[0].dtype or ins[i].dtype != ins[0].dtype:
            raise ValueError("all_to_all: every input and output tensor must have the same dtype")
    r = pg.rank()
    if outs[r].numel != ins[r].numel:
        raise ValueError(f"all_to_all: output_tensor_list[{r}] must have as many elements as input_tensor_list[{r}]")

    def build():
        o = Plan(pg, ALL_TO_ALL, "all_to_all", ins[0].dtype, 0, 0, list(output_tensor_list))
        direct.all_to_all(o, outs, ins)
        return o

    return _run(pg, build, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Return once every rank of the group has entered the barrier."""
    pg = _resolve(group, "barrier")
    if pg is None:
        return None

    def build():
        o = Plan(pg, BARRIER, "barrier", np.dtype(np.uint8), 0)
        direct.barrier(o)
        return o

    return _run(pg, build, async_op)


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
    buf = HostBuffer(tensor, "tensor", write=False)
    tag = _tag(tag)

    def build():
        o = Plan(pg, P2P, f"send to rank {dst}", buf.dtype, buf.numel, 0, [tensor],
                 seq=pg.next_p2p(pg._p2p_sent, peer))
        direct.send(o, peer, tag, buf)
        return o

    return _run(pg, build, True)


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
    buf = HostBuffer(tensor, "tensor", write=True)
    tag = _tag(tag)

    def build():
        # The "#n" in the name counts receives posted from that source.
        if peer is None:
            o = Plan(pg, P2P, "recv from any rank", buf.dtype, buf.numel, 0, [tensor],
                     seq=pg.next_p2p(pg._p2p_recvd, "any"))
        else:
            o = Plan(pg, P2P, f"recv from rank {src}", buf.dtype, buf.numel, 0, [tensor],
                     seq=pg.next_p2p(pg._p2p_recvd, peer))
        direct.recv(o, peer, tag, buf)
        return o

    return _run(pg, build, True)


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


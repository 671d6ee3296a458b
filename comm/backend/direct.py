"""Direct exchanges: every rank talks to the ranks it needs at once, one message each.

Why this module exists: for small tensors latency wins, and a direct exchange costs one
network latency instead of the ring's ``2(n-1)``; rooted (one-to-all, all-to-one) and
pairwise operations are direct by nature. Small ``all_reduce``/``reduce_scatter`` send
every rank's buffer to every other rank and reduce the ``n`` buffers locally in rank order
(fp32 accumulators for fp16/bf16), so all ranks get bitwise-equal results.

Outputs are left untouched by a failed operation: ``broadcast``, ``gather``, ``scatter``,
``all_to_all`` and the direct ``all_gather`` receive into scratch buffers (:func:`.plan.landing`)
that finalizers copy into the outputs; rooted and pairwise operations end with zero-byte
confirmations (:class:`.plan.Confirm`), so those finalizers run only after every rank
confirmed, and a rank whose sizes disagree makes every rank's call raise.
"""

from __future__ import annotations

import numpy as np

from .plan import Confirm, Plan, landing, reduce_ordered

__all__ = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "gather_or_scatter",
           "all_to_all", "barrier", "send", "recv"]


def all_reduce(o: Plan, buf, ufunc, avg: bool):
    """Every rank sends ``buf`` to every other and reduces the n buffers in rank order."""
    buf.stage_all()
    flat = buf.flat
    others = {q: np.empty_like(flat) for q in o.peers()}
    for q in others:
        o.send(q, 0, flat)
    for q, a in others.items():
        o.recv(q, 0, a)
    o.then(lambda: reduce_ordered([others.get(i, flat) for i in range(o.n)], flat, ufunc, o.n if avg else 0))


def all_gather(o: Plan, outs, mine):
    """Every rank sends ``mine`` to every other; received slots of ``outs`` land in scratch first."""
    for q in o.peers():
        o.send(q, 0, mine)
    for q in o.peers():
        o.recv(q, 0, landing(o, outs[q]))
    o.then(lambda: np.copyto(outs[o.r], mine))


def reduce_scatter(o: Plan, out, ins, ufunc, avg: bool):
    """Rank q gets ``ins[q]`` of every rank and reduces them in rank order into ``out``."""
    others = {q: np.empty_like(out.flat) for q in o.peers()}
    for q in o.peers():
        o.send(q, 0, ins[q])
    for q, a in others.items():
        o.recv(q, 0, a)
    mine = ins[o.r]
    o.then(lambda: reduce_ordered([others.get(i, mine) for i in range(o.n)], out.flat, ufunc, o.n if avg else 0))


def broadcast(o: Plan, root: int, buf):
    """The root sends ``buf`` to every rank; the others receive into scratch, copied after confirmation."""
    if o.r == root:
        for q in o.peers():
            o.send(q, 0, buf.flat)
        Confirm(o, 0).post_recvs()
    else:
        c = Confirm(o, 1)
        o.recv(root, 0, landing(o, buf.flat, buf.private()), on_done=c.one_done)
        c.post_recvs()
        o.then(buf.writeback)


def reduce(o: Plan, root: int, buf, ufunc, avg: bool):
    """Every rank sends ``buf`` to the root, which reduces them in rank order after confirmation."""
    if o.r == root:
        others = {q: np.empty_like(buf.flat) for q in o.peers()}
        c = Confirm(o, len(others))
        for q, a in others.items():
            o.recv(q, 0, a, on_done=c.one_done)
        c.post_recvs()
        o.then(lambda: reduce_ordered([others.get(i, buf.flat) for i in range(o.n)], buf.flat, ufunc,
                                      o.n if avg else 0))
        o.then(buf.writeback)
    else:
        o.send(root, 0, buf.flat)
        Confirm(o, 0).post_recvs()


def gather_or_scatter(o: Plan, root: int, mine, slots, to_root: bool):
    """``gather`` (``to_root``) or ``scatter``: one tensor per rank between the root and each rank.

    ``mine`` is this rank's tensor (gather: its input; scatter: its output); ``slots`` (at
    the root only) holds one tensor per rank (gather: the outputs; scatter: the inputs), and
    the root's own slot is copied locally. Received data lands in scratch and reaches the
    outputs only in finalizers, after every rank confirmed."""
    if o.r == root:
        moves = [(q, slots[q]) for q in o.peers()]
        outputs = slots if to_root else [mine]
    else:
        moves = [(root, mine)]
        outputs = [] if to_root else [mine]
    incoming = (o.r == root) == to_root  # does this rank receive?
    if not incoming:
        for q, b in moves:
            o.send(q, 0, b.flat)
    c = Confirm(o, len(moves) if incoming else 0)
    if incoming:
        for q, b in moves:
            o.recv(q, 0, landing(o, b.flat, b.private()), on_done=c.one_done)
    c.post_recvs()
    if o.r == root:
        dst, src = (slots[o.r], mine) if to_root else (mine, slots[o.r])
        o.then(lambda: np.copyto(dst.flat, src.flat))
    for b in outputs:
        o.then(b.writeback)


def all_to_all(o: Plan, outs, ins):
    """Rank i sends ``ins[j]`` to rank j, which receives it in ``outs[i]`` (after confirmation).

    The header's "total" is the size of the tensor sent, checked against the receiver's slot."""
    for q in o.peers():
        o.send(q, 0, ins[q].flat, total=ins[q].numel)
    c = Confirm(o, o.n - 1)
    for q in o.peers():
        o.recv(q, 0, landing(o, outs[q].flat, outs[q].private()), total=outs[q].numel, on_done=c.one_done)
    c.post_recvs()
    o.then(lambda: np.copyto(outs[o.r].flat, ins[o.r].flat))
    for b in outs:
        o.then(b.writeback)


def barrier(o: Plan):
    """A zero-byte message to and from every rank."""
    for q in o.peers():
        o.send(q, 0)
    for q in o.peers():
        o.recv(q, 0)


def send(o: Plan, peer: int, tag: int, buf):
    """Queue the whole of ``buf`` to ``peer`` under ``tag`` on plan ``o``."""
    o.send(peer, tag, buf.flat)


def recv(o: Plan, peer, tag: int, buf):
    """Receive into ``buf`` from group rank ``peer``, or from any rank when ``peer`` is None.

    The sequence number checked against the sender's header is stamped by the engine when
    the message arrives."""
    if peer is None:
        o.recv_any(tag, buf.flat)
    else:
        o.recv(peer, tag, buf.flat, p2p=True)
        o.work._source = peer
    o.then(buf.writeback)

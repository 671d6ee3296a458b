"""The chunked, pipelined ring: all_reduce, all_gather and reduce_scatter of large tensors.

Why this module exists: for large tensors bandwidth wins over latency, and a ring moves
each byte over each link once. :func:`ring` posts reduce-scatter then all-gather over
``n`` segments cut into chunks; a chunk is forwarded as soon as it has been reduced, so
reduction and network overlap. All ranks get bitwise-equal results. fp16 and bf16 are
reduced in an fp32 working copy and rounded once at the end. The ring works in place (no
confirmation round): every rank's result depends on every other rank's first message, so
a rank that aborts on a bad header starves the others, and its in-band abort notice tells
them why; the outputs may then hold partial results (documented in
:mod:`tritensor.comm.collectives`).
"""

from __future__ import annotations

import numpy as np

from .staging import SegmentStager
from .plan import Plan, acc_dtype

__all__ = ["ring", "all_reduce", "all_gather", "reduce_scatter", "CHUNK_BYTES"]

CHUNK_BYTES = 1 << 20  # ring chunk: amortises per-message Python work, small enough to pipeline


def _chunks(lo, hi, ce):
    return [(c, min(c + ce, hi)) for c in range(lo, hi, ce)]


def ring(o: Plan, segs, reduce_fn=None, tmp=None, rs=True, ag=True, stager=None):
    """Post a pipelined ring over ``segs`` (n flat arrays, one per segment).

    Reduce-scatter step t sends segment r-1-t and reduces segment r-2-t into place (via
    ``tmp``), so rank r ends owning segment r; all-gather step t sends segment r-t and
    receives segment r-1-t straight into place. A chunk's next send is a placeholder that
    the chunk's receive marks ready."""
    r, n = o.r, o.n
    if n == 1:
        return
    left, right = (r - 1) % n, (r + 1) % n
    ce = max(1, CHUNK_BYTES // segs[0].itemsize)
    phases = ([("rs", t) for t in range(n - 1)] if rs else []) + ([("ag", t) for t in range(n - 1)] if ag else [])

    def send_seg(ph, t):
        return (r - 1 - t) % n if ph == "rs" else (r - t) % n

    def recv_seg(ph, t):
        return (r - 2 - t) % n if ph == "rs" else (r - 1 - t) % n

    sends = []
    tag = 0
    for i, (ph, t) in enumerate(phases):
        seg = segs[send_seg(ph, t)]
        row = []
        for lo, hi in _chunks(0, seg.size, ce):
            row.append(o.send(right, tag, seg[lo:hi], ready=(i == 0 and stager is None)))
            tag += 1
        sends.append(row)
    if stager is not None:  # the first sends leave as soon as their segment is on the host
        stager.ready_after[send_seg(*phases[0])] = sends[0]
    tag = 0
    for i, (ph, t) in enumerate(phases):
        seg = segs[recv_seg(ph, t)]
        nxt = sends[i + 1] if i + 1 < len(sends) else None
        for c, (lo, hi) in enumerate(_chunks(0, seg.size, ce)):
            follow = nxt[c] if nxt is not None else None
            if ph == "rs":
                dst, src = seg[lo:hi], tmp[lo:hi]
                staged = None if stager is None else stager.waiter(recv_seg(ph, t))
                o.recv(left, tag, src, on_done=_reduce_then(reduce_fn, dst, src, follow, staged))
            else:
                o.recv(left, tag, seg[lo:hi], on_done=_mark_ready(follow))
            tag += 1


def _reduce_then(fn, dst, src, follow, staged=None):
    def done():
        if staged is not None:
            staged()  # the segment must be on the host before we add into it
        with np.errstate(all="ignore"):  # overflow to inf wraps silently, as in torch
            fn(dst, src, out=dst)
        if follow is not None:
            follow.ready = True
    return done


def _mark_ready(follow):
    if follow is None:
        return None

    def done():
        follow.ready = True
    return done


def all_reduce(o: Plan, buf, ufunc, avg: bool):
    """Ring all_reduce of ``buf`` (a :class:`~.staging.HostBuffer`) in place.

    A CUDA tensor whose host copy was deferred is staged segment by segment, in the
    ring's order of need (:class:`~.staging.SegmentStager`)."""
    if o.n == 1:
        buf.stage_all()
    flat = buf.flat
    acc = acc_dtype(flat.dtype)
    low = acc != flat.dtype  # summed in a wider dtype than it is sent in (fp16/bf16 in fp32)
    work = o.scratch(flat.size, acc) if low else flat
    bounds = [work.size * i // o.n for i in range(o.n + 1)]
    segs = [work[bounds[i]:bounds[i + 1]] for i in range(o.n)]
    tmp = o.scratch(max(s.size for s in segs), work.dtype)
    stager = None
    if buf.deferred:
        convert = (lambda s: np.copyto(segs[s], flat[bounds[s]:bounds[s + 1]])) if low else None
        stager = SegmentStager(o, buf, bounds, convert)
    elif low:
        np.copyto(work, flat)
    ring(o, segs, ufunc, tmp, stager=stager)
    if stager is not None:
        stager.start()

    def finish():
        if avg:
            np.divide(work, o.n, out=work)
        if low or avg:
            np.copyto(flat, work.astype(flat.dtype, copy=False))
    o.then(finish)


def all_gather(o: Plan, outs, mine):
    """Ring all_gather of flat array ``mine`` into ``outs`` (n flat arrays), in place: the
    ring sends this rank's slot first."""
    np.copyto(outs[o.r], mine)
    ring(o, outs, rs=False)


def reduce_scatter(o: Plan, out, ins, ufunc, avg: bool):
    """Ring reduce_scatter of ``ins`` (n flat arrays) into ``out`` (a HostBuffer), through
    a working copy in the accumulation dtype."""
    acc = acc_dtype(out.dtype)
    work = o.scratch(out.numel * o.n, acc)
    segs = [work[i * out.numel:(i + 1) * out.numel] for i in range(o.n)]
    for seg, a in zip(segs, ins):
        np.copyto(seg, a)
    ring(o, segs, ufunc, o.scratch(out.numel, acc), ag=False)

    def finish():
        res = segs[o.r]
        if avg:
            res /= o.n
        np.copyto(out.flat, res.astype(out.dtype, copy=False))
    o.then(finish)

"""Collectives and point-to-point operations, with torch.distributed's signatures.

Every operation is a *plan*: the sends and receives it posts to the group's engine (see
:mod:`.transport`), in an order both ends compute identically, plus finalizers that run
when its last byte has moved. The algorithms:

* ``all_reduce``: small tensors use a direct exchange (every rank sends its buffer to every
  other rank once and reduces the ``n`` buffers locally in rank order: one network latency
  instead of ``2(n-1)``). Large tensors use a **chunked, pipelined ring**: reduce-scatter
  then all-gather over ``n`` segments cut into chunks; a chunk is forwarded as soon as it
  has been reduced, so reduction and network overlap. All ranks get bitwise-equal results.
* ``all_gather`` and ``reduce_scatter`` reuse the two halves of that ring (direct exchange
  for small sizes); ``broadcast``, ``reduce``, ``gather``, ``scatter`` are one-to-all or
  all-to-one, and ``all_to_all`` is pairwise; these end with zero-byte confirmations between
  all ranks (:class:`_Confirm`), so a rank whose sizes disagree makes *every* rank's call
  raise. ``barrier`` is a direct zero-byte exchange.
* Ring and direct exchanges need no confirmation: every rank's result depends on every
  other rank's first message, so a rank that aborts on a bad header starves all the others,
  and the abort notice it sends in band (see :mod:`.transport`) tells them why.
* fp16 and bf16 are reduced in fp32 (a working fp32 copy on the ring, fp32 accumulators in
  the direct exchange) and rounded once at the end.

Tensors: CPU tensors are read and written in place through ``tensor.numpy()`` views, and
received bytes land straight in them (no copy) when they are contiguous; non-contiguous
tensors go through a contiguous copy. CUDA tensors are staged to host memory (on a side
stream when ``tritensor.cuda`` provides one) and copied back when the operation completes.
NumPy arrays are accepted too.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from .errors import DistBackendError
from .framing import pack_data_header
from .process_group import ReduceOp, _resolve
from .transport import (ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BARRIER, BROADCAST, DTYPE_CODES, GATHER, P2P,
                        REDUCE, REDUCE_SCATTER, SCATTER)

__all__ = [
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "barrier", "send", "recv", "isend", "irecv",
]

CHUNK_BYTES = 1 << 20  # ring chunk: amortises per-message Python work, small enough to pipeline
DIRECT_MAX_BYTES = 512 << 10  # total bytes a rank sends in a direct exchange before the ring wins

_UFUNCS = {
    ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply, ReduceOp.MIN: np.minimum,
    ReduceOp.MAX: np.maximum, ReduceOp.BAND: np.bitwise_and, ReduceOp.BOR: np.bitwise_or,
    ReduceOp.BXOR: np.bitwise_xor,
}
_LOW_PRECISION = ("float16", "bfloat16")


# ------------------------------------------------------------------------ tensor access


class _Buf:
    """A flat, contiguous host view of a tensor argument, and how to give results back."""

    __slots__ = ("obj", "arr", "flat", "_writeback", "deferred")

    def __init__(self, obj, name: str, write: bool, defer: bool = False):
        """``defer``: for a CUDA tensor, allocate the host buffer but copy nothing yet; the
        caller stages it (:meth:`stage_all`, or segment by segment with :class:`_Stager`)."""
        self.obj = obj
        self._writeback = None
        self.deferred = False
        if isinstance(obj, np.ndarray):
            arr = obj
        elif hasattr(obj, "device") and hasattr(obj, "numpy") and hasattr(obj, "dtype"):
            if getattr(obj.device, "type", "cpu") == "cpu":
                arr = obj.numpy()
            elif defer:
                arr = np.empty(obj.numel(), np.dtype(obj.dtype.np))
                self.deferred = True
                self._writeback = self._device_writeback(obj, arr)
            else:
                arr = self._stage_from_device(obj, write)
        else:
            raise TypeError(f"{name}: expected a tritensor.Tensor, got {type(obj).__name__}")
        if arr.dtype.name not in DTYPE_CODES:
            raise TypeError(f"{name}: dtype {arr.dtype.name} is not supported by tritensor.comm")
        if write and not arr.flags.writeable:
            raise ValueError(f"{name}: the tensor is read-only")
        self.arr = arr
        if arr.flags.c_contiguous:
            self.flat = arr.reshape(-1)
        else:
            self.flat = np.ascontiguousarray(arr).reshape(-1)
            if write:
                prev = self._writeback
                dst, src = arr, self.flat

                def wb():
                    np.copyto(dst, src.reshape(dst.shape))
                    if prev is not None:
                        prev()

                self._writeback = wb

    def stage_all(self):
        """Copy a deferred CUDA tensor to host now (all at once)."""
        if self.deferred:
            np.copyto(self.flat, self._stage_from_device(self.obj, False).reshape(-1))
            self.deferred = False

    @staticmethod
    def _device_writeback(t, host_flat):
        import tritensor

        cuda = tritensor.cuda

        def wb():
            host = tritensor.from_numpy(host_flat.reshape(tuple(t.shape)))
            stream = _side_stream(cuda, t.device) if cuda.is_available() else None
            if stream is not None:
                with cuda.stream(stream):
                    t.copy_(host)
                stream.synchronize()
            else:
                t.copy_(host)
        return wb

    def _stage_from_device(self, t, write: bool):
        """Copy a CUDA tensor to host memory; schedule the copy back when writing.

        The copies run on a side stream that first waits for the tensor's current stream,
        so they see every kernel queued before the call and do not serialize behind later
        compute; tritensor's ``Tensor.cpu``/``copy_`` stage through pinned host buffers."""
        import tritensor

        cuda = tritensor.cuda
        stream = _side_stream(cuda, t.device) if cuda.is_available() else None
        if stream is not None:
            stream.wait_stream(cuda.current_stream(t.device))
            with cuda.stream(stream):
                host = t.cpu()
            stream.synchronize()
        else:
            host = t.cpu()
        if write:
            def wb():
                if stream is not None:
                    with cuda.stream(stream):
                        t.copy_(host)
                    stream.synchronize()
                else:
                    t.copy_(host)

            self._writeback = wb
        return host.numpy()

    @property
    def numel(self) -> int:
        return self.flat.size

    @property
    def dtype(self):
        return self.flat.dtype

    def writeback(self):
        if self._writeback is not None:
            self._writeback()


_SIDE_STREAMS: dict = {}


def _side_stream(cuda, device):
    """One communication stream per device, created on first use."""
    key = getattr(device, "index", None)
    if key not in _SIDE_STREAMS:
        _SIDE_STREAMS[key] = cuda.Stream(device)
    return _SIDE_STREAMS[key]


def _bytes(a: np.ndarray) -> memoryview:
    return memoryview(a.view(np.uint8)) if a.size else memoryview(b"")


def _dcode(dtype) -> int:
    return DTYPE_CODES[dtype.name]


def _acc_dtype(dtype):
    return np.dtype(np.float32) if dtype.name in _LOW_PRECISION else dtype


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


class _Op:
    """Posting context of one operation: its work, header factory and peers."""

    def __init__(self, pg, opcode, what, dtype, total, redop=0, result=None, seq=None):
        self.pg = pg
        self.eng = pg.engine
        self.opcode = opcode
        self.seq = pg.next_seq() if seq is None else seq
        self.work = self.eng.new_work(f"{what} #{self.seq}", pg.timeout, result)
        self.dt = _dcode(dtype)
        self.redop = int(redop)
        self.total = total
        self.r = pg.rank()
        self.n = pg.size()
        self._scratch: list = []

    def hdr(self, tag, nbytes, total=None):
        return pack_data_header(self.opcode, self.dt, self.redop, tag, self.seq,
                                self.total if total is None else total, nbytes)

    def send(self, peer, tag, arr=None, ready=True, on_done=None, total=None):
        payload = _bytes(arr) if arr is not None else None
        nbytes = 0 if payload is None else payload.nbytes
        return self.eng.send(self.work, peer, self.hdr(tag, nbytes, total), payload, ready, on_done)

    def recv(self, peer, tag, arr=None, on_done=None, total=None, p2p=False):
        target = _bytes(arr) if arr is not None else None
        nbytes = 0 if target is None else target.nbytes
        return self.eng.recv(self.work, peer, self.hdr(tag, nbytes, total), target, on_done, p2p)

    def then(self, fn):
        self.work._finalizers.append(fn)

    def scratch(self, n: int, dtype) -> np.ndarray:
        """A reusable buffer of ``n`` elements, returned to the group's pool when this op
        completes. Fresh multi-MB arrays cost page faults and zeroing on every call."""
        dtype = np.dtype(dtype)
        pool = self.pg.scratch_pool
        need = n * dtype.itemsize
        i = next((i for i, b in enumerate(pool) if b.nbytes >= need), None)
        raw = np.empty(max(need, 1), np.uint8) if i is None else pool.pop(i)
        self._scratch.append(raw)
        return raw[:need].view(dtype)

    def release_scratch(self):
        """The op's last finalizer: its scratch buffers go back to the pool (at most 4 kept)."""
        pool = self.pg.scratch_pool
        for raw in self._scratch:
            if len(pool) < 4:
                pool.append(raw)
        self._scratch = []

    def peers(self):
        return [q for q in range(self.n) if q != self.r]


def _run(pg, build, async_op):
    """Post an operation under the engine lock, then wait for it unless ``async_op``."""
    eng = pg.engine
    with eng.posting():
        op = build()
        op.then(op.release_scratch)
        eng.finish_posting(op.work, async_op)
    if async_op:
        eng._flush_notifications()  # it may have completed while posting (world size 1)
        return op.work
    op.work.wait()
    return None


def _chunks(lo, hi, ce):
    return [(c, min(c + ce, hi)) for c in range(lo, hi, ce)]


def _ring(op: _Op, segs, reduce_fn=None, tmp=None, rs=True, ag=True, stager=None):
    """Post a pipelined ring over ``segs`` (n flat arrays, one per segment).

    Reduce-scatter step t sends segment r-1-t and reduces segment r-2-t into place (via
    ``tmp``), so rank r ends owning segment r; all-gather step t sends segment r-t and
    receives segment r-1-t straight into place. A chunk's next send is a placeholder that
    the chunk's receive marks ready."""
    r, n = op.r, op.n
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
            row.append(op.send(right, tag, seg[lo:hi], ready=(i == 0 and stager is None)))
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
                op.recv(left, tag, src, on_done=_reduce_then(reduce_fn, dst, src, follow, staged))
            else:
                op.recv(left, tag, seg[lo:hi], on_done=_mark_ready(follow))
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


class _Stager:
    """Copies a CUDA tensor to host memory segment by segment on a helper thread, in the
    order the ring consumes segments, so device-to-host transfer overlaps the network.

    The ring's first sends are placeholders made ready when their segment lands; a
    reduction into a segment first waits for that segment. ``convert`` (fp16/bf16 into the
    fp32 working copy) runs on the helper thread too. The result goes back to the device
    in one copy when the ring is done."""

    def __init__(self, o: _Op, buf: "_Buf", bounds, convert=None):
        import tritensor

        self.o = o
        self.dev = buf.obj.reshape(-1)
        self.host = buf.flat
        self.bounds = bounds
        self.convert = convert
        self.events = [threading.Event() for _ in range(o.n)]
        self.ready_after: dict = {}
        self.error = None
        self.cuda = tritensor.cuda
        self.stream = _side_stream(self.cuda, buf.obj.device) if self.cuda.is_available() else None
        if self.stream is not None:  # see everything queued on the caller's stream so far
            self.stream.wait_stream(self.cuda.current_stream(buf.obj.device))
        self.order = [(o.r - 1 - k) % o.n for k in range(o.n)]  # the ring's order of need
        self.thread = threading.Thread(target=self._run, name="tritensor-comm-stager", daemon=True)

    def start(self):
        self.thread.start()

    def _run(self):
        try:
            for s in self.order:
                lo, hi = self.bounds[s], self.bounds[s + 1]
                if self.stream is not None:
                    with self.cuda.stream(self.stream):
                        part = self.dev[lo:hi].cpu()
                else:
                    part = self.dev[lo:hi].cpu()
                np.copyto(self.host[lo:hi], part.numpy())
                if self.convert is not None:
                    self.convert(s)
                self.events[s].set()
                if s in self.ready_after:
                    self.o.eng.mark_ready(self.ready_after[s])
        except BaseException as e:  # the group cannot go on with a half-copied tensor
            self.error = e
            for ev in self.events:
                ev.set()
            self.o.eng.fail_from_thread(DistBackendError(
                f"{self.o.work.what}: copying the CUDA tensor to host memory failed: {type(e).__name__}: {e}"))

    def waiter(self, s):
        def wait():
            if not self.events[s].wait(max(0.0, self.o.work.deadline - time.monotonic())):
                raise DistBackendError(f"{self.o.work.what}: timed out copying the CUDA tensor to host memory")
            if self.error is not None:
                raise DistBackendError(f"{self.o.work.what}: copying the CUDA tensor to host failed: {self.error}")
        return wait


def _mark_ready(follow):
    if follow is None:
        return None

    def done():
        follow.ready = True
    return done


CONFIRM = 1 << 20  # tag of the zero-byte confirmations


class _Confirm:
    """Zero-byte confirmations between all ranks at the end of an operation.

    Every rank tells every other rank "my data matched" once its ``data_recvs`` receives are
    done (``one_done`` is their callback) and waits for the same from all (``post_recvs``,
    called after the data receives so each peer's stream stays in order). A rank that found
    a mismatch aborts instead, so one-to-all, all-to-one and pairwise operations raise on
    *every* rank, not only on the one that saw the bad header."""

    def __init__(self, o: _Op, data_recvs: int):
        self.o = o
        self.left = data_recvs
        self.sends = [o.send(q, CONFIRM, ready=(data_recvs == 0)) for q in o.peers()]

    def one_done(self):
        self.left -= 1
        if self.left == 0:
            for c in self.sends:
                c.ready = True

    def post_recvs(self):
        for q in self.o.peers():
            self.o.recv(q, CONFIRM)


def _reduce_ordered(arrays, out, ufunc, avg_n=0):
    """out = arrays[0] op arrays[1] op ... in rank order, accumulated in out's precision."""
    acc_dtype = _acc_dtype(out.dtype)
    with np.errstate(all="ignore"):  # overflow to inf wraps silently, as in torch
        acc = np.array(arrays[0], dtype=acc_dtype, copy=True)
        for a in arrays[1:]:
            ufunc(acc, a.astype(acc_dtype, copy=False), out=acc)
        if avg_n:
            acc /= avg_n
        np.copyto(out, acc.astype(out.dtype, copy=False))


def _direct(op: _Op, nbytes_per_peer: int) -> bool:
    return nbytes_per_peer * (op.n - 1) <= DIRECT_MAX_BYTES or nbytes_per_peer < op.n * 64


# ------------------------------------------------------------------------------ all_reduce


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group in place; every rank gets the result."""
    pg = _resolve(group, "all_reduce")
    if pg is None:
        return None
    buf = _Buf(tensor, "tensor", write=True, defer=True)
    op = _check_op(op, buf.dtype, "all_reduce")
    ufunc = _UFUNCS[op]
    avg = op == ReduceOp.AVG

    def build():
        o = _Op(pg, ALL_REDUCE, "all_reduce", buf.dtype, buf.numel, op, [tensor])
        flat = buf.flat
        ring = o.n > 1 and not _direct(o, flat.nbytes)
        if not ring:
            buf.stage_all()
        if o.n > 1 and not ring:
            others = {q: np.empty_like(flat) for q in o.peers()}
            for q in others:
                o.send(q, 0, flat)
            for q, a in others.items():
                o.recv(q, 0, a)
            o.then(lambda: _reduce_ordered([others.get(i, flat) for i in range(o.n)], flat, ufunc,
                                           o.n if avg else 0))
        else:
            low = flat.dtype.name in _LOW_PRECISION
            work = o.scratch(flat.size, np.float32) if low else flat
            bounds = [work.size * i // o.n for i in range(o.n + 1)]
            segs = [work[bounds[i]:bounds[i + 1]] for i in range(o.n)]
            tmp = o.scratch(max(s.size for s in segs), work.dtype)
            stager = None
            if buf.deferred:
                convert = (lambda s: np.copyto(segs[s], flat[bounds[s]:bounds[s + 1]])) if low else None
                stager = _Stager(o, buf, bounds, convert)
            elif low:
                np.copyto(work, flat)
            _ring(o, segs, ufunc, tmp, stager=stager)
            if stager is not None:
                stager.start()

            def finish():
                if avg:
                    np.divide(work, o.n, out=work)
                if low or avg:
                    np.copyto(flat, work.astype(flat.dtype, copy=False))
            o.then(finish)
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
    buf = _Buf(tensor, "tensor", write=pg.rank() != root)

    def build():
        o = _Op(pg, BROADCAST, "broadcast", buf.dtype, buf.numel, 0, [tensor])
        if o.r == root:
            for q in o.peers():
                o.send(q, 0, buf.flat)
            _Confirm(o, 0).post_recvs()
        else:
            c = _Confirm(o, 1)
            o.recv(root, 0, buf.flat, on_done=c.one_done)
            c.post_recvs()
            o.then(buf.writeback)
        return o

    return _run(pg, build, async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group into rank ``dst``'s ``tensor`` (others unchanged)."""
    pg = _resolve(group, "reduce")
    if pg is None:
        return None
    root = _peer_rank(pg, dst, "dst", "reduce")
    buf = _Buf(tensor, "tensor", write=pg.rank() == root)
    op = _check_op(op, buf.dtype, "reduce")

    def build():
        o = _Op(pg, REDUCE, "reduce", buf.dtype, buf.numel, op, [tensor])
        if o.r == root:
            others = {q: np.empty_like(buf.flat) for q in o.peers()}
            c = _Confirm(o, len(others))
            for q, a in others.items():
                o.recv(q, 0, a, on_done=c.one_done)
            c.post_recvs()
            o.then(lambda: _reduce_ordered([others.get(i, buf.flat) for i in range(o.n)], buf.flat,
                                           _UFUNCS[op], o.n if op == ReduceOp.AVG else 0))
            o.then(buf.writeback)
        else:
            o.send(root, 0, buf.flat)
            _Confirm(o, 0).post_recvs()
        return o

    return _run(pg, build, async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """Collect every rank's ``tensor`` into ``gather_list`` on rank ``dst``."""
    pg = _resolve(group, "gather")
    if pg is None:
        return None
    root = _peer_rank(pg, dst, "dst", "gather")
    buf = _Buf(tensor, "tensor", write=False)
    outs = None
    if pg.rank() == root:
        if gather_list is None or len(gather_list) != pg.size():
            raise ValueError(f"gather: gather_list: expected a list of {pg.size()} tensors on the dst rank")
        outs = [_Buf(t, f"gather_list[{i}]", write=True) for i, t in enumerate(gather_list)]
        _same_shape(outs, buf, "gather_list", "gather")
    elif gather_list:
        raise ValueError("gather: gather_list must be None or empty on non-dst ranks")

    def build():
        o = _Op(pg, GATHER, "gather", buf.dtype, buf.numel, 0, gather_list)
        if o.r == root:
            np.copyto(outs[o.r].flat, buf.flat)
            c = _Confirm(o, o.n - 1)
            for q in o.peers():
                o.recv(q, 0, outs[q].flat, on_done=c.one_done)
            c.post_recvs()
            for b in outs:
                o.then(b.writeback)
        else:
            o.send(root, 0, buf.flat)
            _Confirm(o, 0).post_recvs()
        return o

    return _run(pg, build, async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """Rank ``src`` sends ``scatter_list[i]`` to rank i, which receives it into ``tensor``."""
    pg = _resolve(group, "scatter")
    if pg is None:
        return None
    root = _peer_rank(pg, src, "src", "scatter")
    buf = _Buf(tensor, "tensor", write=True)
    ins = None
    if pg.rank() == root:
        if scatter_list is None or len(scatter_list) != pg.size():
            raise ValueError(f"scatter: scatter_list: expected a list of {pg.size()} tensors on the src rank")
        ins = [_Buf(t, f"scatter_list[{i}]", write=False) for i, t in enumerate(scatter_list)]
        _same_shape(ins, buf, "scatter_list", "scatter")
    elif scatter_list:
        raise ValueError("scatter: scatter_list must be None or empty on non-src ranks")

    def build():
        o = _Op(pg, SCATTER, "scatter", buf.dtype, buf.numel, 0, [tensor])
        if o.r == root:
            for q in o.peers():
                o.send(q, 0, ins[q].flat)
            _Confirm(o, 0).post_recvs()
            np.copyto(buf.flat, ins[o.r].flat)
        else:
            c = _Confirm(o, 1)
            o.recv(root, 0, buf.flat, on_done=c.one_done)
            c.post_recvs()
        o.then(buf.writeback)
        return o

    return _run(pg, build, async_op)


# -------------------------------------------------------------------- gather / scatter all


def _all_gather_bufs(pg, outs, buf, what, result, async_op):
    def build():
        o = _Op(pg, ALL_GATHER, what, buf.dtype, buf.numel, 0, result)
        np.copyto(outs[o.r], buf.flat)
        if o.n > 1 and _direct(o, buf.flat.nbytes):
            for q in o.peers():
                o.send(q, 0, buf.flat)
            for q in o.peers():
                o.recv(q, 0, outs[q])
        else:
            _ring(o, outs, rs=False)
        return o

    return build


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's ``tensor`` into ``tensor_list`` (one tensor per rank) on every rank."""
    pg = _resolve(group, "all_gather")
    if pg is None:
        return None
    buf = _Buf(tensor, "tensor", write=False)
    if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list: expected a list of {pg.size()} tensors")
    outs = [_Buf(t, f"tensor_list[{i}]", write=True) for i, t in enumerate(tensor_list)]
    _same_shape(outs, buf, "tensor_list", "all_gather")
    build = _all_gather_bufs(pg, [b.flat for b in outs], buf, "all_gather", list(tensor_list), async_op)

    def build_and_writeback():
        o = build()
        for b in outs:
            o.then(b.writeback)
        return o

    return _run(pg, build_and_writeback, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Concatenate every rank's ``input_tensor`` (in rank order) into ``output_tensor``."""
    pg = _resolve(group, "all_gather_into_tensor")
    if pg is None:
        return None
    buf = _Buf(input_tensor, "input_tensor", write=False)
    out = _Buf(output_tensor, "output_tensor", write=True)
    if out.numel != buf.numel * pg.size() or out.dtype != buf.dtype:
        raise ValueError(f"all_gather_into_tensor: output_tensor: expected {buf.numel * pg.size()} x "
                         f"{buf.dtype.name} (world size x input), got {out.numel} x {out.dtype.name}")
    segs = [out.flat[i * buf.numel:(i + 1) * buf.numel] for i in range(pg.size())]
    build = _all_gather_bufs(pg, segs, buf, "all_gather_into_tensor", [output_tensor], async_op)

    def build_and_writeback():
        o = build()
        o.then(out.writeback)
        return o

    return _run(pg, build_and_writeback, async_op)


def _reduce_scatter_bufs(pg, out, ins, op, what, result, async_op):
    ufunc = _UFUNCS[op]
    avg = op == ReduceOp.AVG

    def build():
        o = _Op(pg, REDUCE_SCATTER, what, out.dtype, out.numel, op, result)
        if o.n > 1 and _direct(o, out.flat.nbytes):
            others = {q: np.empty_like(out.flat) for q in o.peers()}
            for q in o.peers():
                o.send(q, 0, ins[q])
            for q, a in others.items():
                o.recv(q, 0, a)
            mine = ins[o.r]
            o.then(lambda: _reduce_ordered([others.get(i, mine) for i in range(o.n)], out.flat, ufunc,
                                           o.n if avg else 0))
        else:
            acc = _acc_dtype(out.dtype)
            work = o.scratch(out.numel * o.n, acc)
            segs = [work[i * out.numel:(i + 1) * out.numel] for i in range(o.n)]
            for seg, a in zip(segs, ins):
                np.copyto(seg, a)
            _ring(o, segs, ufunc, o.scratch(out.numel, acc), ag=False)

            def finish():
                res = segs[o.r]
                if avg:
                    res /= o.n
                np.copyto(out.flat, res.astype(out.dtype, copy=False))
            o.then(finish)
        o.then(out.writeback)
        return o

    return build


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input_list[i]`` across ranks into rank i's ``output``."""
    pg = _resolve(group, "reduce_scatter")
    if pg is None:
        return None
    out = _Buf(output, "output", write=True)
    op = _check_op(op, out.dtype, "reduce_scatter")
    if not isinstance(input_list, (list, tuple)) or len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list: expected a list of {pg.size()} tensors")
    ins = [_Buf(t, f"input_list[{i}]", write=False) for i, t in enumerate(input_list)]
    _same_shape(ins, out, "input_list", "reduce_scatter")
    build = _reduce_scatter_bufs(pg, out, [b.flat for b in ins], op, "reduce_scatter", [output], async_op)
    return _run(pg, build, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` (world size x output) across ranks; rank i gets the i-th slice."""
    pg = _resolve(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    out = _Buf(output, "output", write=True)
    inp = _Buf(input, "input", write=False)
    op = _check_op(op, out.dtype, "reduce_scatter_tensor")
    if inp.numel != out.numel * pg.size() or inp.dtype != out.dtype:
        raise ValueError(f"reduce_scatter_tensor: input: expected {out.numel * pg.size()} x {out.dtype.name} "
                         f"(world size x output), got {inp.numel} x {inp.dtype.name}")
    ins = [inp.flat[i * out.numel:(i + 1) * out.numel] for i in range(pg.size())]
    build = _reduce_scatter_bufs(pg, out, ins, op, "reduce_scatter_tensor", [output], async_op)
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
    outs = [_Buf(t, f"output_tensor_list[{i}]", write=True) for i, t in enumerate(output_tensor_list)]
    ins = [_Buf(t, f"input_tensor_list[{i}]", write=False) for i, t in enumerate(input_tensor_list)]
    for i in range(n):
        if outs[i].dtype != ins[0].dtype or ins[i].dtype != ins[0].dtype:
            raise ValueError("all_to_all: every input and output tensor must have the same dtype")
    r = pg.rank()
    if outs[r].numel != ins[r].numel:
        raise ValueError(f"all_to_all: output_tensor_list[{r}] must have as many elements as input_tensor_list[{r}]")

    def build():
        # The header's "total" is the size of the tensor sent, checked against the receiver's slot.
        o = _Op(pg, ALL_TO_ALL, "all_to_all", ins[0].dtype, 0, 0, list(output_tensor_list))
        np.copyto(outs[o.r].flat, ins[o.r].flat)
        for q in o.peers():
            o.send(q, 0, ins[q].flat, total=ins[q].numel)
        c = _Confirm(o, o.n - 1)
        for q in o.peers():
            o.recv(q, 0, outs[q].flat, total=outs[q].numel, on_done=c.one_done)
        c.post_recvs()
        for b in outs:
            o.then(b.writeback)
        return o

    return _run(pg, build, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Return once every rank of the group has entered the barrier."""
    pg = _resolve(group, "barrier")
    if pg is None:
        return None

    def build():
        o = _Op(pg, BARRIER, "barrier", np.dtype(np.uint8), 0)
        for q in o.peers():
            o.send(q, 0)
        for q in o.peers():
            o.recv(q, 0)
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
    buf = _Buf(tensor, "tensor", write=False)
    tag = _tag(tag)

    def build():
        o = _Op(pg, P2P, f"send to rank {dst}", buf.dtype, buf.numel, 0, [tensor],
                seq=pg.next_p2p(pg._p2p_sent, peer))
        o.send(peer, tag, buf.flat)
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
    buf = _Buf(tensor, "tensor", write=True)
    tag = _tag(tag)

    def build():
        # The "#n" in the name counts receives posted from that source; the sequence number
        # checked against the sender's header is stamped by the engine when the message arrives.
        if peer is None:
            o = _Op(pg, P2P, "recv from any rank", buf.dtype, buf.numel, 0, [tensor],
                    seq=pg.next_p2p(pg._p2p_recvd, "any"))
            o.eng.recv_any(o.work, o.hdr(tag, buf.flat.nbytes), _bytes(buf.flat))
        else:
            o = _Op(pg, P2P, f"recv from rank {src}", buf.dtype, buf.numel, 0, [tensor],
                    seq=pg.next_p2p(pg._p2p_recvd, peer))
            o.recv(peer, tag, buf.flat, p2p=True)
            o.work._source = peer
        o.then(buf.writeback)
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


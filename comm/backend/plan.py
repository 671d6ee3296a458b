"""What every collective algorithm shares: the posting context of one operation.

Why this module exists: an operation is a *plan*, the sends and receives it posts to the
group's engine (:mod:`.transport`) in an order both ends compute identically,
plus finalizers that run when its last byte has moved. :class:`Plan` is that context (its
work, header factory, peers, scratch buffers); :func:`landing` and :class:`Confirm` are
how rooted and pairwise operations leave outputs untouched until every rank has
confirmed; :func:`reduce_ordered` reduces in rank order so every rank gets bitwise-equal
results; :func:`use_direct` picks a direct exchange over the ring for small messages.
"""

from __future__ import annotations

import numpy as np

from ...runtime import dtype as dt
from ...runtime.dtype_policy import widened
from ..reduce_op import ReduceOp
from .framing import DTYPE_CODES, pack_data_header
from .staging import as_bytes

__all__ = ["Plan", "Confirm", "CONFIRM", "landing", "reduce_ordered", "acc_dtype", "use_direct", "UFUNCS",
           "DIRECT_MAX_BYTES"]

DIRECT_MAX_BYTES = 512 << 10  # total bytes a rank sends in a direct exchange before the ring wins
CONFIRM = 1 << 20  # tag of the zero-byte confirmations

UFUNCS = {
    ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply, ReduceOp.MIN: np.minimum,
    ReduceOp.MAX: np.maximum, ReduceOp.BAND: np.bitwise_and, ReduceOp.BOR: np.bitwise_or,
    ReduceOp.BXOR: np.bitwise_xor,
}


class Plan:
    """Posting context of one operation: its work, header factory and peers."""

    def __init__(self, pg, opcode, what, dtype, total, redop=0, result=None, seq=None, root=0):
        """``root``: the group rank of a rooted collective's ``src``/``dst``; its global rank goes
        into every header, so ranks that named different roots are told so."""
        self.pg = pg
        self.eng = pg.engine
        self.opcode = opcode
        self.seq = pg.next_seq() if seq is None else seq
        self.work = self.eng.new_work(f"{what} #{self.seq}", pg.timeout, result)
        self.dt = DTYPE_CODES[dtype.name]
        self.redop = int(redop)
        self.root = pg.global_ranks[root]
        self.total = total
        self.r = pg.rank()
        self.n = pg.size()
        self._scratch: list = []

    def hdr(self, tag, nbytes, total=None):
        """This collective's data header for a message under ``tag`` of ``nbytes`` bytes."""
        return pack_data_header(self.opcode, self.dt, self.redop, tag, self.seq,
                                self.total if total is None else total, nbytes, self.root)

    def send(self, peer, tag, arr=None, ready=True, on_done=None, total=None):
        """Queue ``arr`` (or an empty message) to ``peer`` under ``tag`` for this collective."""
        payload = as_bytes(arr) if arr is not None else None
        nbytes = 0 if payload is None else payload.nbytes
        return self.eng.send(self.work, peer, self.hdr(tag, nbytes, total), payload, ready, on_done)

    def recv(self, peer, tag, arr=None, on_done=None, total=None, p2p=False):
        """Expect a message from ``peer`` under ``tag`` for this collective, its payload read into ``arr``."""
        target = as_bytes(arr) if arr is not None else None
        nbytes = 0 if target is None else target.nbytes
        return self.eng.recv(self.work, peer, self.hdr(tag, nbytes, total), target, on_done, p2p)

    def recv_any(self, tag, arr):
        """A send/recv receive from whichever rank sends first (see :mod:`.peer_io`)."""
        return self.eng.recv_any(self.work, self.hdr(tag, arr.nbytes), as_bytes(arr))

    def then(self, fn):
        """Run ``fn`` when the collective's messages are all done, before its Work completes (a copy back,
        say)."""
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
        """Every rank of the group but this one."""
        return [q for q in range(self.n) if q != self.r]


def landing(o: Plan, flat: np.ndarray, private: bool = False) -> np.ndarray:
    """Where the bytes received for output ``flat`` land: ``flat`` itself when it is already
    a private copy, else a scratch buffer that the operation's finalizers (which run only
    once every request, confirmations included, is done) copy into ``flat``."""
    if private:
        return flat
    stage = o.scratch(flat.size, flat.dtype)
    o.then(lambda: np.copyto(flat, stage))
    return stage


class Confirm:
    """Zero-byte confirmations between all ranks at the end of an operation.

    Every rank tells every other rank "my data matched" once its ``data_recvs`` receives are
    done (``one_done`` is their callback) and waits for the same from all (``post_recvs``,
    called after the data receives so each peer's stream stays in order). A rank that found
    a mismatch aborts instead, so one-to-all, all-to-one and pairwise operations raise on
    *every* rank, not only on the one that saw the bad header."""

    def __init__(self, o: Plan, data_recvs: int):
        self.o = o
        self.left = data_recvs
        self.sends = [o.send(q, CONFIRM, ready=(data_recvs == 0)) for q in o.peers()]

    def one_done(self):
        """Count one local transfer done; when all are, confirm to the peers that sent to this rank."""
        self.left -= 1
        if self.left == 0:
            for c in self.sends:
                c.ready = True

    def post_recvs(self):
        """Expect every peer's confirmation."""
        for q in self.o.peers():
            self.o.recv(q, CONFIRM)


def acc_dtype(dtype):
    """The NumPy dtype a reduction of NumPy ``dtype`` accumulates in: the dtype policy's ``widened``."""
    return widened(dt.from_numpy_dtype(dtype)).np


def reduce_ordered(arrays, out, ufunc, avg_n=0):
    """out = arrays[0] op arrays[1] op ... in rank order, accumulated in out's precision."""
    acc = acc_dtype(out.dtype)
    with np.errstate(all="ignore"):  # overflow to inf wraps silently, as in torch
        total = np.array(arrays[0], dtype=acc, copy=True)
        for a in arrays[1:]:
            ufunc(total, a.astype(acc, copy=False), out=total)
        if avg_n:
            total /= avg_n
        np.copyto(out, total.astype(out.dtype, copy=False))


def use_direct(o: Plan, nbytes_per_peer: int) -> bool:
    """Whether a direct exchange (one latency) beats the ring (2(n-1) latencies) for this size."""
    return nbytes_per_peer * (o.n - 1) <= DIRECT_MAX_BYTES or nbytes_per_peer < o.n * 64

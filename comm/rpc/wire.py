"""RPC frames: a fixed binary header, a pickled envelope and raw tensor buffers beside it.

Why this layout: the header (``HEADER``: magic, version, kind, message id, envelope length,
buffer count) and the buffer lengths are checked with :mod:`struct` before anything else is
read, so a malformed or oversized frame is refused without allocating for it. Tensors never
go through pickle: the pickler reduces each tensor to a small descriptor (buffer index, dtype,
shape, device) and its bytes are written to the socket straight from the tensor's host memory
(a ``memoryview``), and read with ``recv_into`` into a fresh NumPy buffer. The pickler finds
tensors and RRefs with ``reducer_override``, which pickle does not call for str, int, tuple,
list, dict and the other plain types (a ``persistent_id`` hook was called for every object);
a tensor or RRef that occurs twice in one message is sent once and arrives as one object.
Control frames (ids and names only) are plain pickles.

Trust: the envelope is a pickle, so it is only ever unpickled (:func:`unpickle`) for frames
from a peer that passed the HMAC handshake of :mod:`tritensor.comm.backend.auth`; the agent never
calls it for anything else. Pickled payloads are therefore **trusted-peer-only**: any
process holding the job's secret can run code on every worker, as with torch's RPC.

RRefs inside an envelope are forked by the pickler's ``fork_hook`` and rebuilt by the
unpickler's ``unfork_hook`` (see :mod:`.rref`), so sharing one follows the RRef protocol.
"""

from __future__ import annotations

import io
import pickle
import socket
import struct

import numpy as np

from ...core.factories import from_numpy
from ...core.tensor import Tensor

__all__ = ["HEADER", "HELLO", "REQUEST", "RESPONSE", "CONTROL", "FrameError", "pack", "unpickle",
           "send_frame", "read_frame", "read_buffered_frame"]

MAGIC = b"TR"
VERSION = 1
HEADER = struct.Struct("!2sBBQII")  # magic, version, kind, msg id, envelope bytes, buffer count
HELLO, REQUEST, RESPONSE, CONTROL = 1, 2, 3, 4
KINDS = {HELLO: "hello", REQUEST: "request", RESPONSE: "response", CONTROL: "control"}
MAX_ENVELOPE = 64 << 20
MAX_BUFFERS = 4096
MAX_PAYLOAD = 8 << 30
_LEN = struct.Struct("!Q")
_IOV_MAX = 512  # buffers per sendmsg (Linux allows 1024)


class FrameError(ValueError):
    """A frame broke the protocol: the connection that sent it is closed."""


def _tensor(*descriptor):
    """The reduce function of a tensor in an envelope: only :class:`_Unpickler` can rebuild one
    (the bytes are in the frame's buffers, not in the pickle)."""
    raise pickle.UnpicklingError("an RPC envelope holding tensors needs its frame's buffers")


def _rref(data):
    """The reduce function of a forked RRef in an envelope (rebuilt by :class:`_Unpickler`)."""
    raise pickle.UnpicklingError("an RPC envelope holding RRefs can only be read by the RPC agent")


class _Pickler(pickle.Pickler):
    def __init__(self, f, fork_hook):
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self.buffers: list = []
        self.fork_hook = fork_hook

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            src = obj if obj.device.type == "cpu" else obj.cpu()
            arr = np.ascontiguousarray(src.numpy())
            self.buffers.append(arr)
            return _tensor, (len(self.buffers) - 1, arr.dtype.name, arr.shape, str(obj.device), obj.requires_grad)
        if self.fork_hook is not None:
            data = self.fork_hook(obj)
            if data is not None:
                return _rref, (data,)
        return NotImplemented


def pack(kind: int, msg_id: int, obj, fork_hook=None):
    """(header + buffer lengths + envelope, [buffers]) of one frame."""
    if kind == CONTROL:  # ids, names and numbers only: no tensor, no RRef
        env = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        return HEADER.pack(MAGIC, VERSION, kind, msg_id, len(env), 0) + env, []
    f = io.BytesIO()
    p = _Pickler(f, fork_hook)
    p.dump(obj)
    env = f.getvalue()
    bufs = [memoryview(a).cast("B") if a.size else memoryview(b"") for a in p.buffers]
    head = HEADER.pack(MAGIC, VERSION, kind, msg_id, len(env), len(bufs)) + b"".join(
        _LEN.pack(len(b)) for b in bufs)
    return head + env, bufs


def _np_dtype(name):
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, bufs, unfork_hook):
        super().__init__(f)
        self.bufs = bufs
        self.unfork_hook = unfork_hook

    def find_class(self, module, name):
        if module == __name__ and name == "_tensor":
            return self._tensor
        if module == __name__ and name == "_rref" and self.unfork_hook is not None:
            return self.unfork_hook
        return super().find_class(module, name)

    def _tensor(self, idx, dtype, shape, device, requires_grad):
        if not (isinstance(idx, int) and 0 <= idx < len(self.bufs)):
            raise pickle.UnpicklingError(f"tensor buffer index {idx!r} out of range")
        arr = np.frombuffer(self.bufs[idx], dtype=_np_dtype(dtype)).reshape(shape)
        t = from_numpy(arr.copy() if not arr.flags.writeable else arr)
        if device != "cpu":
            t = t.to(device)
        if requires_grad:
            t.requires_grad_(True)
        return t


def unpickle(env: bytes, bufs, unfork_hook=None):
    """The envelope's object. Call ONLY for frames from an authenticated peer."""
    return _Unpickler(io.BytesIO(env), bufs, unfork_hook).load()


PEEK_NOWAIT = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)  # an int: enum flags cost a Python call per use
_NOWAIT = int(socket.MSG_DONTWAIT)


def frame_parts(head_env: bytes, bufs, before=()) -> list:
    """The memoryviews of one frame (header, envelope, tensor buffers) after the buffer-less
    frames ``before`` (whole ``head_env`` bytes)."""
    return [memoryview(f) for f in before] + [memoryview(head_env)] + [memoryview(b).cast("B") for b in bufs
                                                                         if len(b)]


def send_parts(sock, parts: list, nowait: bool = False) -> list:
    """Write ``parts`` in as few system calls as the socket takes (``sendmsg`` of them together,
    resumed after a partial write); the caller holds the socket's send lock. With ``nowait``,
    stop where the socket would block: returns what is left (empty: all written)."""
    flags = _NOWAIT if nowait else 0
    while parts:
        try:
            n = sock.sendmsg(parts[:_IOV_MAX], [], flags)
        except (BlockingIOError, InterruptedError):
            if nowait:
                return parts
            raise
        while n:
            first = parts[0]
            if n >= first.nbytes:
                n -= first.nbytes
                parts.pop(0)
            else:
                parts[0] = first[n:]
                n = 0
    return parts


def send_frame(sock, head_env: bytes, bufs, before=()) -> None:
    """Write one frame (after the frames ``before``) in as few system calls as the socket takes."""
    send_parts(sock, frame_parts(head_env, bufs, before))


def _recv_into(sock, view) -> None:
    got = 0
    n = len(view)
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError("connection closed mid-frame")
        got += k


def read_buffered_frame(sock, peek: int = 1 << 16):
    """The next frame if it is a small one without buffers that has arrived whole (reading it
    cannot block), else None. A reader that reads it before acting on the frame it holds acts
    on the two back to back: a ``to_here()`` sent right behind its ``remote()`` is then waiting
    for the value before the ``remote()`` can finish (answered by the thread that sets it).
    For blocking sockets only (a socket with a timeout would wait in ``recv``): else None."""
    if sock.gettimeout() is not None:
        return None
    try:
        head = sock.recv(peek, PEEK_NOWAIT)
    except (BlockingIOError, InterruptedError):
        return None
    if len(head) < HEADER.size:
        return None
    magic, version, kind, _msg_id, env_len, nbufs = HEADER.unpack_from(head)
    if nbufs or magic != MAGIC or version != VERSION or len(head) < HEADER.size + env_len:
        return None  # a frame with payloads, a partial one, or a bad one (read_frame will say)
    return read_frame(sock)


def read_frame(sock, max_envelope: int = MAX_ENVELOPE, max_payload: int = MAX_PAYLOAD):
    """(kind, msg id, envelope bytes, [buffers]) of the next frame, checked before allocating."""
    head = bytearray(HEADER.size)
    _recv_into(sock, memoryview(head))
    magic, version, kind, msg_id, env_len, nbufs = HEADER.unpack(head)
    if magic != MAGIC or version != VERSION:
        raise FrameError(f"bad frame magic/version {bytes(magic)!r}/{version}")
    if kind not in KINDS:
        raise FrameError(f"unknown frame kind {kind}")
    if env_len > max_envelope or nbufs > MAX_BUFFERS:
        raise FrameError(f"frame too large ({env_len} envelope bytes, {nbufs} buffers)")
    raw = bytearray(8 * nbufs + env_len)  # the buffer lengths and the envelope: one read
    _recv_into(sock, memoryview(raw))
    lens = [v for (v,) in _LEN.iter_unpack(memoryview(raw)[:8 * nbufs])]
    if sum(lens) > max_payload:
        raise FrameError(f"frame payload of {sum(lens)} bytes exceeds {max_payload}")
    env = raw[8 * nbufs:]
    bufs = []
    for n in lens:
        b = np.empty(n, np.uint8)  # not zero-filled: every byte is received into it
        _recv_into(sock, memoryview(b))
        bufs.append(b)
    return kind, msg_id, bytes(env), bufs

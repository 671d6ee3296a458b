"""Binary frames: the only formats tritensor's sockets read after authentication.

Why fixed binary headers: a header is a few integers read with :mod:`struct` and checked
(magic, version, bounds) before any payload byte is accepted, so a malformed, truncated or
oversized frame is refused without allocating for it, and tensor payloads go straight from
the socket into their destination buffer (``recv_into``) with no pickling anywhere.

Two formats live here:

* **Store frames** (``FRAME``): ``magic "TS" | version | opcode | status | length`` then
  ``length`` bytes holding a list of byte strings (:func:`encode_fields`).
* **Data headers** (``DATA``): 32 bytes in front of every message between process-group
  peers: which collective (op code and sequence number), the dtype, the reduce op
  (:class:`~tritensor.comm.reduce_op.ReduceOp`, whose values are these wire codes), the root
  of a rooted collective (its ``src``/``dst``), a tag (chunk index or user tag), the element count of the whole
  operation on the sender and the payload length of this message. The receiver compares the
  header with what it expects, so ranks whose sizes, dtypes, reduce ops, roots or call order
  disagree get a clear error.
"""

from __future__ import annotations

import struct

from ..reduce_op import ReduceOp

__all__ = [
    "FrameError",
    "FRAME",
    "FRAME_MAGIC",
    "FRAME_VERSION",
    "encode_frame",
    "parse_frame_header",
    "encode_fields",
    "decode_fields",
    "DATA",
    "DATA_MAGIC",
    "DATA_VERSION",
    "pack_data_header",
    "OP_NAMES",
    "ROOTED",
    "redop_name",
    "DTYPE_CODES",
    "DTYPE_NAMES",
    "describe_data_header",
]


class FrameError(ValueError):
    """A frame violated the protocol (bad magic or version, bad length, bad field layout)."""


FRAME_MAGIC = b"TS"
FRAME_VERSION = 1
# magic(2) version(1) opcode(1) status(4) length(8)
FRAME = struct.Struct("!2sBBIQ")
_U32 = struct.Struct("!I")


def encode_frame(opcode: int, fields=(), status: int = 0) -> bytes:
    """A control frame: the header (magic, version, ``opcode``, ``status``, body length) and the encoded
    ``fields``."""
    body = encode_fields(fields)
    return FRAME.pack(FRAME_MAGIC, FRAME_VERSION, opcode, status, len(body)) + body


def parse_frame_header(header: bytes, max_length: int) -> tuple[int, int, int]:
    """Validate a frame header; return (opcode, status, body length)."""
    magic, version, opcode, status, length = FRAME.unpack(header)
    if magic != FRAME_MAGIC:
        raise FrameError(f"bad frame magic {magic!r}")
    if version != FRAME_VERSION:
        raise FrameError(f"unsupported frame version {version} (this side speaks {FRAME_VERSION})")
    if length > max_length:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {max_length} bytes")
    return opcode, status, length


def encode_fields(fields) -> bytes:
    """``count(u32) | (len(u32) | bytes)*`` for a sequence of bytes-like objects."""
    parts = [_U32.pack(len(fields))]
    for f in fields:
        parts.append(_U32.pack(len(f)))
        parts.append(bytes(f))
    return b"".join(parts)


def decode_fields(body: bytes, max_fields: int = 1 << 20) -> list[bytes]:
    """Inverse of :func:`encode_fields`; every length is bounds-checked against the body."""
    if len(body) < 4:
        raise FrameError("frame body too short for its field count")
    (count,) = _U32.unpack_from(body, 0)
    if count > max_fields or count * 4 > len(body) - 4:
        raise FrameError(f"frame claims {count} fields, more than its body can hold")
    out = []
    pos = 4
    view = memoryview(body)
    for _ in range(count):
        if pos + 4 > len(body):
            raise FrameError("frame body truncated inside a field length")
        (n,) = _U32.unpack_from(body, pos)
        pos += 4
        if pos + n > len(body):
            raise FrameError("frame field runs past the end of the body")
        out.append(bytes(view[pos: pos + n]))
        pos += n
    if pos != len(body):
        raise FrameError(f"{len(body) - pos} stray bytes after the last field")
    return out


DATA_MAGIC = b"TD"
DATA_VERSION = 2  # 2: the root of rooted collectives in the former padding
# magic(2) version(1) op(1) dtype(1) redop(1) root(u16) tag(i32) seq(u32) total(u64) nbytes(u64)
DATA = struct.Struct("!2sBBBBHiIQQ")  # 32 bytes
ROOT_MASK = 0xFFFF  # the root field holds the global rank modulo 2**16


def pack_data_header(op: int, dtype: int, redop: int, tag: int, seq: int, total: int, nbytes: int,
                     root: int = 0) -> bytes:
    """The header of a data message: which collective (``op``), dtype, reduce op, root, tag, sequence number,
    total and payload sizes, checked by the receiver against what it expects."""
    return DATA.pack(DATA_MAGIC, DATA_VERSION, op, dtype, redop, root & ROOT_MASK, tag, seq & 0xFFFFFFFF, total,
                     nbytes)


# Operation codes in data headers.
ALL_REDUCE, BROADCAST, REDUCE, ALL_GATHER, REDUCE_SCATTER, GATHER, SCATTER, ALL_TO_ALL, BARRIER, P2P = range(1, 11)
BYE = 255
ABORT = 254  # in-band failure notice: header + UTF-8 reason, sent only at a message boundary
OP_NAMES = {
    ALL_REDUCE: "all_reduce", BROADCAST: "broadcast", REDUCE: "reduce", ALL_GATHER: "all_gather",
    REDUCE_SCATTER: "reduce_scatter", GATHER: "gather", SCATTER: "scatter", ALL_TO_ALL: "all_to_all",
    BARRIER: "barrier", P2P: "send/recv", BYE: "destroy_process_group",
    ABORT: "abort",
}
ROOTED = {BROADCAST: "src", REDUCE: "dst", GATHER: "dst", SCATTER: "src"}  # ops whose header names a root
# dtype codes in data headers (by NumPy dtype name; bfloat16 is ml_dtypes')
DTYPE_CODES = {"bool": 1, "uint8": 2, "int8": 3, "int16": 4, "int32": 5, "int64": 6,
               "float16": 7, "bfloat16": 8, "float32": 9, "float64": 10}
DTYPE_NAMES = {v: k for k, v in DTYPE_CODES.items()}


def redop_name(code: int) -> str:
    """``ReduceOp.MAX`` for a header's reduce-op code (or the raw code, if it is none)."""
    try:
        return f"ReduceOp.{ReduceOp(code).name}"
    except ValueError:
        return f"reduce op code {code}"


def describe_data_header(h) -> str:
    """A data header (as unpacked by ``DATA.unpack``) in words, for error messages."""
    _, _, op, dt, _redop, _, tag, seq, total, nbytes = h
    return (f"{OP_NAMES.get(op, f'op {op}')} #{seq} ({total} x {DTYPE_NAMES.get(dt, f'dtype {dt}')}, "
            f"message {tag}, {nbytes} bytes)")

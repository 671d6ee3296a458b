"""tritensor.load on hostile pickle-based files: tritensor's whole-object format, torch's zip format
and torch's legacy format. Each file gets a clear error and runs nothing: every payload would
create a marker file if it ran, and the tests assert it did not.

The pickles are written opcode by opcode here (no torch): REDUCE of os.system and friends,
GLOBALs of eval/exec/getattr/__import__, INST/OBJ/NEWOBJ/NEWOBJ_EX/BUILD on classes that are not
allowed, persistent-id tricks, storages whose sizes lie or overflow, views past their storage,
zip members with unsafe paths or that would inflate without bound, and nesting bombs.
"""
from __future__ import annotations

import collections
import io
import os
import pathlib
import pickle
import random
import struct
import zipfile

import numpy as np
import pytest
from safetensors.numpy import load as load_st
from safetensors.numpy import save as st_save

import tritensor as tt
from tritensor import nn
from tritensor.serialization import CheckpointError, safe_globals

MAGIC = 0x1950A86A20F9469CFC6C
FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "torch_files"


# ----- writing pickles by hand ------------------------------------------------------------------

def s(text: str) -> bytes:
    """BINUNICODE ``text``."""
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def g(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def p2(body: bytes) -> bytes:
    return b"\x80\x02" + body + b"."


def tritensor_file(stream: bytes, storages: dict | None = None) -> io.BytesIO:
    arrays = {"tritensor.pickle": np.frombuffer(stream, np.uint8), **(storages or {})}
    f = io.BytesIO(st_save(arrays, metadata={"format": "tritensor", "tritensor.pickle": "tritensor.pickle",
                                             "tritensor.storages": "{}"}))
    f.name = "hostile.pt"
    return f


def torch_zip(stream: bytes, storages: dict | None = None, members: dict | None = None) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", stream)
        z.writestr("archive/byteorder", "little")
        for key, raw in (storages or {}).items():
            z.writestr(f"archive/data/{key}", raw)
        for name, raw in (members or {}).items():
            z.writestr(name, raw)
        z.writestr("archive/version", "3\n")
    buf.seek(0)
    buf.name = "hostile.pt"
    return buf


def torch_legacy(stream: bytes, keys: list | None = None, raw: bytes = b"") -> io.BytesIO:
    head = (pickle.dumps(MAGIC, protocol=2) + pickle.dumps(1001, protocol=2)
            + pickle.dumps({"protocol_version": 1001, "little_endian": True}, protocol=2))
    f = io.BytesIO(head + stream + pickle.dumps(keys or [], protocol=2) + raw)
    f.name = "hostile.pt"
    return f


FORMATS = {"tritensor": tritensor_file, "torch_zip": torch_zip, "torch_legacy": torch_legacy}


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "ran"
    yield str(path)
    assert not path.exists(), "the payload ran"


def _refused(f, err=pickle.UnpicklingError, match=None):
    with pytest.raises(err, match=match) as info:
        tt.load(f)
    assert "hostile.pt" in str(info.value) or err is not CheckpointError, str(info.value)
    return str(info.value)


# ----- code execution ----------------------------------------------------------------------------

def _payloads(marker: str) -> dict:
    cmd = f"touch {marker}"
    code = f"open({marker!r}, 'w').close()"
    return {
        "os.system": p2(g("os", "system") + s(cmd) + b"\x85R"),
        "posix.system": p2(g("posix", "system") + s(cmd) + b"\x85R"),
        "subprocess.Popen": p2(g("subprocess", "Popen") + b"(" + s("touch") + s(marker) + b"l\x85R"),
        "eval": p2(g("builtins", "eval") + s(code) + b"\x85R"),
        "exec": p2(g("__builtin__", "exec") + s(code) + b"\x85R"),
        "getattr": p2(g("builtins", "getattr") + g("os", "path") + s("join") + b"\x86R"),
        "__import__": p2(g("builtins", "__import__") + s("os") + b"\x85R"),
        "STACK_GLOBAL": b"\x80\x04" + s("os") + s("system") + b"\x93" + s(cmd) + b"\x85R.",
        "INST": b"(" + s(cmd) + b"ios\nsystem\n.",
        "OBJ": b"\x80\x02(" + g("os", "system") + s(cmd) + b"o.",
        "NEWOBJ_EX": b"\x80\x04" + g("subprocess", "Popen") + b"(" + s("touch") + s(marker) + b"l\x85}\x92.",
        "BUILD": b"\x80\x02" + g("collections", "Counter") + b")\x81" + b"}" + s("__class__") + g("os", "system")
                 + b"sb.",
    }


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("name", ["os.system", "posix.system", "subprocess.Popen", "eval", "exec", "getattr",
                                  "__import__", "STACK_GLOBAL", "INST", "OBJ", "NEWOBJ_EX", "BUILD"])
def test_code_execution_payloads_are_refused_and_run_nothing(fmt, name, marker):
    stream = _payloads(marker)[name]
    msg = _refused(FORMATS[fmt](stream), match="was not an allowed global")
    assert "hostile.pt" in msg and "weights_only" in msg and "add_safe_globals" in msg
    short = {"eval": "eval", "exec": "exec", "getattr": "getattr", "__import__": "__import__"}.get(name)
    if short:  # builtins are named bare, as torch names them
        assert f"GLOBAL {short} was not an allowed global" in msg
    elif name in ("os.system", "posix.system", "subprocess.Popen"):
        assert f"GLOBAL {name} was not" in msg


def test_weights_only_false_is_for_trusted_files(marker):
    """The documented contrast: weights_only=False runs what the file says (here, harmlessly)."""
    stream = p2(g("builtins", "open") + s(marker) + s("w") + b"\x86R")
    f = tritensor_file(stream)
    tt.load(f, weights_only=False).close()
    assert os.path.exists(marker)
    os.unlink(marker)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_calls_on_objects_that_are_not_allowed(fmt, marker):
    cases = {
        # REDUCE of something that is not a function of the allow-list (a string from the stack)
        "reduce": (p2(s("os.system") + s(marker) + b"\x85R"), "Trying to call reduce for unrecognized function"),
        # NEWOBJ of an allowed function that is no class
        "newobj": (p2(g("_codecs", "encode") + b")\x81"), "Can only create new object"),
        # BUILD of a dict (setting attributes on a builtin)
        "build dict": (p2(b"}" + b"}" + s("x") + b"K\x01sb"), "Can only build"),
        # APPEND to something that is not a list
        "append": (p2(b"}" + b"K\x01a"), "Can only append to lists"),
        # unknown opcode
        "opcode": (p2(b"\xff"), "Unsupported operand"),
        # a persistent id that is not a storage record
        "persid": (p2(s("hello") + b"Q"), "persistent"),
    }
    for what, (stream, msg) in cases.items():
        _refused(FORMATS[fmt](stream), match=msg)


# ----- persistent ids, storages and views --------------------------------------------------------

def _tt_tensor(storage="storage.0", dtype="float32", offset=0, shape=(2,), stride=(1,), index=0) -> bytes:
    """A tritensor tensor record as a persistent id, BINPERSID'ed."""
    def tup(vals):
        return b"(" + b"".join(b"J" + struct.pack("<i", v) if abs(v) < 2**31 else b"\x8a\x09" + v.to_bytes(9, "little", signed=True)
                              for v in vals) + b"t"
    return (b"(" + s("tritensor.tensor") + b"J" + struct.pack("<i", index) + s(storage) + s(dtype)
            + (b"J" + struct.pack("<i", offset) if abs(offset) < 2**31 else b"\x8a\x09" + offset.to_bytes(9, "little", signed=True))
            + tup(shape) + tup(stride) + b"\x89" + s("tensor") + s(dtype) + b"tQ")


@pytest.mark.parametrize("record,msg", [
    (dict(storage="storage.9"), "names a storage 'storage.9' the file does not hold"),
    (dict(dtype="complex64"), "dtype 'complex64'"),
    (dict(shape=(5,)), "past the end of its storage of 4 elements"),
    (dict(offset=3, shape=(2,)), "past the end of its storage"),
    (dict(shape=(2, 2), stride=(3, 1)), "past the end of its storage"),
    (dict(shape=(-1,)), r"size\[0\] is -1"),
    (dict(stride=(-1,)), r"stride\[0\] is -1"),
    (dict(offset=-4), "storage offset is -4"),
    (dict(shape=(2**62, 2**62), stride=(1, 1)), "beyond any storage|past the end"),
    (dict(offset=2**70), "beyond any storage"),
    (dict(shape=(2,), stride=(4,)), "reaches element 4, past the end of its storage"),
])
def test_tritensor_tensor_records_are_checked(record, msg):
    f = tritensor_file(p2(_tt_tensor(**record)), {"storage.0": np.zeros(4, np.float32)})
    _refused(f, CheckpointError, match=msg)


def _torch_tensor(storage_class="FloatStorage", key="0", numel=4, offset=0, shape=(2,), stride=(1,),
                  metadata=b"") -> bytes:
    def tup(vals):
        return b"(" + b"".join(_int(v) for v in vals) + b"t"
    pid = b"(" + s("storage") + g("torch", storage_class) + s(key) + s("cpu") + _int(numel) + b"tQ"
    return (g("torch._utils", "_rebuild_tensor_v2") + b"(" + pid + _int(offset) + tup(shape) + tup(stride)
            + b"\x89" + g("collections", "OrderedDict") + b")R" + metadata + b"t" + b"R")


def _int(v: int) -> bytes:
    if 0 <= v < 256:
        return b"K" + bytes([v])
    raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


@pytest.mark.parametrize("record,msg", [
    (dict(key="7"), "storage key '7' names no member of the archive"),
    (dict(key="../../etc/passwd"), "names no member"),
    (dict(numel=5), "claims 20 bytes, but the archive member holds 16"),
    (dict(numel=2**62), "claims .* bytes, but the archive member holds 16"),
    (dict(numel=-1), "its size is -1"),
    (dict(shape=(5,)), "past the end of its storage of 4 elements"),
    (dict(offset=2**40), "beyond any storage|past the end"),
    (dict(shape=(2, 2), stride=(2**61, 1)), "beyond any storage|past the end"),
    (dict(storage_class="ComplexFloatStorage"), "dtype torch.complex64, which tritensor does not have"),
    (dict(metadata=b"}" + s("neg") + b"\x88s"), r"saved with flags \['neg'\] \(a negative or conjugate view\)"),
    (dict(metadata=b"K\x01"), "saved with flags 1"),
])
def test_torch_zip_storages_are_checked(record, msg):
    f = torch_zip(p2(_torch_tensor(**record)), {"0": np.zeros(4, np.float32).tobytes()})
    _refused(f, CheckpointError, match=msg)


@pytest.mark.parametrize("record,keys,raw,msg", [
    (dict(), ["0"], struct.pack("<q", 5) + b"\0" * 16, "its record says 5 elements, the pickle 4"),
    (dict(), ["0"], struct.pack("<q", 4) + b"\0" * 8, "bytes are left"),
    (dict(), ["0"], struct.pack("<q", -4) + b"\0" * 16, "its record says -4"),
    (dict(), ["1"], b"", "storage key '1' is listed but no tensor names it"),
    (dict(), [], b"", "named by a tensor but its bytes are not in the file"),
    (dict(), ["0", "0"], b"", "not a list of distinct strings"),
    (dict(numel=2**40), ["0"], b"", "more than the whole file"),
    (dict(shape=(9,)), ["0"], struct.pack("<q", 4) + b"\0" * 16, "past the end of its storage"),
])
def test_torch_legacy_storages_are_checked(record, keys, raw, msg):
    f = torch_legacy(p2(_torch_tensor(**record)), keys, raw)
    _refused(f, CheckpointError, match=msg)


def test_a_valid_hand_written_torch_file_loads():
    """The hand-written files above are right but for the one field each test breaks."""
    data = np.arange(4, dtype=np.float32)
    t = tt.load(torch_zip(p2(_torch_tensor()), {"0": data.tobytes()}))
    assert t.tolist() == [0.0, 1.0]
    t = tt.load(torch_legacy(p2(_torch_tensor(shape=(2, 2), stride=(2, 1))), ["0"],
                             struct.pack("<q", 4) + data.tobytes()))
    assert t.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    t = tt.load(tritensor_file(p2(_tt_tensor(shape=(2, 2), stride=(1, 2))), {"storage.0": data}))
    assert t.tolist() == [[0.0, 2.0], [1.0, 3.0]]


def test_build_on_a_tensor_is_refused():
    """A tensor comes from its checked record only: BUILD cannot rewrite its storage or strides."""
    stream = p2(_tt_tensor() + b"N}" + s("_offset") + b"J\x00\x00\x00\x40s\x86b")
    _refused(tritensor_file(stream, {"storage.0": np.zeros(4, np.float32)}), match="Can only build")


# ----- archives ---------------------------------------------------------------------------------

@pytest.mark.parametrize("member", ["../x", "archive/../../x", "/etc/x", "C:/x", "archive/data/..\\..\\x"])
def test_zip_members_with_unsafe_paths(member, tmp_path):
    f = torch_zip(p2(b"N"), members={member: b"x"})
    _refused(f, CheckpointError, match="unsafe path")
    assert not (tmp_path / "x").exists()


def test_zip_bomb_is_refused_before_inflating():
    f = torch_zip(p2(_torch_tensor()), {"0": np.zeros(4, np.float32).tobytes()})
    data = bytearray(f.getvalue())
    # declare 4 GB uncompressed for the storage member in the central directory
    at = data.rfind(b"PK\x01\x02", 0, data.rfind(b"archive/data/0"))
    struct.pack_into("<I", data, at + 24, 0xFFFFFFF0)
    bomb = io.BytesIO(bytes(data))
    bomb.name = "hostile.pt"
    _refused(bomb, CheckpointError, match="would inflate from 16 to 4294967280 bytes")
    deflated = io.BytesIO()
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\x80\x02N." + b"\0" * (8 << 20))  # 8 MB of zeros in a few KB
    deflated.seek(0)
    deflated.name = "hostile.pt"
    _refused(deflated, CheckpointError, match="would inflate")


def test_not_an_archive_and_not_torch():
    f = io.BytesIO(b"PK\x03\x04" + b"\0" * 40)
    f.name = "hostile.pt"
    _refused(f, CheckpointError, match="not a valid zip archive")
    _refused(torch_zip(p2(b"N"), members={"other/data.pkl": b""}), CheckpointError, match="no <name>/data.pkl")


# ----- malformed pickles and nesting bombs ---------------------------------------------------------

@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("stream,msg", [
    (b"\x80\x02", "truncated"),
    (b"\x80\x02X\xff\xff\xff\x7fab.", "truncated"),
    (b"\x80\x02\x8d" + struct.pack("<Q", 2**62) + b".", "truncated"),
    (b"\x80\x02h\x05.", "memo entry 5 was never stored"),
    (b"\x80\x02a.", "stack is empty"),
    (b"\x80\x02e.", "needs a MARK"),
    (b"\x80\x02}K\x01s.", "stack is empty"),
    (b"\x80\x02}(]K\x01u.", "unhashable"),
    (b"\x80\x02" + g("builtins", "set") + b"K\x05\x85R.", "set"),
    (b"\x80\x02" + g("builtins", "bytearray") + b"J\x00\x00\x00\x7f\x85R.", "bytearray"),
    (b"\x80\x02" + g("_codecs", "encode") + s("x") + s("zlib_codec") + b"\x86R.", "only text"),
    (b"\x80\x02" + b"(" * 100_000 + b".", "deeper than 1000"),
    (b"\x80\x02I99999999999999999999999999999x\n.", "not an int"),
    (b"\x80\x09N.", "protocol"),
])
def test_malformed_pickles_are_checkpoint_errors(fmt, stream, msg):
    _refused(FORMATS[fmt](stream), CheckpointError, match=msg)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_deep_nesting_without_marks_loads_without_recursing(fmt):
    """20,000 lists, each in the one before (a memo trick needs no stack): the reader never
    recurses, so the nest loads as data instead of crashing with a RecursionError."""
    depth = 20_000  # twenty times what a recursive reader survives
    stream = b"\x80\x02]q\x00" + b"".join(b"]r" + struct.pack("<I", i) + b"aj" + struct.pack("<I", i)
                                          for i in range(1, depth)) + b"0h\x00."
    obj = tt.load(FORMATS[fmt](stream))
    n = 0
    while obj:
        obj, n = obj[0], n + 1
    assert n == depth - 1


class Config:
    """A user class a torch checkpoint pickled beside its tensors."""


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_user_allow_list_applies_to_every_format(fmt, marker):
    stream = p2(b"]" + g(__name__, "Config") + b")\x81}" + s("lr") + b"K\x07sb" + b"a")
    _refused(FORMATS[fmt](stream), match=rf"GLOBAL {__name__}\.Config was not an allowed global")
    with safe_globals([Config]):
        (cfg,) = tt.load(FORMATS[fmt](stream))
    assert type(cfg) is Config and cfg.lr == 7
    _refused(FORMATS[fmt](stream), match="Config was not an allowed global")  # the block's entry is gone


# ----- fuzz ---------------------------------------------------------------------------------------

def _fuzz_bases():
    """A valid file of each format, and how to rebuild one around a mutated pickle stream."""
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    buf = io.BytesIO()
    tt.save({"m": model, "x": [tt.ones(2), {1, 2}, b"ab", collections.OrderedDict(a=tt.zeros(1))]}, buf)
    arrays = load_st(buf.getvalue())
    stream = arrays.pop("tritensor.pickle").tobytes()
    meta = {"format": "tritensor", "tritensor.pickle": "tritensor.pickle", "tritensor.storages": "{}"}

    def tt_file(st):
        return io.BytesIO(st_save({**arrays, "tritensor.pickle": np.frombuffer(st, np.uint8)}, metadata=meta))
    zipped = zipfile.ZipFile(FIXTURES / "optimizer.pt")
    members = {i.filename: zipped.read(i) for i in zipped.infolist()}
    pkl = next(n for n in members if n.endswith("/data.pkl"))

    def zip_file(st):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for n, d in members.items():
                z.writestr(n, st if n == pkl else d)
        out.seek(0)
        return out
    legacy = (FIXTURES / "optimizer.legacy.pt").read_bytes()
    return [(stream, tt_file), (members[pkl], zip_file), (legacy, io.BytesIO)]


def test_fuzz_mutated_pickle_streams_fail_cleanly():
    """Truncated and byte-mutated pickles of every format: a load returns, refuses a global
    (UnpicklingError) or raises CheckpointError, and nothing else escapes."""
    rng = random.Random(3)
    for base, make in _fuzz_bases():
        for i in range(120):
            b = bytearray(base)
            if i % 4 == 0:
                b = b[:rng.randrange(len(b))]
            else:
                for _ in range(rng.randint(1, 3)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            try:
                with safe_globals([nn.Sequential, nn.Linear, nn.ReLU]):
                    tt.load(make(bytes(b)), map_location="cpu")
            except (CheckpointError, pickle.UnpicklingError):
                pass

"""tritensor.load on hostile and broken files: every malformed file raises
``CheckpointError`` naming the file and the field, with bounded nesting, whatever the damage.

The probe's nine files first, one test each; then a bounded fuzz over truncations, byte
mutations and a structured corpus (a hostile value put at every kind of place in the JSON).
A load either returns or raises CheckpointError: any other exception is a failure.
"""
from __future__ import annotations

import collections
import io
import json
import random
import struct

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.serialization import MAX_DEPTH, CheckpointError

STRUCTURE = "tritensor.structure"


def _file(header: dict | bytes, body: bytes = b"", name: str = "hostile.tt") -> io.BytesIO:
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    f = io.BytesIO(struct.pack("<Q", len(h)) + h + body)
    f.name = name  # what load() names in its errors, like a real file's
    return f


def _with_structure(structure, tensors: dict | None = None) -> io.BytesIO:
    """A checkpoint whose structure is ``structure`` (JSON-able) and whose arrays are ``tensors``."""
    header, body = {}, b""
    for name, a in (tensors or {}).items():
        raw = a.tobytes()
        header[name] = {"dtype": {"float32": "F32", "bool": "BOOL"}[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    header["__metadata__"] = {"format": "tritensor", STRUCTURE: json.dumps(structure)}
    return _file(header, body)


def _load_error(f) -> str:
    with pytest.raises(CheckpointError) as info:
        tt.load(f, map_location="cpu")
    msg = str(info.value)
    assert "hostile.tt" in msg, msg  # names the file
    return msg


def test_checkpoint_error_is_a_runtime_error():
    assert issubclass(CheckpointError, RuntimeError)  # code that caught RuntimeError still does


@pytest.mark.parametrize("where", ["header", "structure"])
def test_deeply_nested_json_is_refused_without_recursing(where):
    deep = "[" * 100_000 + "]" * 100_000
    if where == "header":
        f = _file(b'{"w": ' + deep.encode() + b"}")
    else:
        f = _file({"__metadata__": {STRUCTURE: deep}})
    msg = _load_error(f)
    assert f"deeper than {MAX_DEPTH}" in msg and where in msg, msg


@pytest.mark.parametrize("meta", ['"just a string"', "[1, 2]", '{"a": 1}'])
def test_metadata_that_is_not_an_object_of_strings(meta):
    f = _file(b'{"__metadata__": ' + meta.encode() + b"}")
    assert "__metadata__" in _load_error(f)


@pytest.mark.parametrize("entry", ['"w"', "[1]", "7"])
def test_tensor_entry_that_is_not_an_object(entry):
    assert "entry 'w'" in _load_error(_file(b'{"w": ' + entry.encode() + b"}"))


@pytest.mark.parametrize("structure,field", [
    ({"$tensor": {"name": "x"}}, "device"),  # no device
    ({"$tensor": {"name": "x", "device": "gpu:7"}}, "device"),
    ({"$tensor": {"name": "x", "device": "cpu", "requires_grad": "yes"}}, "requires_grad"),
    ({"$tensor": "x"}, "$tensor"),
    ({"$tensor": ["x"]}, "$tensor"),
    ({"$ndarray": "nope"}, "nope"),  # an array name the file does not hold
    ({"$ndarray": 5}, "$ndarray"),
    ({"a": {"$dtype": "evil"}}, "evil"),
    ({"$device": "evil"}, "evil"),
    ({"$float": "abc"}, "$float"),
    ({"$items": "abc"}, "$items"),
    ({"$items": [[[1], 2]]}, "key"),  # an unhashable key
    ({"$odict": [[1, 2, 3]]}, "$odict"),
    ({"$tuple": {"a": 1}}, "$tuple"),
    ({"$pickle": "os.system"}, "unknown tag '$pickle'"),
    ({"$tensor": {"name": "x", "device": "cpu"}, "other": 1}, "$tensor"),  # a tag among other keys
])
def test_malformed_structure_names_the_field(structure, field):
    msg = _load_error(_with_structure({"model": structure}, {"x": np.ones(2, np.float32)}))
    assert field in msg and "structure['model']" in msg, msg


@pytest.mark.parametrize("shape,offsets", [([1.5], [0, 4]), ([True], [0, 4]), ([-1], [0, 4]), (["1"], [0, 4]),
                                           ([1], [0.0, 4]), ([1], [0, 4, 8]), ("1", [0, 4])])
def test_shapes_and_offsets_must_be_integers(shape, offsets):
    f = _file({"w": {"dtype": "F32", "shape": shape, "data_offsets": offsets}}, b"\0" * 8)
    msg = _load_error(f)
    assert "entry 'w'" in msg and ("shape" in msg or "data_offsets" in msg), msg


@pytest.mark.parametrize("value", [2, 255])
def test_bool_bytes_other_than_0_and_1_are_refused(value):
    f = _file({"m": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}, bytes([1, value, 0]))
    msg = _load_error(f)
    assert "entry 'm'" in msg and "0 or 1" in msg, msg


def test_a_path_is_named_too(tmp_path):
    path = tmp_path / "ck.pt"
    path.write_bytes(b"\x10" + b"\0" * 7 + b"{")
    with pytest.raises(CheckpointError, match=str(path)):
        tt.load(str(path))


def test_save_refuses_what_load_would_refuse():
    deep: list = []
    for _ in range(MAX_DEPTH):
        deep = [deep]
    with pytest.raises(ValueError, match=f"deeper than {MAX_DEPTH}"):
        tt.save({"x": deep}, io.BytesIO())
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="deeper than"):
        tt.save(loop, io.BytesIO())


# ----- fuzz ---------------------------------------------------------------------------------------

def _valid_checkpoint() -> bytes:
    tt.manual_seed(0)
    model = nn.Linear(3, 2)
    obj = {"model": model.state_dict(), "opt": {"state": {0: {"step": 3, "exp_avg": tt.ones(2, 3)}},
                                                "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999)}]},
           "epoch": 7, "mask": tt.tensor([True, False, True]), "np": np.arange(3, dtype=np.int16),
           "dtype": tt.bfloat16, "device": tt.device("cpu"), "inf": float("inf"), "param": nn.Parameter(tt.ones(2)),
           "od": collections.OrderedDict(a=1), 5: "int key", "h": tt.ones(2, dtype=tt.bfloat16)}
    buf = io.BytesIO()
    tt.save(obj, buf)
    return buf.getvalue()


def _check(data: bytes, what: str):
    f = io.BytesIO(data)
    f.name = "hostile.tt"
    try:
        tt.load(f, map_location="cpu")
    except CheckpointError as e:
        assert "hostile.tt" in str(e), (what, e)
    except Exception as e:  # noqa: BLE001  (the point of the test)
        raise AssertionError(f"{what}: {type(e).__name__}: {e}") from e


def _split(data: bytes):
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    return header, data[8 + n:]


def _join(header: dict, body: bytes) -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + body


HOSTILE = [1.5, -1, 2**70, "evil", "", [], {}, None, True, [[[[[[]]]]]], {"$tensor": {}}, {"$tensor": {"name": 1}},
           {"$items": [[{}, 1]]}, {"$float": "abc"}, {"$dtype": 3}, {"$device": "cuda:x"}, {"$odict": 5},
           {"$tuple": None}, {"$ndarray": "missing"}, {"$x": 1}, {"$tensor": {"name": "model.weight"}, "b": 2},
           "\udcff".encode("utf-8", "surrogatepass").decode("latin-1")]


def _nodes(node, path=()):
    """Every (path, node) of a JSON tree."""
    yield path, node
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield from _nodes(v, path + (k,))


def _replace(root, path, value):
    if not path:
        return value
    node = root
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return root


def _structured(data: bytes, rng: random.Random, count: int):
    """Hostile values at random places of the header and of the structure."""
    header, body = _split(data)
    structure = json.loads(header["__metadata__"][STRUCTURE])
    for i in range(count):
        h = json.loads(json.dumps(header))
        s = json.loads(json.dumps(structure))
        value = json.loads(json.dumps(rng.choice(HOSTILE)))
        if rng.random() < 0.3:
            path, _ = rng.choice(list(_nodes(h)))
            if path[:2] == ("__metadata__", STRUCTURE):
                continue
            h = _replace(h, path, value)
        else:
            path, _ = rng.choice(list(_nodes(s)))
            s = _replace(s, path, value)
        if isinstance(h, dict) and isinstance(h.get("__metadata__"), dict) and STRUCTURE in h["__metadata__"]:
            h["__metadata__"][STRUCTURE] = json.dumps(s)
        yield f"structured #{i} at {path!r} = {value!r}", _join(h, body) if isinstance(h, dict) else \
            _join({"x": h}, body)


def _fuzz(seed: int, mutations: int, structured: int, truncate_step: int):
    data = _valid_checkpoint()
    _check(data, "the valid file")
    (n,) = struct.unpack("<Q", data[:8])
    for k in list(range(0, 8 + n + 64, truncate_step)) + list(range(8 + n + 64, len(data), 97)):
        _check(data[:k], f"truncated to {k} bytes")
    rng = random.Random(seed)
    for i in range(mutations):
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(8 + n) if rng.random() < 0.8 else rng.randrange(len(b))
            b[pos] = rng.choice([rng.randrange(256), ord("["), ord("{"), ord('"'), ord("9"), ord("-"), ord(".")])
        _check(bytes(b), f"mutation #{i}")
    for what, mutant in _structured(data, rng, structured):
        _check(mutant, what)


def test_fuzz_truncations_mutations_and_structured_corpus():
    _fuzz(seed=1, mutations=1000, structured=1000, truncate_step=7)


@pytest.mark.slow
def test_fuzz_truncations_mutations_and_structured_corpus_long():
    _fuzz(seed=2, mutations=20000, structured=20000, truncate_step=1)

"""tt.save of whole objects (modules, user classes) and tt.load with torch's weights_only
semantics: the allow-list API, map_location in every form torch takes, shared storages, and
save's/load's torch keywords."""
from __future__ import annotations

import collections
import io
import pickle
import tempfile
import types

import ml_dtypes
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save as st_save

import tritensor as tt
from tritensor import nn
from tritensor.runtime import dtype as dt
from tritensor.serialization import (DEFAULT_PROTOCOL, add_safe_globals, clear_safe_globals, get_safe_globals,
                                     safe_globals)

DEV = tt.tensor(0.0).device  # the tests' device (cuda in the simulated-device run)


class TinyNet(nn.Module):
    """A user-defined module, as the classes a training script saves whole."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.scale = 0.5

    def forward(self, x):
        return self.fc(x).relu() * self.scale


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


@pytest.fixture(autouse=True)
def _no_user_globals():
    clear_safe_globals()
    yield
    clear_safe_globals()


def _round_trip(obj, **load_kw):
    buf = io.BytesIO()
    tt.save(obj, buf)
    buf.seek(0)
    return tt.load(buf, **load_kw)


def _out(t):
    return t.detach().cpu().numpy()


def test_whole_modules_round_trip_bit_for_bit():
    tt.manual_seed(0)
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LSTM(4, 5))
    net = TinyNet()
    buf = io.BytesIO()
    tt.save({"seq": seq, "net": net, "epoch": 3}, buf)
    x = tt.randn(2, 2, 3)
    with pytest.raises(pickle.UnpicklingError,
                       match=r"(?s)weights_only.*trusted source.*GLOBAL tritensor\.nn\.modules\.container\."
                             r"Sequential was not an allowed global.*add_safe_globals"):
        buf.seek(0)
        tt.load(buf)
    classes = [nn.Sequential, nn.Linear, nn.ReLU, nn.LSTM]
    with safe_globals(classes):
        buf.seek(0)
        with pytest.raises(pickle.UnpicklingError, match=rf"GLOBAL {__name__}\.TinyNet was not an allowed global"):
            tt.load(buf)  # the user's class names itself
    with safe_globals(classes + [TinyNet]):
        buf.seek(0)
        back = tt.load(buf)
    buf.seek(0)
    trusted = tt.load(buf, weights_only=False)
    for got in (back, trusted):
        assert got["epoch"] == 3 and isinstance(got["net"], TinyNet) and got["net"].scale == 0.5
        np.testing.assert_array_equal(_out(got["seq"](x)[0]), _out(seq(x)[0]))
        np.testing.assert_array_equal(_out(got["net"](x)), _out(net(x)))
        params = list(got["seq"].parameters())
        assert len(params) == len(list(seq.parameters()))
        assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.device == DEV for p in params)


def test_allow_list_api():
    assert get_safe_globals() == []
    add_safe_globals([Point, (TinyNet, "old.module.Net")])
    add_safe_globals([Point])  # kept once
    assert get_safe_globals() == [Point, (TinyNet, "old.module.Net")]
    with safe_globals([Point, nn.Linear]):  # Point was there before: it stays after the block
        assert get_safe_globals() == [Point, (TinyNet, "old.module.Net"), nn.Linear]
    assert get_safe_globals() == [Point, (TinyNet, "old.module.Net")]
    clear_safe_globals()
    assert get_safe_globals() == []
    with pytest.raises(ValueError, match="Expected tuple of length 2"):
        add_safe_globals([(Point,)])
    with pytest.raises(TypeError, match="Expected second item in tuple to be str"):
        add_safe_globals([(Point, 3)])
    with pytest.raises(TypeError, match="must be a list"):
        add_safe_globals(Point)
    with pytest.raises(TypeError, match="neither a class or function"):
        safe_globals([3])


def test_user_objects_load_under_their_own_name_or_an_alias():
    buf = io.BytesIO()
    tt.save([Point(1, tt.ones(2))], buf)
    with pytest.raises(pickle.UnpicklingError, match=rf"GLOBAL {__name__}\.Point was not an allowed global"):
        buf.seek(0)
        tt.load(buf)
    add_safe_globals([Point])
    buf.seek(0)
    (p,) = tt.load(buf)
    assert isinstance(p, Point) and p.x == 1 and p.y.tolist() == [1.0, 1.0]
    # a pickle naming the class by another path loads with a (class, "path") entry
    stream = (b"\x80\x02]q\x00cold.module\nPoint\nq\x01)\x81q\x02}q\x03(X\x01\x00\x00\x00xK\x05X\x01\x00\x00\x00yK"
              b"\x06ub\x85q\x04a.")
    f = _tt_file(stream)
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL old\.module\.Point was not an allowed global"):
        tt.load(f)
    with safe_globals([(Point, "old.module.Point")]):
        f.seek(0)
        ((q,),) = tt.load(f)
    assert isinstance(q, Point) and (q.x, q.y) == (5, 6)


def _tt_file(stream: bytes) -> io.BytesIO:
    return io.BytesIO(st_save({"tritensor.pickle": np.frombuffer(stream, np.uint8)},
                              metadata={"format": "tritensor", "tritensor.pickle": "tritensor.pickle"}))


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_builtin_values_every_pickle_protocol(protocol):
    od = collections.OrderedDict(b=1, a=2)
    obj = {"set": {1, 2}, "frozen": frozenset({"x"}), "bytes": b"\x00\xff", "ba": bytearray(b"ab"), "c": 1 - 2j,
           "od": od, "counter": collections.Counter("aab"), "big": -2**80, "nan": float("nan"), "t": (1, (2, [3])),
           "dtype": tt.bfloat16, "device": tt.device("cpu"), "size": tt.Size([2, 3]), "np": np.arange(3, dtype=np.int16),
           "npbf": np.ones(2, ml_dtypes.bfloat16), "s": "ü" * 300, "none": None}
    buf = io.BytesIO()
    tt.save(obj, buf, pickle_protocol=protocol)
    buf.seek(0)
    back = tt.load(buf)
    nan = back.pop("nan")
    assert nan != nan
    np.testing.assert_array_equal(back.pop("np"), obj["np"])
    np.testing.assert_array_equal(back.pop("npbf"), obj["npbf"])
    assert back == {k: v for k, v in obj.items() if k not in ("nan", "np", "npbf")}
    assert type(back["od"]) is collections.OrderedDict and list(back["od"]) == ["b", "a"]
    assert back["dtype"] is tt.bfloat16 and isinstance(back["size"], tt.Size)


def test_every_dtype_layout_and_flag_round_trips():
    base = tt.arange(24.0).reshape(4, 6)
    tensors = {d.name: tt.tensor([[1, 0, 3], [0, 5, 1]], dtype=d) for d in dt.ALL}
    obj = {"tensors": tensors, "t": base.t(), "slice": base[1:, ::2], "empty": tt.zeros(0, 3), "scalar": tt.tensor(2.5),
           "leaf": tt.ones(2, requires_grad=True), "param": nn.Parameter(tt.ones(2)),
           "frozen": nn.Parameter(tt.ones(2), requires_grad=False), "marker": {1}}  # the set makes it pickled
    back = _round_trip(obj)
    for name, t in tensors.items():
        got = back["tensors"][name]
        assert got.dtype is t.dtype and got.device == DEV
        np.testing.assert_array_equal(_out(got), _out(t))
    np.testing.assert_array_equal(_out(back["t"]), _out(base).T)
    np.testing.assert_array_equal(_out(back["slice"]), _out(base)[1:, ::2])
    assert back["t"].stride() == (1, 6) and back["slice"].storage_offset() == 6  # layouts kept, as torch
    assert back["empty"].shape == (0, 3) and back["scalar"].shape == () and back["scalar"].item() == 2.5
    assert back["leaf"].requires_grad and back["leaf"].is_leaf and type(back["leaf"]) is tt.Tensor
    assert isinstance(back["param"], nn.Parameter) and back["param"].requires_grad
    assert isinstance(back["frozen"], nn.Parameter) and not back["frozen"].requires_grad


def test_shared_storage_and_identity_survive():
    base = tt.arange(12.0).reshape(3, 4)
    p = nn.Parameter(tt.ones(3))
    obj = {"views": [base, base[1:, 1:], base.t()], "same": (base, base), "p": p, "p_again": [p], "s": {0}}
    back = _round_trip(obj)
    v0, v1, v2 = back["views"]
    assert back["same"][0] is back["same"][1] is v0 and back["p"] is back["p_again"][0]
    assert v1.untyped_storage() is v0.untyped_storage() is v2.untyped_storage()
    v0.add_(1.0)  # in place on the base: the views see it, as the originals would
    np.testing.assert_array_equal(_out(v1), np.arange(12.0).reshape(3, 4)[1:, 1:] + 1)
    np.testing.assert_array_equal(_out(v2), np.arange(12.0).reshape(3, 4).T + 1)


@pytest.mark.parametrize("pickled", [False, True])
def test_map_location_every_form(pickled):
    saved = tt.arange(6.0)
    obj = {"a": saved, "b": saved[2:]}
    if pickled:
        obj["marker"] = {1}  # a set: the whole-object path
    buf = io.BytesIO()
    tt.save(obj, buf)
    seen = []

    def record(storage, loc):
        seen.append((loc, storage.device.type, storage.nbytes()))
        return storage
    cpu = tt.device("cpu")
    forms = [(None, DEV), ("cpu", cpu), (b"cpu", cpu), (cpu, cpu), ({str(DEV): "cpu"}, cpu), ({"cuda:7": "cpu"}, DEV),
             (record, cpu), (lambda storage, loc: None, DEV), (lambda storage, loc: storage.cpu(), cpu)]
    if tt.cuda.is_available():
        forms += [("cuda", tt.device("cuda", 0)), (lambda storage, loc: storage.cuda(0), tt.device("cuda", 0))]
    for where, device in forms:
        buf.seek(0)
        back = tt.load(buf, map_location=where)
        assert back["a"].device == device and back["b"].device == device, where
        np.testing.assert_array_equal(_out(back["b"]), np.arange(2.0, 6.0))
    assert seen and all(s == (str(DEV), "cpu", s[2]) for s in seen)  # the storage comes on the cpu, as torch's
    for bad, err, msg in [(3, TypeError, "map_location must be None, a str, a device, a dict"),
                          ("gpu", ValueError, "map_location: 'gpu' is not a device"),
                          ({str(DEV): 5}, TypeError, r"map_location\[.*\] is a int"),
                          (lambda storage, loc: 5, TypeError, "map_location returned a int")]:
        buf.seek(0)
        with pytest.raises(err, match=msg):
            tt.load(buf, map_location=bad)


def test_save_and_load_keywords():
    assert DEFAULT_PROTOCOL == 2
    buf = io.BytesIO()
    tt.save({"m": TinyNet()}, buf, pickle, 4, _use_new_zipfile_serialization=False, metadata={"run": "7"})
    with safe_open_bytes(buf.getvalue()) as f:
        assert f.metadata()["run"] == "7" and "storage.0" in f.keys()  # safetensors tools read the storages
    other = types.SimpleNamespace(Pickler=pickle._Pickler)  # another pickle module (as dill): its Pickler is used
    buf2 = io.BytesIO()
    tt.save({"a": tt.ones(2), "s": {1}}, buf2, pickle_module=other)
    buf2.seek(0)
    back = tt.load(buf2)
    assert back["s"] == {1} and back["a"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="pickle_protocol must be an int from 2"):
        tt.save({"m": TinyNet()}, io.BytesIO(), pickle_protocol=1)
    with pytest.raises(TypeError, match="pickle_module must be a module with a Pickler"):
        tt.save({"m": TinyNet()}, io.BytesIO(), pickle_module=object())
    buf.seek(0)
    assert isinstance(tt.load(buf, pickle_module=pickle)["m"], TinyNet)  # a pickle_module: weights_only False
    with pytest.raises(RuntimeError, match="Can not safely load weights when explicit pickle_module"):
        tt.load(buf, pickle_module=pickle, weights_only=True)
    with pytest.raises(TypeError, match="weights_only must be a bool"):
        tt.load(buf, weights_only="yes")
    with pytest.raises(TypeError, match="unexpected keyword"):
        tt.load(buf, errors="strict")
    buf.seek(0)
    with safe_globals([TinyNet, nn.Linear]):
        assert isinstance(tt.load(buf, encoding="latin1", mmap=False)["m"], TinyNet)


class safe_open_bytes:
    """safetensors' reader over bytes (it opens paths): the file other tools would see."""

    def __init__(self, data: bytes):
        self.tmp = tempfile.NamedTemporaryFile(suffix=".safetensors")
        self.tmp.write(data)
        self.tmp.flush()

    def __enter__(self):
        self.f = safe_open(self.tmp.name, "np")
        return self.f.__enter__()

    def __exit__(self, *exc):
        self.f.__exit__(*exc)
        self.tmp.close()


def test_state_dicts_stay_plain_safetensors_files():
    tt.manual_seed(1)
    sd = TinyNet().state_dict()
    buf = io.BytesIO()
    tt.save(sd, buf)
    with safe_open_bytes(buf.getvalue()) as f:
        assert sorted(f.keys()) == ["fc.bias", "fc.weight"] and "tritensor.pickle" not in f.metadata()
    buf.seek(0)
    back = tt.load(buf)
    np.testing.assert_array_equal(_out(back["fc.weight"]), _out(sd["fc.weight"]))

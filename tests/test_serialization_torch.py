"""tritensor.load of files written by torch.save (tests/fixtures/torch_files/, made by
tools/make_torch_fixtures.py in an environment with torch; torch is never imported here).

Every fixture comes in torch's zip format (``.pt``) and its legacy format (``.legacy.pt``);
``expected.json`` holds what torch saved: dtype, shape, strides, offset and exact values of
every tensor.
"""
from __future__ import annotations

import collections
import json
import pathlib
import pickle

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.runtime import dtype as dt
from tritensor.serialization import CheckpointError

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "torch_files"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
FORMATS = [".pt", ".legacy.pt"]

# the dtypes the fixtures hold (tools/make_torch_fixtures.py: DTYPES); tritensor's own table says
# which of them load, and the rest must be refused naming the dtype
FIXTURE_DTYPES = sorted(k[len("dtype_"):] for k in EXPECTED if k.startswith("dtype_"))
HAVE = {d.name for d in dt.ALL}
SUPPORTED = [d for d in FIXTURE_DTYPES if d in HAVE]
UNSUPPORTED = [d for d in FIXTURE_DTYPES if d not in HAVE]


def _load(name: str, fmt: str, **kw):
    return tt.load(FIXTURES / f"{name}{fmt}", **kw)


def _walk(obj, path=""):
    """``{path: tensor}`` in the order and spelling of the fixture script's ``_expected``."""
    out = {}
    if isinstance(obj, tt.Tensor):
        out[path] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_walk(v, f"{path}/{k}"))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(_walk(v, f"{path}/{i}"))
    return out


def _check_tensors(obj, expected: dict):
    got = _walk(obj)
    assert sorted(got) == sorted(expected)
    for path, want in expected.items():
        t = got[path]
        assert t.dtype.name == want["dtype"], path
        assert list(t.shape) == want["shape"] and list(t.stride()) == want["stride"], path
        assert t.storage_offset() == want["offset"], path
        assert isinstance(t, nn.Parameter) == want["parameter"] and t.requires_grad == want["requires_grad"], path
        ref = np.array(want["values"], dtype=np.float64).astype(t.dtype.np).reshape(want["shape"])
        np.testing.assert_array_equal(t.detach().cpu().numpy(), ref)  # torch's values, bit for bit


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["state_dict", "optimizer", "views", "nested", "bare"])
def test_values_match_what_torch_saved(name, fmt):
    obj = _load(name, fmt, map_location="cpu")
    _check_tensors(obj, EXPECTED[name])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", SUPPORTED)
def test_every_dtype_tritensor_has(name, fmt):
    obj = _load(f"dtype_{name}", fmt)
    assert obj["x"].dtype is dt._by_name(name) and obj["empty"].shape == (0, 3)
    _check_tensors(obj, EXPECTED[f"dtype_{name}"])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", UNSUPPORTED)
def test_dtypes_tritensor_has_not_are_refused_by_name(name, fmt):
    for weights_only in (True, False):
        with pytest.raises(CheckpointError, match=rf"dtype torch\.{name}, which tritensor does not have"):
            _load(f"dtype_{name}", fmt, weights_only=weights_only)


@pytest.mark.parametrize("fmt", FORMATS)
def test_state_dict_and_optimizer_load_into_tritensor_objects(fmt):
    sd = _load("state_dict", fmt)
    assert isinstance(sd, collections.OrderedDict) and list(sd)[:2] == ["0.weight", "0.bias"]
    assert sd["2.num_batches_tracked"].dtype is tt.int64 and sd["2.num_batches_tracked"].shape == ()
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.BatchNorm1d(4), nn.Linear(4, 2))
    model.load_state_dict(sd)
    np.testing.assert_array_equal(model[0].weight.detach().cpu().numpy(), sd["0.weight"].cpu().numpy())
    state = _load("optimizer", fmt)
    assert sorted(state["state"]) == list(range(6))  # int keys stay ints
    group = state["param_groups"][0]
    assert group["betas"] == (0.9, 0.999) and group["lr"] == 0.01 and group["params"] == list(range(6))
    assert group["foreach"] is None and group["amsgrad"] is False
    opt = tt.optim.Adam(model.parameters(), lr=0.5)
    opt.load_state_dict(state)
    assert opt.param_groups[0]["lr"] == 0.01


@pytest.mark.parametrize("fmt", FORMATS)
def test_views_share_their_storage_as_in_torch(fmt):
    base, rows, t, strided, row, flat = _load("views", fmt)
    for v in (rows, t, strided, row, flat):
        assert v.untyped_storage() is base.untyped_storage()
    assert not t.is_contiguous() and strided.stride() == (6, 2) and rows.storage_offset() == 8
    base.fill_(-1.0)  # one storage: every view sees it
    for v in (rows, t, strided, row, flat):
        assert (v.cpu().numpy() == -1).all()


@pytest.mark.parametrize("fmt", FORMATS)
def test_nested_values_and_torch_types(fmt):
    obj = _load("nested", fmt)
    assert obj["epoch"] == 3 and obj["lr"] == 0.125 and obj["name"] == "run" and obj["flags"] == [True, None]
    assert isinstance(obj["size"], tt.Size) and obj["size"] == (2, 3)
    assert obj["dtype"] is tt.bfloat16 and obj["device"] == tt.device("cuda", 1)
    assert obj["set"] == {1, 2} and obj["frozenset"] == frozenset({3}) and obj["bytes"] == b"\x00ab"
    assert obj["big"] == 2**70 and obj["complex"] == 1 + 2j
    assert isinstance(obj["param"], nn.Parameter) and obj["param"].requires_grad and obj["param"].is_leaf
    assert isinstance(obj["frozen"], nn.Parameter) and not obj["frozen"].requires_grad
    assert obj["scalar"].shape == () and obj["scalar"].item() == 2.25


@pytest.mark.parametrize("fmt", FORMATS)
def test_tensors_saved_on_cuda_follow_map_location(fmt):
    locations = []

    def keep_on_cpu(storage, loc):
        locations.append(loc)
        return storage
    for where in ("cpu", tt.device("cpu"), {"cuda:1": "cpu"}, keep_on_cpu):
        obj = _load("cuda", fmt, map_location=where)
        assert obj["w"].device == tt.device("cpu") and obj["v"].dtype is tt.int32
        _check_tensors(obj, EXPECTED["cuda"])
    assert locations == ["cuda:1", "cuda:1"]  # called once per storage, with torch's location tag
    if not tt.cuda.is_available():
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
            _load("cuda", fmt)
        return
    if tt.cuda.device_count() < 2:
        with pytest.raises(RuntimeError, match="on CUDA device 1 but tritensor.cuda.device_count"):
            _load("cuda", fmt)
    for where in ({"cuda:1": "cuda:0"}, "cuda:0", lambda storage, loc: storage.cuda(0)):
        obj = _load("cuda", fmt, map_location=where)
        assert obj["w"].device == tt.device("cuda", 0)
        _check_tensors(obj, EXPECTED["cuda"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_whole_torch_module_names_torch_classes_clearly(fmt):
    with pytest.raises(pickle.UnpicklingError,
                       match=r"GLOBAL torch\.nn\.modules\.container\.Sequential.*state_dict\(\) with torch"):
        _load("whole_model", fmt)
    with pytest.raises(pickle.UnpicklingError,
                       match=r"GLOBAL torch\.nn\.modules\.container\.Sequential cannot be loaded.*without torch"):
        _load("whole_model", fmt, weights_only=False)


@pytest.mark.parametrize("fmt", FORMATS)
def test_parameter_attributes_are_refused_by_name(fmt):
    with pytest.raises(CheckpointError, match=r"Parameter was saved with attributes \['note'\]"):
        _load("param_with_state", fmt)


def test_weights_only_false_reads_the_same_values():
    for fmt in FORMATS:
        _check_tensors(_load("nested", fmt, weights_only=False), EXPECTED["nested"])
        _check_tensors(_load("optimizer", fmt, weights_only=False), EXPECTED["optimizer"])

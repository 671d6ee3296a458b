"""tritensor.save / tritensor.load: training checkpoints of plain data (state dicts, optimizer
state, numbers ...) in safetensors + JSON structure, no pickle on load, atomic writes (a SIGKILL
mid-save leaves the previous checkpoint loadable). Whole objects: test_serialization_objects.py."""
from __future__ import annotations

import collections
import glob
import io
import json
import math
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file, save as st_save

import tritensor as tt
from tritensor import nn


def _arr(t):
    return t.detach().float().numpy() if t.dtype.is_floating_point else t.numpy()


def _train_step(model, opt, x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()


def test_checkpoint_round_trip_resumes_training(tmp_path):
    tt.manual_seed(0)
    x, y = tt.randn(4, 3), tt.randn(4, 2)
    model = nn.Linear(3, 2)
    opt = tt.optim.Adam(model.parameters(), lr=0.1)
    for _ in range(2):
        _train_step(model, opt, x, y)
    sched = {"step_size": 30, "gamma": 0.1, "base_lrs": [0.1], "last_epoch": 5, "_step_count": 6,
             "verbose": False, "_get_lr_called_within_step": False, "_last_lr": [0.01]}  # StepLR's state_dict
    path = str(tmp_path / "ckpt.pt")
    tt.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched, "epoch": 7}, path)

    ck = tt.load(path)
    assert ck["epoch"] == 7 and ck["scheduler"] == sched
    assert isinstance(ck["model"], collections.OrderedDict) and list(ck["model"]) == list(model.state_dict())
    assert set(ck["optimizer"]["state"]) == {0, 1}  # int keys come back as ints
    assert ck["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)  # tuples as tuples
    model2 = nn.Linear(3, 2)
    opt2 = tt.optim.Adam(model2.parameters(), lr=0.5)
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["optimizer"])
    assert opt2.param_groups[0]["lr"] == 0.1
    _train_step(model, opt, x, y)
    _train_step(model2, opt2, x, y)
    for a, b in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(_arr(a), _arr(b))  # the resumed run is the same run, bit for bit


def test_values_and_dtypes_round_trip():
    shared = tt.arange(6).reshape(2, 3).float()
    p = nn.Parameter(tt.ones(2))
    obj = {
        "dtypes": [tt.tensor([1.5, -2.0], dtype=d) for d in (tt.float32, tt.float64, tt.float16, tt.bfloat16)]
        + [tt.tensor([3, -4], dtype=tt.int32), tt.tensor([5], dtype=tt.int64), tt.tensor([True, False])],
        "scalar": tt.tensor(2.5), "empty": tt.zeros(0, 3), "noncontig": shared.t(), "same": (shared, shared),
        "leaf": tt.ones(2, requires_grad=True), "param": p,
        "numbers": [1, -2**62, 0.25, float("inf"), float("nan"), True, None, "s"],
        7: "int key", "$weird": 1, "np": np.arange(4, dtype=np.int16), "np_scalar": np.float32(1.5),
        "dtype": tt.bfloat16, "device": tt.device("cpu"),
    }
    buf = io.BytesIO()
    tt.save(obj, buf)
    buf.seek(0)
    back = tt.load(buf)
    for a, b in zip(obj["dtypes"], back["dtypes"]):
        assert b.dtype is a.dtype
        np.testing.assert_array_equal(_arr(a), _arr(b))
    assert back["scalar"].shape == () and back["scalar"].item() == 2.5
    assert back["empty"].shape == (0, 3)
    np.testing.assert_array_equal(back["noncontig"].numpy(), shared.t().numpy())
    assert back["same"][0] is back["same"][1]  # one object saved once, loaded once
    assert back["leaf"].requires_grad and back["leaf"].is_leaf
    assert isinstance(back["param"], nn.Parameter) and back["param"].requires_grad
    nums = back["numbers"]
    assert nums[:4] == [1, -2**62, 0.25, math.inf] and math.isnan(nums[4]) and nums[5:] == [True, None, "s"]
    assert back[7] == "int key" and back["$weird"] == 1
    assert back["np"].dtype == np.int16 and back["np"].tolist() == [0, 1, 2, 3]
    assert back["np_scalar"] == 1.5 and back["dtype"] is tt.bfloat16 and back["device"] == tt.device("cpu")
    buf.seek(0)  # a bare tensor
    bare = io.BytesIO()
    tt.save(tt.ones(3, dtype=tt.float16), bare)
    bare.seek(0)
    t = tt.load(bare)
    assert isinstance(t, tt.Tensor) and t.dtype is tt.float16 and t.tolist() == [1, 1, 1]


def test_open_file_objects_paths_and_bare_arrays(tmp_path):
    # torch's idioms: `with open(p, "wb") as f: torch.save(obj, f)`, pathlib paths, and a bare
    # array or a list of arrays at the top of the checkpoint.
    path = tmp_path / "obj.pt"
    obj = [np.arange(6.0).reshape(2, 3).T, {"inner": (tt.arange(3), np.zeros(0, np.int32))},
           collections.OrderedDict(a=np.float64(2.5))]
    with open(path, "wb") as fh:
        tt.save(obj, fh)
    with open(path, "rb") as fh:
        back = tt.load(fh)
    again = tt.load(path)
    for got in (back, again):
        np.testing.assert_array_equal(got[0], obj[0])
        assert got[1]["inner"][0].tolist() == [0, 1, 2] and got[1]["inner"][1].dtype == np.int32
        assert isinstance(got[2], collections.OrderedDict) and got[2]["a"] == 2.5
    tt.save(np.eye(2, dtype=np.float16), path)
    bare = tt.load(str(path))
    assert isinstance(bare, np.ndarray) and bare.dtype == np.float16 and bare.tolist() == [[1, 0], [0, 1]]


def test_state_dict_file_is_a_plain_safetensors_file(tmp_path):
    path = str(tmp_path / "m.safetensors")
    sd = {"fc.weight": tt.ones(2, 3, dtype=tt.bfloat16), "fc.bias": tt.zeros(2)}
    tt.save(sd, path)
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
    assert header["fc.weight"]["dtype"] == "BF16"  # other tools read the dtype right
    assert load_file(path)["fc.bias"].shape == (2,)
    # and any safetensors file loads, as a {name: Tensor} dict
    other = st_save({"w": np.arange(3, dtype=np.float32), "h": np.ones(2, ml_dtypes.bfloat16)})
    back = tt.load(io.BytesIO(other))
    assert back["w"].tolist() == [0, 1, 2] and back["h"].dtype is tt.bfloat16


def _with_header(header: dict, body: bytes = b"") -> io.BytesIO:
    h = json.dumps(header).encode()
    return io.BytesIO(struct.pack("<Q", len(h)) + h + body)


def test_load_refuses_bad_files_without_running_anything():
    meta = {"__metadata__": {"tritensor.structure": json.dumps({"$pickle": "os.system"})}}
    with pytest.raises(RuntimeError, match="unknown tag '\\$pickle'"):
        tt.load(_with_header(meta))
    with pytest.raises(RuntimeError, match="its shape and offsets do not match the data"):
        tt.load(_with_header({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8))
    with pytest.raises(RuntimeError, match="bad dtype, shape or offsets"):
        tt.load(_with_header({"w": {"dtype": "OBJ", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8))
    with pytest.raises(RuntimeError, match="not a safetensors file"):
        tt.load(io.BytesIO(struct.pack("<Q", 10**12) + b"{}"))
    meta = {"__metadata__": {"tritensor.structure": json.dumps({"$tensor": {"name": "x", "device": "cpu"}})}}
    with pytest.raises(RuntimeError, match="names a tensor 'x' the file does not hold"):
        tt.load(_with_header(meta))


def test_map_location():
    meta = {"__metadata__": {"tritensor.structure": json.dumps({"$tensor": {"name": "x", "device": "cuda:0"}})},
            "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    body = np.float32(3).tobytes()
    t = tt.load(_with_header(meta, body), map_location="cpu")
    assert t.device == tt.device("cpu") and t.item() == 3
    t = tt.load(_with_header(meta, body), map_location={"cuda:0": "cpu"})
    assert t.device == tt.device("cpu")
    if not tt.cuda.is_available():
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
            tt.load(_with_header(meta, body))
    with pytest.raises(TypeError, match="map_location must be"):
        tt.load(_with_header(meta, body), map_location=3)


def test_failed_save_leaves_the_old_file(tmp_path):
    path = str(tmp_path / "ck")
    tt.save({"epoch": 1}, path)
    with pytest.raises(TypeError, match="cannot pickle '_thread.lock' object"):  # pickle's own error, as torch.save
        tt.save({"epoch": 2, "opt": [threading.Lock()]}, path)
    with pytest.raises(TypeError, match="metadata must be a dict of str -> str"):
        tt.save({}, path, metadata={"a": 1})
    assert tt.load(path) == {"epoch": 1}
    assert os.listdir(tmp_path) == ["ck"]


_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import tritensor as tt
    path = sys.argv[1]
    tt.save({"epoch": 1, "w": tt.ones(4)}, path)
    print("ready", flush=True)
    big = tt.from_numpy(np.full(12 * 2**20, 2.0, np.float32))  # 48 MiB per save
    epoch = 2
    while True:
        tt.save({"epoch": epoch, "w": big}, path)
        epoch += 1
""")


def test_sigkill_mid_save_leaves_a_loadable_checkpoint(tmp_path):
    path = str(tmp_path / "ck.safetensors")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    landed_mid_save = False
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", _CHILD, path], stdout=subprocess.PIPE, env=env)
        try:
            assert child.stdout.readline().strip() == b"ready"
            deadline = time.monotonic() + 60
            while not glob.glob(str(tmp_path / ".ck.safetensors.*.tmp")) and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(0.005)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait()
        assert child.returncode == -signal.SIGKILL
        ck = tt.load(path)  # the last complete checkpoint, never a torn one
        if ck["epoch"] == 1:
            assert ck["w"].tolist() == [1, 1, 1, 1]
        else:
            assert ck["w"].shape == (12 * 2**20,) and float(ck["w"].sum()) == 2.0 * 12 * 2**20
        leftovers = glob.glob(str(tmp_path / ".ck.safetensors.*.tmp"))
        for f in leftovers:
            os.unlink(f)
        if leftovers:  # the kill hit between opening the temporary file and the rename
            landed_mid_save = True
            break
    assert landed_mid_save


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_next_save_removes_temp_files_of_dead_writers(tmp_path):
    """29 of 50 SIGKILLs mid-save once left a temp file (319 MB in all) that no later save
    removed, so a crash-looping job filled the disk. Temp files of writers that are gone are
    removed by the next save to the same path; a live writer's, and anything else, are kept."""
    path = tmp_path / "ck"
    dead = [tmp_path / f".ck.{_dead_pid()}.{h}.tmp" for h in ("0badc0de", "12345678")]
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        alive = [tmp_path / f".ck.{sleeper.pid}.deadbeef.tmp", tmp_path / f".ck.{os.getpid()}.00000000.tmp"]
        others = [tmp_path / n for n in (".other.1.0badc0de.tmp", ".ck.notapid.0badc0de.tmp", "ck.1.0badc0de.tmp")]
        for f in dead + alive + others:
            f.write_bytes(b"x" * 100)
        tt.save({"epoch": 3}, str(path))
        assert tt.load(str(path)) == {"epoch": 3}
        assert sorted(os.listdir(tmp_path)) == sorted(["ck"] + [f.name for f in alive + others])
    finally:
        sleeper.kill()
        sleeper.wait()


def _kill_mid_save(path: str, pattern: str, tries: int = 10) -> list:
    """Start a saving child and SIGKILL it mid-save until a kill leaves a temp file; return them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    for _ in range(tries):
        child = subprocess.Popen([sys.executable, "-c", _CHILD, path], stdout=subprocess.PIPE, env=env)
        try:
            assert child.stdout.readline().strip() == b"ready"
            deadline = time.monotonic() + 60
            while not glob.glob(pattern) and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(0.005)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait()
        left = glob.glob(pattern)
        if left:
            return left
    raise AssertionError(f"no kill in {tries} landed mid-save")


@pytest.mark.parametrize("cycles", [1, pytest.param(6, marks=pytest.mark.slow)])
def test_crash_looping_saver_leaves_no_temp_files(tmp_path, cycles):
    """A job killed mid-save, restarted, killed again ...: each restart's save removes
    the temp file the killed run left, so they never pile up."""
    path = str(tmp_path / "ck.safetensors")
    pattern = str(tmp_path / ".ck.safetensors.*.tmp")
    for epoch in range(cycles):
        assert len(_kill_mid_save(path, pattern)) == 1  # the earlier kills' files are gone already
        tt.save({"epoch": epoch}, path)
        assert glob.glob(pattern) == []
        assert tt.load(path) == {"epoch": epoch}

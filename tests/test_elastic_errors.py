"""tritensor.elastic.multiprocessing.errors: @record, error.json, ProcessFailure, ChildFailedError."""

import json
import signal
import sys
import time

import pytest
from elastic_helpers import RECORD_SCRIPT

from tritensor.elastic.multiprocessing import start_processes
from tritensor.elastic.multiprocessing.errors import ChildFailedError, ErrorHandler, ProcessFailure, record


def _error_file(path, message, ts):
    data = {"message": {"message": message, "extraInfo": {"py_callstack": f"Traceback\n  {message}",
                                                          "timestamp": str(ts)}}}
    path.write_text(json.dumps(data))
    return str(path)


def test_record_writes_seed_shaped_error_json(tmp_path, monkeypatch):
    err = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(err))

    @record
    def main(x):
        raise KeyError(f"missing {x}")

    before = int(time.time())
    with pytest.raises(KeyError):
        main("w")
    data = json.loads(err.read_text())
    assert set(data) == {"message"} and set(data["message"]) == {"message", "extraInfo"}
    assert data["message"]["message"] == "KeyError: 'missing w'"
    extra = data["message"]["extraInfo"]
    assert set(extra) == {"py_callstack", "timestamp"}
    assert "Traceback (most recent call last)" in extra["py_callstack"]
    assert "raise KeyError" in extra["py_callstack"]
    assert isinstance(extra["timestamp"], str) and before <= int(extra["timestamp"]) <= time.time() + 1


def test_record_passes_values_and_clean_exits(tmp_path, monkeypatch):
    err = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(err))
    assert record(lambda a, b=1: a + b)(2, b=3) == 5

    @record
    def exits(code):
        sys.exit(code)

    assert exits(0) is None and exits(None) is None
    with pytest.raises(SystemExit):
        exits(2)
    assert not err.exists()  # neither a clean exit nor sys.exit(2) is an exception to record


def test_record_without_error_file_env_still_raises(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    with pytest.raises(ZeroDivisionError):
        record(lambda: 1 / 0)()


def test_record_with_custom_error_handler(tmp_path):
    seen = []

    class MyHandler(ErrorHandler):
        def record_exception(self, e):
            seen.append(repr(e))

    @record(error_handler=MyHandler())
    def main():
        raise OSError("disk")

    with pytest.raises(OSError):
        main()
    assert seen == ["OSError('disk')"]


def test_record_binary_failure_read_back_into_process_failure(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(RECORD_SCRIPT)
    ctx = start_processes("train.py", sys.executable, {0: (str(script),)}, {0: {}}, str(tmp_path / "logs"))
    result = ctx.wait(timeout=60, period=0.05)
    f = result.failures[0]
    assert f.exitcode == 1 and f.error_file == str(tmp_path / "logs" / "0" / "error.json")
    assert f.message["message"] == "RuntimeError: bad batch 7"
    assert f.error_file_data == json.loads(open(f.error_file).read())
    assert f.timestamp == int(f.message["extraInfo"]["timestamp"])
    msg = str(ChildFailedError("train.py", {0: f}))
    lines = msg.splitlines()
    assert lines[1] == "=" * len(lines[1]) and lines[2] == "train.py FAILED"
    assert "  <NO_OTHER_FAILURES>" in lines
    assert "Root Cause (first observed failure):" in lines
    assert "  rank      : 0 (local_rank: 0)" in lines
    assert f"  exitcode  : 1 (pid: {f.pid})" in lines
    assert f"  error_file: {f.error_file}" in lines
    assert any(line.startswith("  traceback : Traceback (most recent call last):") for line in lines)
    assert any("RuntimeError: bad batch 7" in line for line in lines)


def test_child_failed_error_root_cause_is_first_failure(tmp_path):
    late = ProcessFailure(local_rank=0, pid=100, exitcode=1,
                          error_file=_error_file(tmp_path / "e0.json", "ValueError: late", 2000))
    early = ProcessFailure(local_rank=1, pid=101, exitcode=1,
                           error_file=_error_file(tmp_path / "e1.json", "OSError: early", 1000))
    e = ChildFailedError("trainer", {4: late, 5: early})
    assert e.get_first_failure() == (5, early)
    msg = str(e)
    others, root = msg.split("Root Cause (first observed failure):")
    assert "rank      : 4 (local_rank: 0)" in others and "ValueError: late" in others
    assert "rank      : 5 (local_rank: 1)" in root and "OSError: early" in root
    assert max(len(line) for line in msg.splitlines() if set(line) == {"="}) <= 60
    with pytest.raises(ValueError):
        ChildFailedError("trainer", {})


def test_process_failure_without_error_file_and_string_messages(tmp_path):
    f = ProcessFailure(local_rank=0, pid=7, exitcode=-signal.SIGTERM, error_file=str(tmp_path / "none.json"))
    assert f.signal_name() == "SIGTERM" and f.message == "Signal 15 (SIGTERM) received by PID 7"
    assert abs(f.timestamp - time.time()) < 5 and "_" in f.timestamp_isoformat()
    g = ProcessFailure(local_rank=0, pid=7, exitcode=3, error_file=str(tmp_path / "none.json"))
    assert g.signal_name() == "<N/A>" and "record" in g.message
    p = tmp_path / "str.json"
    p.write_text(json.dumps({"message": "plain text", "timestamp": 123}))
    h = ProcessFailure(local_rank=0, pid=7, exitcode=1, error_file=str(p))
    assert (h.message, h.timestamp) == ("plain text", 123)
    assert "traceback : plain text" in str(ChildFailedError("x", {0: h}))


def test_record_copies_a_child_failed_errors_root_cause(tmp_path, monkeypatch):
    child = _error_file(tmp_path / "child.json", "ValueError: deep", 1000)
    mine = tmp_path / "mine.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(mine))

    @record
    def launcher():
        raise ChildFailedError("trainer", {0: ProcessFailure(0, 9, 3, child)})

    with pytest.raises(ChildFailedError):
        launcher()
    data = json.loads(mine.read_text())
    assert data["message"]["message"] == "ValueError: deep" and data["message"]["errorCode"] == 3

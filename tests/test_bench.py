"""The benchmark command line (bench/): it runs, reports a peer ratio, writes JSON, rejects bad options.

Speed itself is never asserted here (that is what the benchmark is for); these tests check the
report is produced and well-formed, with tiny sizes so the interpreter stays fast.
"""
import json

import pytest

import tritensor as tt
from tritensor.bench import __main__ as cli
from tritensor.bench import common


def test_tiny_run_prints_tables_and_writes_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert cli.main(["matmul", "cast", "--sizes", "32", "--dtypes", "float32,bfloat16", "--json", str(path)]) == 0
    printed = capsys.readouterr().out
    gpu = tt.cuda.is_available()  # on a GPU the peer is torch when the benchmark process can import it
    assert "== matmul ==" in printed and "== cast ==" in printed and "speed vs " in printed
    report = json.loads(path.read_text())
    assert report["mode"] == ("gpu" if gpu else "cpu") and report["memory_peak_gbs"] > 0
    rows = report["results"]
    assert {(r["family"], r["dtype"]) for r in rows} == {(f, d) for f in ("matmul", "cast")
                                                          for d in ("float32", "bfloat16")}
    for r in rows:
        assert r["ms"] > 0 and r["throughput"] > 0 and r["peer_ms"] > 0
        assert r["speed_vs_peer"] == pytest.approx(r["peer_ms"] / r["ms"])
    mm = next(r for r in rows if r["family"] == "matmul" and r["dtype"] == "float32")
    assert mm["unit"] == "TFLOP/s" and mm["throughput"] == pytest.approx(2 * 32**3 / mm["ms"] / 1e9)
    if not gpu:
        assert "speed vs numpy" in printed
        assert next(r for r in rows if r["dtype"] == "bfloat16")["peer_name"] == "numpy(fp32)"


def test_bad_options_are_rejected(capsys):
    for argv in (["nope"], ["--dtypes", "float8"], ["--sizes", "0"], ["--sizes", "a,b"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unknown family ['nope']" in err and "unknown ['float8']" in err and "positive integers" in err


def test_comm_dispatch(monkeypatch, capsys):
    monkeypatch.setitem(cli.EXTERNAL, "comm", "tritensor.comm.no_such_bench_module")
    assert cli.main(["comm", "--anything"]) == 2
    assert "is not available" in capsys.readouterr().err
    seen = []
    fake = type("M", (), {"main": staticmethod(lambda argv: seen.append(argv) or 0)})
    monkeypatch.setattr(cli.importlib, "import_module", lambda name: fake)
    assert cli.main(["comm", "--size", "8"]) == 0 and seen == [["--size", "8"]]


def test_table_formats_missing_values(capsys):
    r = common.Result("f", "op", "[3]", "float32", 3, 2.0, 1.5, "GB/s", None, "", None, None)
    common.print_table("f", [r])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.split()[:5] == ["op", "[3]", "float32", "2", "1.5"] and line.split()[5:] == ["-", "-", "-"]


@pytest.mark.slow  # ~15 s on a loaded 2-core machine: six processes start and import tritensor
def test_comm_soak_smoke(tmp_path, capsys):
    from tritensor.bench import comm as comm_bench

    path = tmp_path / "soak.json"
    assert comm_bench.main(["--soak", "--seconds", "3", "--json", str(path)]) == 0
    rep = json.loads(path.read_text())
    assert rep["errors"] == [] and rep["wrong"] == 0
    assert set(rep["phases"]) == {"quiet", "flood"}
    for ph in rep["phases"].values():
        assert ph["ops"] > 0 and ph["wrong"] == 0 and ph["p99_ms"] >= ph["p50_ms"] > 0
        assert ph["store_peak_rss_mb"] > 0
    assert rep["flood"].get("garbage", 0) > 0 and rep["flood"].get("idle", 0) > 0  # the flood really ran
    assert "wrong results: 0" in capsys.readouterr().out


def test_comm_soak_rejects_bad_seconds(capsys):
    from tritensor.bench import comm as comm_bench

    with pytest.raises(SystemExit) as e:
        comm_bench.main(["--soak", "--seconds", "0"])
    assert e.value.code == 2 and "--seconds" in capsys.readouterr().err


def test_attention_family_reports_forward_and_backward(tmp_path, capsys):
    path = tmp_path / "attn.json"
    assert cli.main(["attention", "--sizes", "16", "--dtypes", "float32", "--json", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "== attention ==" in printed and "materialised" in printed
    rows = json.loads(path.read_text())["results"]
    ops = {(r["op"].split(" (")[0], r["shape"].endswith("causal")) for r in rows}
    assert ops == {(op, c) for op in ("sdpa fwd", "sdpa fwd+bwd") for c in (False, True)}
    for r in rows:
        assert r["unit"] == "TFLOP/s" and r["throughput"] > 0 and r["peer_ms"] > 0


def test_general_kernel_rows_switch_the_hopper_kernel_off_and_back():
    from tritensor.bench.common import with_kernel_off
    from tritensor.triton_kernels import attention_tma, matmul_tma

    for module in (attention_tma, matmul_tma):
        seen = []
        with_kernel_off(module, lambda: seen.append(module.ENABLED))()
        assert seen == [False] and module.ENABLED is True

        def boom():
            raise ValueError("kernel failed")

        with pytest.raises(ValueError):
            with_kernel_off(module, boom)()
        assert module.ENABLED is True


def test_launch_host_only_times_every_row_with_launches_a_no_op(tmp_path, capsys):
    from tritensor.bench import host_only
    from tritensor.runtime import launch as launch_mod

    real = launch_mod._final
    out = tmp_path / "host.json"
    assert cli.main(["launch", "--host-only", "--repeat", "3", "--json", str(out)]) == 0
    assert launch_mod._final is real  # the no-op was put back
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert set(data["host_only"]) == {name for name, *_ in host_only.ROWS}
    assert all(ops >= 1 and us > 0 for ops, us in data["host_only"].values())
    assert "launches replaced by a no-op" in text and data["peer"] is None

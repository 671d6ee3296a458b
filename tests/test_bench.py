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
    # a device run's peer is torch, which the benchmark process may not have (the simulated device,
    # a GPU machine without torch): then no row is compared, and the report says so
    peer = not report["peer"].startswith("none")
    assert peer or (gpu and report["peer"] == "none (torch is not installed)")
    for r in rows:
        assert r["ms"] > 0 and r["throughput"] > 0
        if peer:
            assert r["peer_ms"] > 0 and r["speed_vs_peer"] == pytest.approx(r["peer_ms"] / r["ms"])
        else:
            assert r["peer_ms"] is None and r["speed_vs_peer"] is None
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


def test_help_lists_every_benchmark(capsys):
    """--help once named the kernel families and 'comm' only."""
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for name in list(cli.FAMILIES) + ["amp", "launch", "ddp", "rpc", "elastic", "comm"]:
        assert f" {name}" in text, name
    assert set(cli.EXTERNAL) == set(cli.EXTERNAL_HELP) == {"amp", "launch", "ddp", "rpc", "elastic", "comm"}


def test_plot_without_matplotlib_fails_before_measuring(monkeypatch, tmp_path, capsys):
    """The whole benchmark once ran, then said 'no plot written' and exited 0."""
    monkeypatch.setattr(cli.plot, "available", lambda: False)
    monkeypatch.setattr(common, "measure", lambda *a: pytest.fail("measured before refusing --plot"))
    with pytest.raises(SystemExit) as e:
        cli.main(["cast", "--sizes", "32", "--plot", str(tmp_path / "b.png")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--plot: matplotlib is not installed" in err and 'pip install -e ".[plot]"' in err
    assert not (tmp_path / "b.png").exists()


def test_output_folder_must_exist(tmp_path, capsys):
    for opt in ("--plot", "--json"):
        with pytest.raises(SystemExit) as e:
            cli.main(["cast", "--sizes", "32", opt, str(tmp_path / "missing" / "out")])
        assert e.value.code == 2
        assert f"{opt}: the folder" in capsys.readouterr().err


def _result(family, series, dtype, size, thr, peer_thr, unit="GB/s"):
    return common.Result(family, series, f"[{size}]", dtype, size, 1.0, thr, unit, None, "numpy", thr / peer_thr,
                         peer_thr / thr, series)


def test_plot_panels_peers_units_bars_and_variants():
    """The plot was once seven panels in one 4200x480 strip, no peer, no title, one size drawn as a
    vertical line, attention variants merged in the legend."""
    pytest.importorskip("matplotlib")
    from tritensor.bench import plot

    results = [_result("elementwise", op, dt, n, 1.0 + n / 1e6, 10.0) for op in ("add", "gelu")
               for dt in ("float32", "float16") for n in (1 << 16, 1 << 20)]
    results += [_result("attention", s, "float16", 64, 1e-4, 1e-3, "TFLOP/s")
                for s in ("sdpa fwd D32", "sdpa fwd D32 causal", "sdpa fwd+bwd D32", "sdpa fwd+bwd D32 causal")]
    fig = plot.figure(results, {"elementwise": "elements", "attention": "L = S (sequence length)"},
                      "tritensor kernel benchmark -- mode: CPU, Triton interpreter -- device: CPU (x86_64)")
    assert "mode: CPU" in fig.get_suptitle() and "device: CPU (x86_64)" in fig.get_suptitle()
    width, height = fig.get_size_inches()
    assert len(fig.axes) == 2 and width / height < 3  # one readable panel each, not a strip
    elem, attn = fig.axes
    assert elem.get_title() == "elementwise" and elem.get_xlabel() == "elements"
    assert elem.get_ylabel() == "GB/s (log scale)"
    solid = [ln for ln in elem.get_lines() if ln.get_linestyle() == "-"]
    dashed = [ln for ln in elem.get_lines() if ln.get_linestyle() == "--"]
    assert len(solid) == len(dashed) == 4  # each series and, beside it, its peer
    assert [ln.get_color() for ln in solid] == [ln.get_color() for ln in dashed]
    labels = [t.get_text() for t in elem.get_legend().get_texts()]
    assert labels[:4] == ["add float32", "add float16", "gelu float32", "gelu float16"]
    assert "numpy (same run)" in labels
    # one size: bars (tritensor and peer per variant), no line; the x label names the size
    assert attn.get_lines() == [] and len(attn.patches) == 8
    assert attn.get_xlabel() == "L = S (sequence length) = 64"
    ticks = [t.get_text() for t in attn.get_xticklabels()]
    assert len(set(ticks)) == 4 and "sdpa fwd D32 causal float16" in ticks


def test_tiny_run_plots_and_says_what_a_time_and_a_peak_are(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    assert cli.main(["cast", "--sizes", "32,64", "--dtypes", "float32", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "time = the median of" in out and "warm-up" in out
    assert "% of peak: GB/s rows against the memory peak" in out and "runs ranged" in out


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
    report = json.loads(path.read_text())
    rows = report["results"]
    ops = {(r["op"].split(" (")[0], r["shape"].endswith("causal")) for r in rows}
    assert ops == {(op, c) for op in ("sdpa fwd", "sdpa fwd+bwd") for c in (False, True)}
    peer = not report["peer"].startswith("none")  # no torch to compare with on a device: no peer column
    for r in rows:
        assert r["unit"] == "TFLOP/s" and r["throughput"] > 0 and (r["peer_ms"] > 0 if peer else r["peer_ms"] is None)


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

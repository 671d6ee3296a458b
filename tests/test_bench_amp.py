"""``python -m tritensor.bench amp``: a tiny run prints its tables and JSON with the launch counts
the fused paths promise (one launch for all gradients; a fused scaler step without the unscale
pass), and bad options are rejected."""
import json

import pytest

import tritensor as tt
from tritensor.bench import __main__ as cli
from tritensor.bench import amp as bench_amp


def test_tiny_run(tmp_path, capsys):
    path = tmp_path / "amp.json"
    assert cli.main(["amp", "--grads", "4", "--repeat", "1", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "AMP benchmark" in out and "unscale + inf check, float16 gradients" in out
    if not tt.cuda.is_available():
        assert "GPU mode, or --train-step" in out  # CPU mode: no training step unless asked
    data = json.loads(path.read_text())
    assert data["grads"] == 4 and data["elements"] == sum(bench_amp.grad_sizes(4))
    for key in ("unscale_float32", "unscale_float16"):
        rows = data[key]
        assert rows["unscale_and_check_, fused"][2] == 1
        assert rows["check only (fused-step pre-check)"][2] == 1
        assert rows["unscale_and_check_, one launch/tensor"][2] == 4
    steps = data["scaler_step"]
    plain = steps["GradScaler.step, Adam (unscale_ + host read)"][2]
    fused = steps["GradScaler.step, Adam(fused=True)"][2]
    assert fused < plain  # no unscale pass and no inv-scale arithmetic on the fused path


def test_grad_sizes_and_bad_options(capsys):
    sizes = bench_amp.grad_sizes(200)
    assert len(sizes) == 200 and sum(s > 1024 for s in sizes) == 50 and sizes == bench_amp.grad_sizes(200)
    with pytest.raises(SystemExit):
        cli.main(["amp", "--grads", "2"])
    assert "--grads must be at least 4" in capsys.readouterr().err

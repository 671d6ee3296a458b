"""The RPC and DDP benchmarks' own arithmetic and a tiny end-to-end RPC run (no torch peer).

The timing rows are reported, never asserted (speed is shown by benchmarks, not tests); what is
checked is what the report derives: the model sizes, PowerSGD's byte formula (by hand), and that
`python -m tritensor.bench rpc` runs two workers and prints every row."""
import math

import pytest

import tritensor as tt
from tritensor.bench import ddp, rpc


def test_model_shapes_mix_and_size():
    for target in (500_000, 2_500_000, 25_000_000):
        shapes = ddp.model_shapes(target)
        total = sum(math.prod(s) for s in shapes)
        assert abs(total - target) <= shapes[0][1]  # the embedding rounds to whole rows
        assert {len(s) for s in shapes} == {1, 2, 4}


def test_powersgd_formula_by_hand():
    shapes = [(10,), (64, 256), (16, 1, 3, 3)]
    # rank 4: bias 10 sent whole; 64x256 -> (64 + 256) * 4 = 1280 (2 * 1280 < 16384: compressed);
    # conv 16x9 -> rank min(16, 9, 4) = 4, (16 + 9) * 4 = 100, 2 * 100 >= 144: sent whole (144)
    assert ddp.powersgd_formula_bytes(shapes, 4) == 4 * (10 + 1280 + 144)
    # rank 1: the conv compresses too: (16 + 9) * 1 = 25, 50 < 144
    assert ddp.powersgd_formula_bytes(shapes, 1) == 4 * (10 + 320 + 25)


def test_bench_rpc_runs_without_peer(capsys):
    assert rpc.main(["--no-peer", "--rounds", "1", "--iters", "5", "--big-iters", "2", "--seconds", "0.2"]) == 0
    out = capsys.readouterr().out
    for _, name, _ in rpc.ROWS:
        assert name in out
    assert "| - |" in out  # no peer column values


def test_bench_ddp_device_cuda_needs_a_gpu(capsys):
    if tt.cuda.is_available():
        pytest.skip("a GPU is here: --device cuda is valid")
    with pytest.raises(SystemExit):
        ddp.main(["--device", "cuda", "--quick"])
    assert "--device cuda: no GPU here" in capsys.readouterr().err

"""CUDA graphs (runtime/graphs.py, autograd/graphed.py) with PyTorch's API.

In CPU mode there is no graph to capture: every entry point says so clearly, after checking its
arguments. What a capture refuses (host syncs, host tensors staged into kernels, first-seen
address tables, autotuning a new shape) is checked here through the guards themselves, with a
stream marked as capturing; the captures and replays run in the GPU-only tests at the end.
"""
from __future__ import annotations

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.runtime import direct, memory, mode

cpu_only = pytest.mark.skipif(mode.GPU, reason="CPU mode's answers")
gpu_only = pytest.mark.skipif(not mode.GPU, reason="captures and replays need a GPU")


@cpu_only
@pytest.mark.parametrize("make", [
    lambda: tt.cuda.CUDAGraph(),
    lambda: tt.cuda.graph_pool_handle(),
    lambda: tt.cuda.make_graphed_callables(nn.Linear(2, 2), (tt.ones(1, 2),)),
], ids=["CUDAGraph", "graph_pool_handle", "make_graphed_callables"])
def test_cpu_mode_says_graphs_need_a_gpu(make):
    with pytest.raises(RuntimeError, match="CUDA graphs need a GPU"):
        make()
    assert tt.cuda.is_current_stream_capturing() is False


def test_bad_arguments_are_named_before_anything_else():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"sample_args\[0\] must be a tuple of Tensors"):
        tt.cuda.make_graphed_callables(lin, [tt.ones(1, 2)])
    with pytest.raises(TypeError, match=r"callables\[1\] is not callable"):
        tt.cuda.make_graphed_callables((lin, 3), ((tt.ones(1, 2),), (tt.ones(1),)))
    with pytest.raises(ValueError, match="num_warmup_iters"):
        tt.cuda.make_graphed_callables(lin, (tt.ones(1, 2),), num_warmup_iters=-1)
    frozen = nn.Linear(2, 2)
    frozen.bias.requires_grad_(False)
    with pytest.raises(RuntimeError, match="must require grad"):
        tt.cuda.make_graphed_callables(frozen, (tt.ones(1, 2),))
    if mode.GPU:
        with pytest.raises(ValueError, match="capture_error_mode"):
            tt.cuda.CUDAGraph().capture_begin(capture_error_mode="strict")


class _Stream:
    def __repr__(self):
        return "<stream 7>"


@pytest.fixture
def capturing(monkeypatch):
    """A stream marked as capturing a graph (the graphs module's own bookkeeping)."""
    s = _Stream()
    monkeypatch.setitem(memory.capturing, id(s), memory.Capture(s, 1))
    return s


def test_host_copies_on_a_capturing_stream_are_refused_naming_them(capturing):
    with pytest.raises(memory.CaptureError, match=r"device-to-host copy \(\.item\(\), \.cpu\(\).*<stream 7>"):
        memory.device_to_host(np.zeros(4, np.uint8), 0, capturing)
    with pytest.raises(memory.CaptureError, match="host-to-device copy"):
        memory.host_to_device(0, np.zeros(4, np.uint8), capturing)
    memory.refuse_while_capturing(_Stream(), "anything", "not capturing")  # another stream: fine
    assert issubclass(tt.cuda.CaptureError, RuntimeError)


class _Autotuner:
    """What Triton 3.9's Autotuner keeps: its configurations, key names and cache."""

    def __init__(self):
        self.configs, self.keys, self.arg_names = [1, 2], ["M", "N"], ["x", "M", "N"]
        self.cache = {}


def test_autotuning_a_new_shape_is_detected_as_triton_keys_it():
    k = _Autotuner()
    x = tt.ones(4, dtype=tt.float16)
    assert direct.needs_autotuning(k, (x, 64, 32), {})
    k.cache[(64, 32, "tritensor.float16")] = "config"
    assert not direct.needs_autotuning(k, (x, 64, 32), {})
    assert direct.needs_autotuning(k, (x, 64, 48), {})
    k.configs = [1]  # one configuration: nothing to time
    assert not direct.needs_autotuning(k, (x, 64, 48), {})
    assert not direct.needs_autotuning(object(), (x,), {})


# ----- on a GPU ------------------------------------------------------------------------------------------
@gpu_only
def test_capture_and_replay_reuse_static_memory():
    x = tt.zeros(1024, device="cuda")
    g = tt.cuda.CUDAGraph()
    s = tt.cuda.Stream()
    with tt.cuda.stream(s):
        for _ in range(3):  # warm up: compile and confirm the launches
            y = (x * 2 + 1).relu()
            (x * 2).sum()  # the refused .item() below: its kernels warmed up too, or their first launch is refused
    tt.cuda.synchronize()
    with tt.cuda.graph(g):
        y = (x * 2 + 1).relu()
    for v in (1.0, -3.0, 5.0):
        x.fill_(v)
        g.replay()
        tt.cuda.synchronize()
        np.testing.assert_array_equal(y.cpu().numpy(), np.full(1024, max(2 * v + 1, 0), np.float32))
    with tt.cuda.graph(tt.cuda.CUDAGraph()):
        with pytest.raises(tt.cuda.CaptureError, match="device-to-host"):
            (x * 2).sum().item()


@gpu_only
def test_the_default_stream_is_refused():
    with pytest.raises(RuntimeError, match="default stream"):
        tt.cuda.CUDAGraph().capture_begin()


@gpu_only
def test_graphed_module_matches_eager():
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).cuda()
    x = tt.randn(8, 16, device="cuda", requires_grad=True)
    eager_out = model(x)
    eager_out.sum().backward()
    eager = [p.grad.cpu().numpy().copy() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    graphed = tt.cuda.make_graphed_callables(model, (x,))
    for p in model.parameters():
        p.grad = None
    out = graphed(x)
    out.sum().backward()
    np.testing.assert_array_equal(out.detach().cpu().numpy(), eager_out.detach().cpu().numpy())
    for p, e in zip(model.parameters(), eager):
        np.testing.assert_array_equal(p.grad.cpu().numpy(), e)


@cpu_only
def test_the_graphed_step_example_says_it_needs_a_gpu(capsys):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "graphed_step.py"
    spec = importlib.util.spec_from_file_location("graphed_step", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main([]) == 2
    assert "CUDA graphs need a GPU" in capsys.readouterr().err


@gpu_only
def test_the_graphed_step_example_matches_eager_to_the_bit():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "graphed_step.py"
    spec = importlib.util.spec_from_file_location("graphed_step", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    # Small sizes: the simulated device runs every kernel in the interpreter. main() returns 0 only
    # when every compiled step's loss equals eager's to the bit and no step fell back to eager.
    assert example.main(["--layers", "1", "--d-model", "32", "--heads", "2", "--seq", "16", "--batch", "2",
                         "--steps", "3"]) == 0

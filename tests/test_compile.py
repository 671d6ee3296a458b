"""``tritensor.compile`` (compiler.py): a step warmed up, captured into a CUDA graph and replayed.

Every capture test trains two copies of one model (same seed) on the same batches, one eager and
one compiled, and checks they agree BIT FOR BIT over several steps: the warm-up call, the call
that captures (and replays once) and the replays. On the simulated device a replayed step is
counted: one graph launch plus one copy launch per tensor argument, nothing else. In CPU mode
(and for the argument checks) nothing is captured.
"""
from __future__ import annotations

import importlib.util
import pathlib
import warnings

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from tritensor import nn
from tritensor.runtime import mode

gpu_only = pytest.mark.skipif(not mode.GPU, reason="captures and replays need a GPU (or TRITENSOR_DEVICE=sim)")
cpu_only = pytest.mark.skipif(mode.GPU, reason="CPU mode's answer")


def _host(t):
    return t.detach().cpu().numpy()


def _bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _compile_warnings(record):
    return [str(w.message) for w in record if "tritensor.compile" in str(w.message)]


# ----- arguments -------------------------------------------------------------------------------------------
def test_bad_arguments_are_named():
    f = lambda x: x  # noqa: E731
    with pytest.raises(ValueError, match="argument 'mode'"):
        tt.compile(f, mode="fast")
    with pytest.raises(ValueError, match="argument 'backend'"):
        tt.compile(f, backend="tvm")
    with pytest.raises(ValueError, match="argument 'backend' as a callable"):
        tt.compile(f, backend=lambda gm, inputs: gm)
    with pytest.raises(RuntimeError, match="mode or options"):
        tt.compile(f, mode="reduce-overhead", options={"triton.cudagraphs": True})
    with pytest.raises(ValueError, match="cache_size_limit"):
        tt.compile(f, cache_size_limit=-1)
    with pytest.raises(TypeError, match="argument 'dynamic'"):
        tt.compile(f, dynamic="yes")
    with pytest.raises(TypeError, match="argument 'fullgraph'"):
        tt.compile(f, fullgraph=1)
    with pytest.raises(TypeError, match="argument 'model' must be callable"):
        tt.compile(3)


def test_decorator_and_call_forms():
    def double(x):
        return x * 2

    @tt.compile
    def a(x):
        return x * 2

    @tt.compile(mode="reduce-overhead", dynamic=False)
    def b(x):
        return x * 2

    c = tt.compile(double)
    assert c.__wrapped__ is double and c.__name__ == "double"
    assert tt.compile(double, disable=True) is double
    x = tt.arange(4.0)
    eager = tt.compile(double, mode="default")  # runs eagerly: tritensor fuses nothing, graphs are what it adds
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_host(eager(x)), [0, 2, 4, 6])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CPU mode says it runs eagerly (the next test)
        for f in (a, b, c):
            np.testing.assert_array_equal(_host(f(x)), [0, 2, 4, 6])


@cpu_only
def test_cpu_mode_runs_eagerly_and_says_so_once():
    f = tt.compile(lambda x: x + 1, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        outs = [_host(f(tt.full((3,), float(i)))) for i in range(3)]
    said = _compile_warnings(rec)
    assert len(said) == 1 and "CPU mode" in said[0] and "eagerly" in said[0]
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, [i + 1.0] * 3)


# ----- captures: training steps, eager against compiled, to the bit ---------------------------------------
def _mlp(seed):
    tt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).cuda()
    return model, tt.optim.Adam(model.parameters(), lr=1e-2, capturable=True)


def _mlp_step(model, opt):
    def step(x, y):
        opt.zero_grad()  # set_to_none=True: backward makes the gradients during the capture, in the graph's pool
        loss = F.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss
    return step


def _batches(n, rows=8, seed=0):
    rng = np.random.default_rng(seed)
    return [(tt.tensor(rng.standard_normal((rows, 16)).astype(np.float32), device="cuda"),
             tt.tensor(rng.standard_normal((rows, 4)).astype(np.float32), device="cuda")) for _ in range(n)]


def _counting():
    from tritensor.runtime import sim  # only the simulated device counts driver calls
    return sim.counting()


@gpu_only
def test_mlp_training_step_replays_bit_for_bit_as_one_graph_launch():
    eager_model, eager_opt = _mlp(0)
    graphed_model, graphed_opt = _mlp(0)
    eager = _mlp_step(eager_model, eager_opt)
    compiled = tt.compile(_mlp_step(graphed_model, graphed_opt), mode="reduce-overhead")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        for i, (x, y) in enumerate(_batches(6)):
            want = _host(eager(x, y))
            if mode.SIM and i >= 2:  # calls 0 and 1 warm up and capture; from then on a replay
                with _counting() as c:
                    got = compiled(x, y)
                assert dict(c) == {"graph_launch": 1, "launch": 2}  # the replay, and the copies of x and y
            else:
                got = compiled(x, y)
            assert _bits_equal(_host(got), want), f"step {i}"
    for p, q in zip(eager_model.parameters(), graphed_model.parameters()):
        assert _bits_equal(_host(p), _host(q))
        assert _bits_equal(_host(p.grad), _host(q.grad))  # the graph's gradients, written by the last replay


@gpu_only
def test_gradients_flow_out_of_a_compiled_forward_to_its_parameters_and_arguments():
    # The backward runs outside: the forward is one graph, its backward another, replayed by an
    # autograd node (GraphedBackward); the parameters' and the argument's gradients are eager's.
    eager_model, _ = _mlp(2)
    graphed_model, _ = _mlp(2)
    compiled = tt.compile(lambda x: graphed_model(x), mode="reduce-overhead")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        for i, (x, y) in enumerate(_batches(6, seed=2)):
            # x requiring grad or not, in turn: calls 0 and 1 warm up, 2 and 3 capture, 4 and 5 replay
            xs = [x.clone().requires_grad_(i % 2 == 1) for _ in range(2)]
            outs = []
            for model, f, xi in ((eager_model, eager_model, xs[0]), (graphed_model, compiled, xs[1])):
                model.zero_grad()
                if f is compiled and mode.SIM and i >= 4:  # a replay: one graph launch, no wait
                    with _counting() as c:
                        out = f(xi)
                    assert c["graph_launch"] == 1 and "dtoh" not in c and "sync" not in c, dict(c)
                else:
                    out = f(xi)
                F.mse_loss(out, y).backward()
                outs.append(out)
            assert type(outs[1].grad_fn).__name__ == ("GraphedBackward" if i >= 2 else type(outs[0].grad_fn).__name__)
            assert _bits_equal(_host(outs[1]), _host(outs[0])), f"step {i}"
            for p, q in zip(eager_model.parameters(), graphed_model.parameters()):
                assert _bits_equal(_host(q.grad), _host(p.grad)), f"step {i}"
            if i % 2:
                assert _bits_equal(_host(xs[1].grad), _host(xs[0].grad)), f"step {i}"
    assert len(compiled._graphs) == 2  # x requiring grad or not: a graph of each
    with tt.no_grad():  # grad mode off: a graph of its own, outputs off the autograd graph
        for _ in range(3):
            out = compiled(_batches(1, seed=3)[0][0])
        assert out.grad_fn is None and not out.requires_grad
    assert len(compiled._graphs) == 3


@gpu_only
def test_an_address_table_first_seen_in_a_capture_is_copied_by_the_graph(monkeypatch):
    # Tensors made during the capture (as gradients after zero_grad(set_to_none=True)) have new
    # addresses: their table is copied in by a node of the graph from pinned bytes it keeps.
    from tritensor.runtime import launch, memory
    from tritensor.triton_kernels import foreach

    coef = tt.full((1,), 3.0, device="cuda")
    s = tt.cuda.Stream()
    s.wait_stream(tt.cuda.current_stream())
    with tt.cuda.stream(s):
        for _ in range(3):  # the kernels' checked launches, and a table seen eagerly (pinned bytes set aside)
            foreach.scale_([tt.ones(5, device="cuda"), tt.ones(700, device="cuda")], coef, "float32")
    g = tt.cuda.CUDAGraph()
    with tt.cuda.graph(g, stream=s):
        ts = [tt.ones(5, device="cuda"), tt.ones(700, device="cuda")]
        foreach.scale_(ts, coef, "float32")
    for _ in range(2):  # each replay fills them with ones and scales them through the graph's table
        for t in ts:
            t.fill_(-1.0)
        g.replay()
        for t in ts:
            np.testing.assert_array_equal(_host(t), np.full(t.numel(), 3.0, np.float32))
    g.reset()
    # Without pinned bytes set aside before the capture, the copy is refused, naming the table.
    monkeypatch.setattr(memory, "_captured_pinned", [None, 0, 0])
    with pytest.raises(tt.cuda.CaptureError, match="address table of a multi-tensor kernel"):
        with tt.cuda.graph(tt.cuda.CUDAGraph(), stream=s):
            foreach.scale_([tt.ones(5, device="cuda"), tt.ones(700, device="cuda")], coef, "float32")
    assert launch._device_tables  # the eager tables are cached; the graphs' never were


@gpu_only
def test_amp_step_with_grad_scaler_replays_bit_for_bit():
    def make():
        model, _ = _mlp(1)
        opt = tt.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
        return model, opt, tt.amp.GradScaler("cuda", init_scale=2.0 ** 12, growth_interval=2)

    def step_of(model, opt, scaler):
        def step(x, y):
            with tt.autocast("cuda", dtype=tt.float16):
                loss = F.mse_loss(model(x).float(), y)
            opt.zero_grad(set_to_none=False)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            return loss
        return step

    e, g = make(), make()
    eager, compiled = step_of(*e), tt.compile(step_of(*g), mode="reduce-overhead")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i, (x, y) in enumerate(_batches(6, seed=1)):
            want = _host(eager(x, y))
            assert _bits_equal(_host(compiled(x, y)), want), f"step {i}"
    assert e[2].get_scale() == g[2].get_scale()  # the scale grew on the device alike (growth_interval=2)
    for p, q in zip(e[0].parameters(), g[0].parameters()):
        assert _bits_equal(_host(p), _host(q))


def _example():
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "graphed_step.py"
    spec = importlib.util.spec_from_file_location("graphed_step", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


@gpu_only
def test_transformer_step_of_the_example_replays_bit_for_bit():
    import argparse
    example = _example()
    args = argparse.Namespace(layers=1, d_model=32, heads=2, seq=16)
    rng = np.random.default_rng(0)
    data = [tt.tensor(rng.integers(0, example.VOCAB, (2, 17)), device="cuda") for _ in range(4)]
    eager, graphed = example.make(args, 0), example.make(args, 0)
    compiled = tt.compile(lambda x, y: example.step(graphed, x, y), mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for i, b in enumerate(data):
            x, y = b[:, :-1], b[:, 1:]
            want = _host(example.step(eager, x, y).float())
            if mode.SIM and i >= 2:  # a replay: copies of the batch in and one graph launch, no wait
                with _counting() as c:
                    out = compiled(x, y)
                assert c["graph_launch"] == 1 and "dtoh" not in c and "sync" not in c, dict(c)
            else:
                out = compiled(x, y)
            assert _bits_equal(_host(out.float()), want), f"step {i}"
    # Captured and replayed, never run eagerly: cross_entropy checks and counts its class targets on
    # the device (core/ops/loss.py), so nothing in the step copies device memory to the host.
    assert not _compile_warnings(rec)
    assert len(compiled._graphs) == 1


# ----- signatures, the bound, fallbacks ---------------------------------------------------------------------
@gpu_only
def test_a_new_shape_is_captured_again_and_old_graphs_keep_replaying():
    f = tt.compile(lambda x: (x * 2 + 1).relu(), mode="reduce-overhead")
    a, b = tt.full((4,), 1.0, device="cuda"), tt.full((2, 3), -1.0, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x in (a, a, b, b):  # a warm-up and a capture each
            want = _host((x * 2 + 1).relu())
            assert _bits_equal(_host(f(x)), want)
        assert len(f._graphs) == 2
        for v in (3.0, -5.0):
            x = tt.full((4,), v, device="cuda")
            if mode.SIM:
                with _counting() as c:
                    out = f(x)
                assert dict(c) == {"graph_launch": 1, "launch": 1}
            else:
                out = f(x)
            np.testing.assert_array_equal(_host(out), np.full(4, max(2 * v + 1, 0), np.float32))


@gpu_only
def test_outputs_are_static_and_overwritten_by_the_next_call():
    f = tt.compile(lambda x: x + 1, mode="reduce-overhead")
    for v in (0.0, 0.0):
        f(tt.full((3,), v, device="cuda"))  # warm-up, capture
    first = f(tt.full((3,), 1.0, device="cuda"))
    kept = first.clone()
    second = f(tt.full((3,), 5.0, device="cuda"))
    assert second.data_ptr() == first.data_ptr()
    np.testing.assert_array_equal(_host(first), [6.0] * 3)  # overwritten, as torch's CUDA graphs are
    np.testing.assert_array_equal(_host(kept), [2.0] * 3)


@gpu_only
def test_more_signatures_than_the_bound_run_eagerly_with_one_warning():
    f = tt.compile(lambda x: x * 3, mode="reduce-overhead", cache_size_limit=2)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for n in (1, 1, 2, 2, 3, 3, 4, 1):
            x = tt.full((n,), float(n), device="cuda")
            np.testing.assert_array_equal(_host(f(x)), np.full(n, 3.0 * n, np.float32))
    said = _compile_warnings(rec)
    assert len(said) == 1 and "cache_size_limit=2" in said[0]
    assert len(f._graphs) == 2


@gpu_only
def test_item_leaves_the_function_eager_with_one_warning_naming_it():
    eager_model, eager_opt = _mlp(2)
    graphed_model, graphed_opt = _mlp(2)

    def logged(step):
        def run(x, y):
            return step(x, y).item()  # a host sync: cannot be captured
        return run

    eager = logged(_mlp_step(eager_model, eager_opt))
    compiled = tt.compile(logged(_mlp_step(graphed_model, graphed_opt)), mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for x, y in _batches(4, seed=2):
            assert eager(x, y) == compiled(x, y)
    said = _compile_warnings(rec)
    assert len(said) == 1, said
    assert ".item()" in said[0] and "test_compile.py" in said[0] and "step(x, y).item()" in said[0]
    assert compiled._eager and not compiled._graphs
    for p, q in zip(eager_model.parameters(), graphed_model.parameters()):
        assert _bits_equal(_host(p), _host(q))


@gpu_only
def test_a_capture_refused_midway_runs_that_call_eagerly():
    def f(x):
        y = x * 2
        tt.cuda.synchronize()  # not seen by the warm-up's watch: the capture itself refuses it
        return y + 1

    g = tt.compile(f, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for v in (1.0, 2.0, 3.0):
            np.testing.assert_array_equal(_host(g(tt.full((2,), v, device="cuda"))), [2 * v + 1] * 2)
    said = _compile_warnings(rec)
    assert len(said) == 1 and "synchronize" in said[0] and "capture was refused" in said[0]
    with pytest.raises(tt.cuda.CaptureError, match="synchronize"):
        h = tt.compile(f, mode="reduce-overhead", fullgraph=True)
        for _ in range(2):
            h(tt.full((2,), 1.0, device="cuda"))


@gpu_only
def test_random_ops_are_not_replayed_with_the_same_numbers():
    def f(x):
        return x + tt.rand(x.shape, device="cuda")

    g = tt.compile(f, mode="reduce-overhead")
    x = tt.zeros(4, device="cuda")
    tt.manual_seed(5)
    want = [_host(f(x)) for _ in range(3)]
    tt.manual_seed(5)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = [_host(g(x)) for _ in range(3)]
    assert all(_bits_equal(a, b) for a, b in zip(got, want))
    said = _compile_warnings(rec)
    assert len(said) == 1 and "random" in said[0]


@gpu_only
def test_inputs_on_the_cpu_run_eagerly():
    f = tt.compile(lambda x: x * 2, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(_host(f(tt.ones(2, device="cpu"))), [2.0, 2.0])
    said = _compile_warnings(rec)
    assert len(said) == 1 and "cpu" in said[0]

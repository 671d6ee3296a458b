"""Autograd engine overhead per node, beside the kernel time of the op it records.

Two chains of N ops on a 1-element tensor:
- ``Identity``: a custom Function whose forward/backward run no kernel (returns an alias /
  the incoming gradient), so its cost *is* the engine: recording a node in forward
  (``Function.apply``: edges, node, output wiring) and running it in backward (dependency
  counting, buffers, the call);
- ``x * 1.0``: a real elementwise op, one Triton kernel forward and one backward per node.

Run the table: ``python benchmarks/test_bench_autograd.py [N]``; pytest-benchmark:
``python -m pytest benchmarks/test_bench_autograd.py -p no:xdist`` (benchmarks/ is outside
testpaths, so the test suite never collects it).
"""
from __future__ import annotations

import sys
import time

import tritensor as tt
from tritensor.autograd import Function


class Identity(Function):
    @staticmethod
    def forward(ctx, x):
        return x.detach()

    @staticmethod
    def backward(ctx, g):
        return g


def _chain(op, n, requires_grad=True):
    x = tt.ones(1, requires_grad=requires_grad)
    y = x
    for _ in range(n):
        y = op(y)
    return x, y


def measure(n: int) -> list[tuple[str, float]]:
    """Microseconds per node for each phase."""
    rows = []
    for name, op in (("engine only (Identity)", Identity.apply), ("x * 1.0 (1 kernel per node)", lambda t: t * 1.0)):
        _chain(op, 10)[1].sum().backward()  # warm up (kernel compile / interpreter set-up)
        t0 = time.perf_counter()
        _chain(op, n, requires_grad=False)
        t_plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        x, y = _chain(op, n)
        t_fwd = time.perf_counter() - t0
        t0 = time.perf_counter()
        y.backward(tt.ones(1))
        t_bwd = time.perf_counter() - t0
        rows.append((name, 1e6 * t_plain / n, 1e6 * t_fwd / n, 1e6 * (t_fwd - t_plain) / n, 1e6 * t_bwd / n))
    return rows


def main(argv=None) -> None:
    n = int((argv or sys.argv[1:] or [2000])[0])
    mode = "GPU" if tt.cuda.is_available() else "CPU (Triton interpreter)"
    print(f"autograd overhead per node, chain of {n} ops, {mode}")
    print(f"{'chain':<30}{'fwd no-grad':>14}{'fwd recorded':>14}{'recording':>12}{'backward':>12}   (us/node)")
    for name, plain, fwd, rec, bwd in measure(n):
        print(f"{name:<30}{plain:>14.1f}{fwd:>14.1f}{rec:>12.1f}{bwd:>12.1f}")


def test_bench_engine_forward_recording(benchmark):
    benchmark(lambda: _chain(Identity.apply, 1000))


def test_bench_engine_backward(benchmark):
    def setup():
        return (_chain(Identity.apply, 1000)[1],), {}

    benchmark.pedantic(lambda y: y.backward(tt.ones(1)), setup=setup, rounds=10)


if __name__ == "__main__":
    main()

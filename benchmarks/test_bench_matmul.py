"""pytest-benchmark suite: the matmul cases of `python -m tritensor.bench`, tritensor beside its peer.

Run: `python -m pytest benchmarks/test_bench_matmul.py -p no:xdist` (benchmarks/ is outside testpaths,
so the test suite never collects it).
"""
import pytest

from tritensor.bench import matmul as family
from tritensor.bench.common import case_id, pytest_context, run_benchmark

CTX = pytest_context()
CASES = family.cases(CTX)


@pytest.mark.parametrize("impl", ["tritensor", "peer"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_bench_matmul(benchmark, case, impl):
    run_benchmark(benchmark, case, impl, CTX)

"""The dtype policy: which dtype arithmetic runs in and which dtype a sum accumulates in, in one place.

Every kernel family loads its operands in their own dtype and computes in a wider one; every
reduction, scatter and collective accumulates in a dtype chosen from its input's. Those choices
used to be written out again in each family (six host-side copies, and as many inside kernels
reading their pointer's element type), so a change to one could silently miss the others. They
live here, beneath the kernels (the launchers pass the answer to their kernels as a constexpr),
the core entries and the communication backends, and ``tests/test_layering.py`` fails when a copy
of a rule appears anywhere else.

Each rule is a function, and a table over every dtype for the hot paths (a dict lookup costs no
Python call; ``tests/test_host_cost.py`` counts them).
"""
from __future__ import annotations

from . import dtype as dt

__all__ = ["float_compute", "compute", "widened", "atomic_accumulator", "reduce_accumulator", "exact",
           "FLOAT_COMPUTE", "FLOAT_COMPUTE_NAME", "COMPUTE"]


def float_compute(d: dt.dtype) -> dt.dtype:
    """The floating dtype a float kernel computes and accumulates in: fp64 for fp64, fp32 for the
    rest (fp16/bf16 are loaded, widened to fp32 and cast back on store)."""
    return dt.float64 if d is dt.float64 else dt.float32


def compute(d: dt.dtype) -> dt.dtype:
    """The dtype elementwise arithmetic happens in: :func:`float_compute` for floating dtypes;
    int64 for int64 and uint64 (the same bits: mul, &, |, ^ wrap alike) and int32 for bool and the
    narrower integers (wrapped on store)."""
    if d.is_floating_point:
        return float_compute(d)
    if d is dt.uint64:
        return dt.int64
    return dt.int64 if d is dt.int64 else dt.int32


def widened(d: dt.dtype) -> dt.dtype:
    """fp16/bf16 widened to fp32; every other dtype as it is (a collective's running sum)."""
    return dt.float32 if d in (dt.float16, dt.bfloat16) else d


def atomic_accumulator(d: dt.dtype) -> dt.dtype:
    """What an atomic (scatter/index) accumulation of ``d`` runs in: :func:`widened`, except that
    bool and uint8/int8/int16, which atomics do not take, accumulate in int32 and wrap on the copy
    back, as torch's do."""
    return dt.int32 if d is dt.bool_ or d in dt.SMALL_INTEGRAL else widened(d)


def reduce_accumulator(op: str, d: dt.dtype) -> dt.dtype:
    """What a reduction ``op`` of ``d`` accumulates in: :func:`float_compute` for floating dtypes,
    int64 for integer/bool sums and products, int32/int64 for integer extremes; uint64 for the xor of
    hash_tensor, whatever it reads."""
    if op == "xor":
        return dt.uint64
    if d.is_floating_point:
        return float_compute(d)
    if op in ("sum", "prod") or d is dt.int64:
        return dt.int64
    return dt.int32


def exact(d: dt.dtype) -> dt.dtype:
    """A dtype that holds every value of ``d`` exactly (fp64 for floats, int64 for integers and
    bool, uint64 for uint64, whose upper half int64 would order below zero): keys a comparison sort
    orders by."""
    if d is dt.uint64:
        return dt.uint64
    return dt.float64 if d.is_floating_point else dt.int64


FLOAT_COMPUTE = {d: float_compute(d) for d in dt.ALL}
# by name, both sides: launchers that hold a dtype's name ask for the ``triton.language`` dtype of that name
FLOAT_COMPUTE_NAME = {d.name: float_compute(d).name for d in dt.ALL}
COMPUTE = {d: compute(d) for d in dt.ALL}

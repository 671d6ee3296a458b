"""``tritensor.testing`` (torch.testing): ``assert_close`` and ``make_tensor`` for users' own tests.

Code ported from PyTorch keeps its tests, and those call ``torch.testing.assert_close``: this is
the same function, with torch's default tolerances per dtype, its keywords and its messages
("Tensor-likes are not close!", mismatched elements, the greatest differences and where), and its
rules for numbers, ``None``, sequences and mappings (compared item by item, the failing item
named). Values are compared on the host with NumPy; differences are computed in the inputs' dtype
(after promotion to a common one), so the numbers reported are the ones torch reports.

tritensor's own suite compares through ``tests/tolerances.py`` (its profiles say why each
tolerance is what it is); this module is for users.
"""
from __future__ import annotations

import collections.abc
import math
import numbers

import numpy as np

from .core.creation import randint
from .core.factories import rand
from .core.tensor import Tensor
from .runtime import dtype as dt

__all__ = ["assert_close", "make_tensor"]

# torch.testing's defaults: (rtol, atol) per dtype; integers and bool compare exactly.
_DTYPE_PRECISIONS = {
    dt.float16: (0.001, 1e-5),
    dt.bfloat16: (0.016, 1e-5),
    dt.float32: (1.3e-6, 1e-5),
    dt.float64: (1e-7, 1e-7),
}
_NP_PRECISIONS = {np.dtype(np.float16): (0.001, 1e-5), np.dtype(np.float32): (1.3e-6, 1e-5),
                  np.dtype(np.float64): (1e-7, 1e-7)}


class _Mismatch(Exception):
    """A failed comparison: the exception type to raise, its message and the item it concerns."""

    def __init__(self, type_, msg, id_=()):
        super().__init__(msg)
        self.type, self.msg, self.id = type_, msg, id_

    def to_error(self, msg=None):
        if not isinstance(msg, str):
            generated = self.msg
            if self.id:
                generated += f"\n\nThe failure occurred for item {''.join(str([item]) for item in self.id)}"
            msg = msg(generated) if callable(msg) else generated
        return self.type(msg)


def _tolerances(precisions, rtol, atol, id_):
    if (rtol is None) ^ (atol is None):
        raise _Mismatch(ValueError, f"Both 'rtol' and 'atol' must be either specified or omitted, "
                                    f"but got no {'rtol' if rtol is None else 'atol'}.", id_)
    if rtol is not None:
        return rtol, atol
    rtols, atols = zip(*precisions)
    return max(rtols), max(atols)


def _make_mismatch_msg(*, default_identifier, extra, abs_diff, abs_diff_idx=None, atol, rel_diff,
                       rel_diff_idx=None, rtol):
    equality = rtol == 0 and atol == 0

    def diff_msg(kind, diff, idx, tol):
        msg = f"{kind.title()} difference: {diff}" if idx is None else f"Greatest {kind} difference: {diff} at index {idx}"
        if not equality:
            msg += f" (up to {tol} allowed)"
        return msg + "\n"

    msg = f"{default_identifier} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        msg += f"{extra.strip()}\n"
    msg += diff_msg("absolute", abs_diff, abs_diff_idx, atol)
    msg += diff_msg("relative", rel_diff, rel_diff_idx, rtol)
    return msg.strip()


def _scalar_mismatch_msg(actual, expected, rtol, atol):
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _make_mismatch_msg(default_identifier="Scalars", extra=f"Expected {expected} but got {actual}.",
                              abs_diff=abs_diff, atol=atol, rel_diff=rel_diff, rtol=rtol)


def _isclose(a, b, rtol, atol, equal_nan):
    """torch.isclose on host arrays (decided in float64, so fp16/bf16 inputs are not re-rounded)."""
    if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer):
        if rtol == 0 and atol == 0:
            return a == b
        a, b = a.astype(np.float64), b.astype(np.float64)
    a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = a == b
        finite = np.isfinite(a) & np.isfinite(b)
        close |= finite & (np.abs(a - b) <= atol + rtol * np.abs(b))
    if equal_nan:
        close |= np.isnan(a) & np.isnan(b)
    return close


def _unravel(flat_index, shape):
    out = []
    for size in shape[::-1]:
        flat_index, mod = divmod(flat_index, size)
        out.append(mod)
    return tuple(out[::-1])


def _tensor_mismatch_msg(a, b, matches, rtol, atol):
    n = matches.size
    total = n - int(matches.sum())
    extra = f"Mismatched elements: {total} / {n} ({total / n:.1%})"
    a, b, m = a.reshape(-1), b.reshape(-1), matches.reshape(-1)
    floating = a.dtype.kind == "f" or a.dtype.name == "bfloat16"
    if not floating:  # torch upcasts integers (and bool) to int64, and divides into the default float dtype
        a, b = a.astype(np.int64), b.astype(np.int64)
    with np.errstate(all="ignore"):
        abs_diff = np.abs(a - b)
        abs_diff[m] = 0
        if floating:
            rel_diff = abs_diff / np.abs(b)
        else:
            rel_diff = abs_diff.astype(np.float32) / np.abs(b).astype(np.float32)
        rel_diff[m] = 0
    ia, ir = int(np.argmax(abs_diff)), int(np.argmax(rel_diff))
    return _make_mismatch_msg(default_identifier="Tensor-likes", extra=extra, abs_diff=abs_diff[ia].item(),
                              abs_diff_idx=_unravel(ia, matches.shape), atol=atol, rel_diff=float(rel_diff[ir]),
                              rel_diff_idx=_unravel(ir, matches.shape), rtol=rtol)


def _host(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy())


def _compare_tensors(actual, expected, id_, rtol, atol, equal_nan, check_device, check_dtype, check_stride):
    is_tt = isinstance(actual, Tensor)

    def mismatch(attr, a, e):
        raise _Mismatch(AssertionError, f"The values for attribute '{attr}' do not match: {a} != {e}.", id_)

    if actual.shape != expected.shape:
        mismatch("shape", actual.shape, expected.shape)
    if is_tt:
        if check_stride and actual.stride() != expected.stride():
            mismatch("stride()", actual.stride(), expected.stride())
        if check_device and actual.device != expected.device:
            mismatch("device", actual.device, expected.device)
        precisions = [_DTYPE_PRECISIONS.get(t.dtype, (0.0, 0.0)) for t in (actual, expected)]
        if check_dtype and actual.dtype is not expected.dtype:
            mismatch("dtype", actual.dtype, expected.dtype)
        common = dt.promote_types(actual.dtype, expected.dtype)
        a = _host(actual if actual.dtype is common else actual.to(common))
        b = _host(expected if expected.dtype is common else expected.to(common))
    else:
        if check_stride and actual.strides != expected.strides:
            mismatch("stride()", actual.strides, expected.strides)
        precisions = [_NP_PRECISIONS.get(x.dtype, (0.0, 0.0)) for x in (actual, expected)]
        if check_dtype and actual.dtype != expected.dtype:
            mismatch("dtype", actual.dtype, expected.dtype)
        common = np.promote_types(actual.dtype, expected.dtype)
        a, b = actual.astype(common), expected.astype(common)
    rtol, atol = _tolerances(precisions, rtol, atol, id_)
    matches = _isclose(a, b, rtol, atol, equal_nan)
    if matches.all():
        return
    if a.ndim == 0:
        msg = _scalar_mismatch_msg(a.item(), b.item(), rtol, atol)
    else:
        msg = _tensor_mismatch_msg(a, b, matches, rtol, atol)
    raise _Mismatch(AssertionError, msg, id_)


def _is_number(x) -> bool:
    return isinstance(x, (numbers.Number, np.number)) and not isinstance(x, (bool, np.bool_))


def _number_precision(x):
    if isinstance(x, (int, np.integer)):
        return (0.0, 0.0)
    return (1e-7, 1e-7)  # Python floats and complex numbers are double precision


def _compare_numbers(actual, expected, id_, rtol, atol, equal_nan, check_dtype):
    if check_dtype and type(actual) is not type(expected):
        raise _Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.", id_)
    rtol, atol = _tolerances([_number_precision(actual), _number_precision(expected)], rtol, atol, id_)
    if actual == expected:
        return
    if equal_nan and isinstance(actual, (float, np.floating)) and math.isnan(actual) and math.isnan(expected):
        return
    a_fin = not isinstance(actual, (float, np.floating, complex)) or np.isfinite(actual)
    e_fin = not isinstance(expected, (float, np.floating, complex)) or np.isfinite(expected)
    if a_fin and e_fin and abs(actual - expected) <= atol + rtol * abs(expected):
        return
    raise _Mismatch(AssertionError, _scalar_mismatch_msg(actual, expected, rtol, atol), id_)


def _is_sequence(x) -> bool:
    return isinstance(x, collections.abc.Sequence) and not isinstance(x, (str, bytes))


def _compare(actual, expected, id_, opts):
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Mismatch(AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                            id_)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, id_ + (i,), opts)
        return
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        actual_keys, expected_keys = set(actual.keys()), set(expected.keys())
        if actual_keys != expected_keys:
            missing = expected_keys - actual_keys
            additional = actual_keys - expected_keys
            raise _Mismatch(AssertionError, "The keys of the mappings do not match:\n"
                                            f"Missing keys in the actual mapping: {sorted(missing)}\n"
                                            f"Additional keys in the actual mapping: {sorted(additional)}", id_)
        keys = actual.keys()
        try:
            keys = sorted(keys)
        except Exception:
            pass
        for k in keys:
            _compare(actual[k], expected[k], id_ + (k,), opts)
        return
    if actual is None or expected is None:
        if actual is None and expected is None:
            return
        raise _Mismatch(AssertionError, f"None mismatch: {actual} is not {expected}", id_)
    if isinstance(actual, (bool, np.bool_)) and isinstance(expected, (bool, np.bool_)):
        if bool(actual) != bool(expected):
            raise _Mismatch(AssertionError, f"Booleans mismatch: {actual} is not {expected}", id_)
        return
    if _is_number(actual) and _is_number(expected):
        _compare_numbers(actual, expected, id_, opts["rtol"], opts["atol"], opts["equal_nan"],
                         opts["check_dtype"] and opts["numbers_check_dtype"])
        return
    if (isinstance(actual, Tensor) and isinstance(expected, Tensor)) or (
            isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray)):
        _compare_tensors(actual, expected, id_, opts["rtol"], opts["atol"], opts["equal_nan"], opts["check_device"],
                         opts["check_dtype"], opts["check_stride"])
        return
    raise _Mismatch(TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} "
                               f"and {type(expected)}.", id_)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Asserts that ``actual`` and ``expected`` are close, as ``torch.testing.assert_close``.

    Tensors (or NumPy arrays) must agree in shape and, unless switched off, device and dtype
    (``check_stride`` also compares strides); their values are close when
    ``|actual - expected| <= atol + rtol * |expected|`` elementwise, with torch's defaults per dtype
    when ``rtol``/``atol`` are omitted (both or neither): float16 1e-3/1e-5, bfloat16 1.6e-2/1e-5,
    float32 1.3e-6/1e-5, float64 1e-7/1e-7, exact otherwise. Numbers, ``None``, sequences and
    mappings are compared as torch does. ``msg`` replaces the message, or (a callable) edits it.
    ``check_layout`` is accepted: tritensor has strided tensors only.
    """
    opts = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype,
                check_stride=check_stride, numbers_check_dtype=True)
    try:
        _compare(actual, expected, (), opts)
    except _Mismatch as error:
        raise error.to_error(msg) from None


_TINY = {dt.float16: 2.0**-14, dt.bfloat16: 2.0**-126, dt.float32: 2.0**-126, dt.float64: 2.0**-1022}
_DEFAULT_RANGES = {"bool": (0, 2), "int": (-9, 10), "float": (-9, 9)}


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None) -> Tensor:
    """A tensor of ``shape`` drawn uniformly from ``[low, high)`` with the default generator
    (``tritensor.manual_seed`` makes it reproducible), as ``torch.testing.make_tensor``: defaults
    ``[-9, 9)`` for floating dtypes, ``[-9, 10)`` for integers, ``{False, True}`` for bool."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, but got "
                         f"noncontiguous={noncontiguous} and memory_format={memory_format}")
    if requires_grad and not dtype.is_floating_point:
        raise ValueError("`requires_grad=True` is not supported for boolean and integral dtypes")
    kind = "bool" if dtype is dt.bool_ else ("float" if dtype.is_floating_point else "int")
    lo, hi = _DEFAULT_RANGES[kind]
    low = lo if low is None else low
    high = hi if high is None else high
    if kind != "bool":
        if math.isnan(low) or math.isnan(high):
            raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
        if low > high or (low == high and kind == "int"):
            raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    n_shape = tuple(shape)
    if noncontiguous and math.prod(n_shape) > 1:  # twice as wide, every other column: strided
        n_shape = n_shape[:-1] + (2 * n_shape[-1],)
    if kind == "float":
        t = rand(*n_shape, dtype=dt.float64, device=device).mul(high - low).add(low)
        t = t.to(dtype)
    elif kind == "bool":
        t = randint(0, 2, n_shape, device=device).to(dt.bool_)
    else:
        t = randint(math.ceil(low), math.ceil(high), n_shape, dtype=dtype, device=device)
    if n_shape != tuple(shape):
        t = t[..., ::2]
    if exclude_zero and kind != "bool":
        t = t.masked_fill(t == 0, 1 if kind == "int" else _TINY[dtype])
    if memory_format is not None:
        t = t.contiguous(memory_format=memory_format)
    if requires_grad:
        t.requires_grad_(True)
    return t

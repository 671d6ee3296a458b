"""torch's float8 dtypes (``float8_e4m3fn e5m2 e4m3fnuz e5m2fnuz e8m0fnu``): casts checked bit for bit, every one
of the 256 codes of each format decoded and some 140 000 float32, float16, bfloat16, float64 and integer values
encoded, against ml_dtypes with torch's own rules where torch departs from it (e4m3fn saturates overflow and inf
to +-448, e5m2's NaN is 0x7F, e8m0fnu drops the sign and takes 0 to code 0: c10's ``fp8*_from_fp32_value``, and
checked against torch 2.13's cast over the same inputs when the kernels were written). Then what torch 2.13 does
with them: creation with its overflow check, views and copies on every layout, indexing, cat/stack/where,
finfo, promotion and arithmetic refused with torch's errors, printing, NumPy interop and save/load."""
import io
import math

import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make

FORMATS = [tt.float8_e4m3fn, tt.float8_e5m2, tt.float8_e4m3fnuz, tt.float8_e5m2fnuz, tt.float8_e8m0fnu]
IDS = [d.name for d in FORMATS]
rng = np.random.default_rng(8)

# The float32 bits torch's decoding gives each NaN code (c10's *_to_fp32_value): e4m3fn's 0x7F/0xFF
# carry their sign, e5m2's go through float16 and are quieted, the fnuz and e8m0 NaN is 0x7F800001.
def _nan_bits(d, code):
    sign = (int(code) >> 7) << 31
    if d is tt.float8_e4m3fn:
        return sign | 0x7FF00000
    if d is tt.float8_e5m2:
        return sign | 0x7FC00000 | ((int(code) & 3) << 21)
    return 0x7F800001


def _codes(d):
    return np.arange(256, dtype=np.uint8).view(d.np)


def decoded32(d) -> np.ndarray:
    """torch's float32 value of every code of ``d``: ml_dtypes' for the numbers, torch's bits for the NaNs."""
    ref = _codes(d).astype(np.float32)
    bits = ref.view(np.uint32).copy()
    for c in np.nonzero(np.isnan(ref))[0]:
        bits[c] = _nan_bits(d, c)
    return bits.view(np.float32)


def _bits32(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def expected_codes(x32: np.ndarray, d) -> np.ndarray:
    """torch's float8 codes of the float32 values ``x32``: ml_dtypes' cast, then torch's departures from it."""
    x32 = np.asarray(x32, dtype=np.float32)
    nan, neg = np.isnan(x32), np.signbit(x32)
    with np.errstate(all="ignore"):
        if d is tt.float8_e8m0fnu:  # no sign bit: torch rounds |x|; zero is code 0 (ml_dtypes: NaN)
            codes = np.abs(x32).astype(d.np).view(np.uint8).copy()
            codes[x32 == 0] = 0
            return codes
        codes = x32.astype(d.np).view(np.uint8).copy()
    sign = np.where(neg, 0x80, 0).astype(np.uint8)
    if d is tt.float8_e4m3fn:  # no inf: whatever rounds past 448 (inf too) saturates; ml_dtypes makes it NaN
        codes = np.where(~nan & (np.abs(x32) >= 464), 0x7E | sign, codes)
    if d in (tt.float8_e4m3fn, tt.float8_e5m2):  # NaN keeps its sign, with all mantissa bits set
        codes = np.where(nan, 0x7F | sign, codes)
    return codes.astype(np.uint8)


def _inputs32():
    """Every float16 and every bfloat16 value as float32 (ties, subnormals, the ranges' ends, overflow, inf,
    NaN and -0.0 of every format among them), random float32 bit patterns, and a few hand-picked edges."""
    every16 = np.arange(65536, dtype=np.uint16)
    edges = np.array([0.0, -0.0, 448.0, 464.0, 463.99, 480.0, -480.0, 240.0, 248.0, 57344.0, 61440.0, 65536.0,
                      2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 2.0 ** -127, 2.0 ** -149, 1.5, 3.0, 1.0625, 1.1875,
                      np.inf, -np.inf, np.nan, -np.nan, 3.4e38], dtype=np.float32)
    return np.concatenate([every16.view(np.float16).astype(np.float32),
                           (every16.astype(np.uint32) << 16).view(np.float32),
                           rng.integers(0, 2 ** 32, 8192, dtype=np.uint64).astype(np.uint32).view(np.float32),
                           edges])


X32 = _inputs32()


def _host(t):
    return t.cpu().numpy() if t.device.type != "cpu" else t.numpy()


def _raw(t):
    """A float8 tensor's codes as NumPy uint8."""
    return _host(t.contiguous()).view(np.uint8)


@pytest.mark.parametrize("d", FORMATS, ids=IDS)
def test_every_code_decodes_exactly(d):
    codes = tt.tensor(_codes(d))
    assert codes.dtype is d
    ref = decoded32(d)
    np.testing.assert_array_equal(_host(codes.float()).view(np.uint32), _bits32(ref))
    # the wider and narrower floats get the float32 value rounded as any float32 is (NaN stays NaN)
    for target, np_t in ((tt.float64, np.float64), (tt.float16, np.float16), (tt.bfloat16, ml_dtypes.bfloat16)):
        got = _host(codes.to(target)).astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):  # (e8m0's large values overflow float16; sNaN casts)
            exp = ref.astype(np_t).astype(np.float64)
        np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("d", FORMATS, ids=IDS)
def test_float32_encodes_as_torch(d):
    got = _raw(tt.tensor(X32).to(d))
    want = expected_codes(X32, d)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, (X32[bad[:5]], got[bad[:5]], want[bad[:5]])


@pytest.mark.parametrize("d", FORMATS, ids=IDS)
def test_half_bfloat16_double_and_integers_encode_through_float32(d):
    every16 = np.arange(65536, dtype=np.uint16)
    f16, bf16 = every16.view(np.float16), every16.view(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(_raw(tt.tensor(f16).to(d)), expected_codes(f16.astype(np.float32), d))
    np.testing.assert_array_equal(_raw(tt.tensor(bf16).to(d)), expected_codes(bf16.astype(np.float32), d))
    # float64 rounds to float32 first, as torch: 1.0625 + 1e-10 is a tie in float32 and goes to even
    f64 = np.concatenate([rng.standard_normal(4096) * 10.0 ** rng.integers(-45, 40, 4096),
                          [1.0625 + 1e-10, 1.1875 - 1e-12, 1.5 + 1e-9, 448.0 + 1e-7]])
    with np.errstate(over="ignore"):
        f64_as_32 = f64.astype(np.float32)
    np.testing.assert_array_equal(_raw(tt.tensor(f64).to(d)), expected_codes(f64_as_32, d))
    for idt, values in ((tt.int64, [0, 1, -7, 1000, 2 ** 24 + 1, -(2 ** 40)]), (tt.int32, [3, -250, 100000]),
                        (tt.uint8, [0, 17, 255]), (tt.int8, [-128, 5]), (tt.bool, [True, False])):
        got = _raw(tt.tensor(values, dtype=idt).to(d))
        np.testing.assert_array_equal(got, expected_codes(np.asarray(values).astype(np.float32), d))


@pytest.mark.parametrize("d", FORMATS, ids=IDS)
def test_float8_to_float8_and_to_integers(d):
    codes = tt.tensor(_codes(d))
    values = decoded32(d)
    for other in FORMATS:
        if other is not d:
            np.testing.assert_array_equal(_raw(codes.to(other)), expected_codes(values, other))
    finite = np.isfinite(values) & (np.abs(values) < 2 ** 31)
    got = _host(codes.to(tt.int64))[finite]
    np.testing.assert_array_equal(got, np.trunc(values[finite]).astype(np.int64))
    np.testing.assert_array_equal(_host(codes.to(tt.bool)), values != 0)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("d", [tt.float8_e4m3fn, tt.float8_e5m2], ids=["e4m3fn", "e5m2"])
def test_strided_casts_both_ways(d, layout):
    x, ref = make((3, 5), tt.float32, layout, lambda s: rng.standard_normal(s) * 40)
    check_layout(x, layout)
    y = x.to(d)
    np.testing.assert_array_equal(_raw(y), expected_codes(ref.astype(np.float32), d))
    # a strided float8 tensor read back: a transposed and a sliced view of the codes
    back = y.t().float()
    np.testing.assert_array_equal(_host(back), _raw(y).view(d.np).astype(np.float32).T)
    sl = y[:, 1::2]
    np.testing.assert_array_equal(_host(sl.to(tt.float64)), _raw(y).view(d.np).astype(np.float64)[:, 1::2])
    np.testing.assert_array_equal(_raw(sl.clone()), _raw(y)[:, 1::2])


@pytest.mark.parametrize("d", FORMATS, ids=IDS)
def test_creation_and_torch_overflow_check(d):
    assert tt.zeros(2, 3, dtype=d).dtype is d and tt.empty(0, 4, dtype=d).shape == (0, 4)
    assert tt.zeros(0, 3, dtype=d).float().shape == (0, 3) and tt.tensor([], dtype=d).to(tt.float32).numel() == 0
    np.testing.assert_array_equal(_raw(tt.zeros(4, dtype=d)), np.zeros(4, np.uint8))
    for v in (1.0, 2.5, 0.3, 4.0 ** -3, 100.0):
        want = expected_codes(np.full(3, v, np.float32), d)
        np.testing.assert_array_equal(_raw(tt.full((3,), v, dtype=d)), want)
        np.testing.assert_array_equal(_raw(tt.empty(3, dtype=d).fill_(v)), want)
        np.testing.assert_array_equal(_raw(tt.full_like(tt.zeros(3, dtype=d), v)), want)
    np.testing.assert_array_equal(_raw(tt.ones_like(tt.zeros(2, dtype=d))), expected_codes(np.ones(2), d))
    assert tt.zeros_like(tt.ones(2), dtype=d).dtype is d
    # torch's check of a scalar written into the format: past the range (inf where there is no inf) raises
    info = tt.finfo(d)
    msg = f"value cannot be converted to type c10::{d.type_name} without overflow"
    for bad in (info.max * 1.01, 1e39) + ((-info.max * 1.01,) if d.is_signed else (1e-45, -1.0)):
        with pytest.raises(RuntimeError, match=msg):
            tt.full((2,), bad, dtype=d)
        with pytest.raises(RuntimeError, match=msg):
            tt.zeros(2, dtype=d).fill_(bad)
    if d is tt.float8_e5m2:
        np.testing.assert_array_equal(_raw(tt.full((2,), -math.inf, dtype=d)), [0xFC, 0xFC])
    else:
        with pytest.raises(RuntimeError, match=msg):
            tt.full((2,), math.inf, dtype=d)
    assert np.isnan(_host(tt.full((2,), math.nan, dtype=d).float())).all()
    # tensor() does no such check: it casts, so an e4m3fn 1e6 saturates as torch's does
    np.testing.assert_array_equal(_raw(tt.tensor([1e6, -3.0], dtype=d)), expected_codes(np.array([1e6, -3.0]), d))


# torch.finfo(d) in torch 2.13: (eps, max, min, tiny); e5m2fnuz's eps is torch's 2**-3
FINFO = {"float8_e4m3fn": (0.125, 448.0, -448.0, 2.0 ** -6), "float8_e5m2": (0.25, 57344.0, -57344.0, 2.0 ** -14),
         "float8_e4m3fnuz": (0.125, 240.0, -240.0, 2.0 ** -7),
         "float8_e5m2fnuz": (0.125, 57344.0, -57344.0, 2.0 ** -15),
         "float8_e8m0fnu": (1.0, 2.0 ** 127, 2.0 ** -127, 2.0 ** -127)}


@pytest.mark.parametrize("d", FORMATS, ids=IDS)
def test_dtype_properties_finfo_and_promotion(d):
    assert d.is_floating_point and d.itemsize == 1 and d.bits == 8 and not d.is_complex
    assert d.is_signed is (d is not tt.float8_e8m0fnu)
    assert str(d) == f"tritensor.{d.name}" and getattr(tt, d.name) is d
    f = tt.finfo(d)
    assert (f.eps, f.max, f.min, f.tiny, f.bits, f.resolution, f.dtype) == (*FINFO[d.name], 8, 1.0, d.name)
    t = tt.zeros(2, dtype=d)
    assert t.element_size() == 1 and t.is_floating_point() and t.dtype is d
    for other in (tt.float32, tt.bfloat16, tt.int64, tt.bool, *[e for e in FORMATS if e is not d]):
        msg = f"Promotion for Float8 Types is not supported, attempted to promote {d.type_name} and {other.type_name}"
        with pytest.raises(RuntimeError, match=msg):
            tt.promote_types(d, other)
        with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
            tt.result_type(tt.zeros(2, dtype=other), t)
    assert tt.promote_types(d, d) is d and tt.result_type(t, t) is d


@pytest.mark.parametrize("d", [tt.float8_e4m3fn, tt.float8_e8m0fnu], ids=["e4m3fn", "e8m0fnu"])
def test_arithmetic_refused_with_torchs_error(d):
    a = tt.ones(3).to(d)
    name = d.type_name
    dev = a.device.type
    for f, kernel in ((lambda: a + a, "add_stub"), (lambda: a - 1, "add_stub"), (lambda: a * a, f"mul_{dev}"),
                      (lambda: a.exp(), f"exp_{dev}"), (lambda: -a, f"neg_{dev}"), (lambda: a < a, f"lt_{dev}"),
                      (lambda: a.add_(a), "add_stub")):
        with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for \'{name}\''):
            f()
    # reductions, softmax, and any kernel handed a float8 buffer (sorts, scans, compaction): torch's error type
    for f, kernel in ((lambda: a.sum(), f"sum_{dev}"), (lambda: a.mean(0), f"mean_{dev}"),
                      (lambda: a.softmax(0), "softmax_lastdim_kernel_impl")):
        with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for \'{name}\''):
            f()
    for f in (lambda: a.sort(), lambda: a.cumsum(0), lambda: a.nonzero(), lambda: a.topk(1)):
        with pytest.raises(NotImplementedError, match=f"not implemented for '{name}'"):
            f()
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types"):
        a + tt.ones(3)
    with pytest.raises(RuntimeError, match="expected a floating-point dtype"):
        a.reshape(1, 3) @ a.reshape(3, 1)


@pytest.mark.parametrize("d", [tt.float8_e4m3fn, tt.float8_e5m2fnuz], ids=["e4m3fn", "e5m2fnuz"])
def test_views_copies_indexing_cat_where(d):
    vals = rng.standard_normal((4, 6)).astype(np.float32)
    x = tt.tensor(vals).to(d)
    raw = _raw(x)
    # view(dtype): the same bytes, as in torch (uint8 codes, and back; int8; two codes as one int16)
    u = x.view(tt.uint8)
    assert u.dtype is tt.uint8 and u.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(_host(u), raw)
    assert u.view(d).dtype is d and _raw(u.view(d)).tobytes() == raw.tobytes()
    np.testing.assert_array_equal(_host(x.view(tt.int8)), raw.view(np.int8))
    np.testing.assert_array_equal(_host(x.view(tt.int16)), raw.view(np.int16))
    assert x.view(tt.int16).shape == (4, 3) and tt.zeros(2, 3).view(d).shape == (2, 12)
    with pytest.raises(RuntimeError, match="self.size\\(-1\\) must be divisible by 4 to view Float8"):
        x[:, :3].view(tt.float32)
    with pytest.raises(RuntimeError, match="self.stride\\(-1\\) must be 1 to view Float as Float8"):
        tt.zeros(4, 2).t().view(d)
    g = tt.zeros(3, requires_grad=True)
    assert not g.view(d).requires_grad and g.view(d).grad_fn is None  # torch never differentiates view(dtype)
    # copies, indexing, joins, where: bytes move unchanged
    idx = tt.tensor([3, 0, 0, 2])
    np.testing.assert_array_equal(_raw(x[idx]), raw[[3, 0, 0, 2]])
    np.testing.assert_array_equal(_raw(x.index_select(1, tt.tensor([5, 1]))), raw[:, [5, 1]])
    np.testing.assert_array_equal(_raw(x[1:3, ::2]), raw[1:3, ::2])
    np.testing.assert_array_equal(_raw(tt.cat([x, x[:1]])), np.concatenate([raw, raw[:1]]))
    np.testing.assert_array_equal(_raw(tt.stack([x, x], dim=1)), np.stack([raw, raw], 1))
    mask = vals > 0
    rev = x[tt.tensor([3, 2, 1, 0])]
    np.testing.assert_array_equal(_raw(tt.where(tt.tensor(mask), x, rev)), np.where(mask, raw, raw[::-1]))
    y = x.clone()
    y[0] = 2.0
    y[tt.tensor([1, 3])] = x[:2]
    want = raw.copy()
    want[0] = expected_codes(np.array([2.0]), d)[0]
    want[[1, 3]] = raw[:2]
    np.testing.assert_array_equal(_raw(y), want)
    z = tt.empty(4, 6, dtype=d).copy_(tt.tensor(vals))
    np.testing.assert_array_equal(_raw(z), raw)
    np.testing.assert_array_equal(_raw(x.repeat(2, 1)), np.tile(raw, (2, 1)))
    np.testing.assert_array_equal(_raw(x.roll(1, 1)), np.roll(raw, 1, 1))


# torch 2.13 on float8: isnan everywhere, isinf only in e5m2, isfinite in e5m2 and e8m0fnu
@pytest.mark.parametrize("d", FORMATS, ids=IDS)
def test_classification(d):
    x = tt.tensor(_codes(d))
    values = decoded32(d)
    np.testing.assert_array_equal(_host(x.isnan()), np.isnan(values))
    for op, formats, ref in (("isinf", (tt.float8_e5m2,), np.isinf),
                             ("isfinite", (tt.float8_e5m2, tt.float8_e8m0fnu), np.isfinite)):
        if d in formats:
            np.testing.assert_array_equal(_host(getattr(x, op)()), ref(values))
        else:
            with pytest.raises(NotImplementedError, match=f'"{op}" not implemented for \'{d.type_name}\''):
                getattr(x, op)()


@pytest.mark.parametrize("d", [tt.float8_e4m3fn, tt.float8_e8m0fnu], ids=["e4m3fn", "e8m0fnu"])
def test_numpy_printing_and_save_load(d, tmp_path):
    x = tt.tensor([[1.0, 2.5], [0.25, 448.0]]).to(d)
    raw = _raw(x)
    assert x.cpu().numpy().dtype == d.np and tt.from_numpy(raw.view(d.np)).dtype is d
    assert x[0, 0].item() == 1.0 and isinstance(x[0, 0].item(), float)
    assert x.tolist() == raw.view(d.np).astype(np.float64).tolist()
    assert repr(x).endswith(f"dtype=tritensor.{d.name})")
    buf = io.BytesIO()
    tt.save({"w": x}, buf)
    buf.seek(0)
    back = tt.load(buf)["w"]
    assert back.dtype is d
    np.testing.assert_array_equal(_raw(back), raw)

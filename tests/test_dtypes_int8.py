"""The small integer dtypes ``uint8``, ``int8``, ``int16`` (images and quantized weights arrive as
uint8): PyTorch's promotion (tables generated with torch 2.13), creation, casts, arithmetic that
wraps in two's complement, comparisons, reductions, masks, printing, NumPy and DLPack round trips,
against NumPy on every layout."""
import warnings

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import NP, assert_close

SMALL = [tt.uint8, tt.int8, tt.int16]
ORDER = [tt.bool, tt.uint8, tt.int8, tt.int16, tt.int32, tt.int64, tt.float16, tt.bfloat16, tt.float32, tt.float64]
rng = np.random.default_rng(11)

# torch.promote_types(row, column) over ORDER, printed by torch 2.13
PROMOTE = """
bool uint8 int8 int16 int32 int64 float16 bfloat16 float32 float64
uint8 uint8 int16 int16 int32 int64 float16 bfloat16 float32 float64
int8 int16 int8 int16 int32 int64 float16 bfloat16 float32 float64
int16 int16 int16 int16 int32 int64 float16 bfloat16 float32 float64
int32 int32 int32 int32 int32 int64 float16 bfloat16 float32 float64
int64 int64 int64 int64 int64 int64 float16 bfloat16 float32 float64
float16 float16 float16 float16 float16 float16 float16 float32 float32 float64
bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 float32 bfloat16 float32 float64
float32 float32 float32 float32 float32 float32 float32 float32 float32 float64
float64 float64 float64 float64 float64 float64 float64 float64 float64 float64
"""
# torch.can_cast(row, column) over ORDER, 1 for True
CAN_CAST = "1111111111011111111101111111110111111111011111111101111111110000001111000000111100000011110000001111"


def _ints(dtype, lo=None, hi=None):
    info = np.iinfo(NP[dtype])
    lo, hi = info.min if lo is None else lo, info.max if hi is None else hi
    return lambda shape: rng.integers(lo, hi, size=shape, endpoint=True).astype(np.float64)


def test_dtype_objects_and_names():
    for d, bits, signed, name in ((tt.uint8, 8, False, "Byte"), (tt.int8, 8, True, "Char"),
                                  (tt.int16, 16, True, "Short")):
        assert d.itemsize * 8 == bits and d.is_signed is signed and not d.is_floating_point
        assert d.type_name == name and str(d) == f"tritensor.{d.name}"
        assert tt.iinfo(d).bits == bits
    assert tt.short is tt.int16 and not hasattr(tt, "char") and not hasattr(tt, "byte")  # as torch
    assert tt.tensor([1]).to(tt.uint8).dtype is tt.uint8 and tt.tensor([1], dtype=tt.int8).dtype is tt.int8


def test_promote_types_and_can_cast_match_torch():
    rows = [line.split() for line in PROMOTE.strip().splitlines()]
    for a, row in zip(ORDER, rows):
        for b, want in zip(ORDER, row):
            assert tt.promote_types(a, b).name == want, (a, b)
    flags = iter(CAN_CAST)
    for a in ORDER:
        for b in ORDER:
            assert tt.can_cast(a, b) == (next(flags) == "1"), (a, b)


@pytest.mark.parametrize("dtype", SMALL, ids=str)
def test_result_type_with_scalars_and_zero_dim_tensors(dtype):
    t = tt.ones(2, dtype=dtype)
    assert tt.result_type(t, 1) is dtype  # a Python int keeps the tensor's integer dtype
    assert tt.result_type(t, 1.5) is tt.float32  # a float brings the default float
    assert tt.result_type(t, True) is dtype
    assert tt.result_type(t, tt.tensor(1)) is dtype  # a 0-d int64 tensor ranks below
    assert tt.result_type(t, tt.tensor(1.0, dtype=tt.float64)) is tt.float64  # a higher category wins
    assert (t + 1.5).dtype is tt.float32 and (t / 2).dtype is tt.float32 and (t > 0).dtype is tt.bool
    assert (t + tt.ones(2, dtype=tt.float16)).dtype is tt.float16


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", SMALL, ids=str)
def test_arithmetic_wraps_as_twos_complement(dtype, layout):
    a, a_np = make((3, 4), dtype, layout, _ints(dtype))
    check_layout(a, layout)
    b, b_np = make((3, 4), dtype, "contiguous", _ints(dtype))
    a_np, b_np = a_np.astype(NP[dtype]), b_np.astype(NP[dtype])
    with np.errstate(over="ignore"):
        for op in ("add", "sub", "mul"):
            out = getattr(tt, op)(a, b)
            assert out.dtype is dtype
            assert_close(out.cpu().numpy(), getattr(np, {"sub": "subtract", "mul": "multiply"}.get(op, op))(a_np, b_np),
                         dtype)
        assert_close((-a).cpu().numpy(), (-a_np.astype(np.int64)).astype(NP[dtype]), dtype)
        assert_close(a.abs().cpu().numpy(), np.abs(a_np.astype(np.int64)).astype(NP[dtype]), dtype)
    nz = tt.tensor(np.where(b_np == 0, 1, b_np))
    ref_b = np.where(b_np == 0, 1, b_np).astype(np.int64)
    # floor division and remainder take the sign of the divisor, as Python and NumPy
    assert_close((a // nz).cpu().numpy(), (a_np.astype(np.int64) // ref_b).astype(NP[dtype]), dtype)
    assert_close((a % nz).cpu().numpy(), (a_np.astype(np.int64) % ref_b).astype(NP[dtype]), dtype)
    assert_close((a / nz).cpu().numpy(), a_np / ref_b, tt.float32)
    for op, ref in (("eq", np.equal), ("lt", np.less), ("ge", np.greater_equal)):
        np.testing.assert_array_equal(getattr(a, op)(b).cpu().numpy(), ref(a_np, b_np))


def test_python_scalars_are_cast_to_the_tensors_dtype_first():
    """torch casts a Python int (or a 0-d integer tensor) to a uint8 tensor's dtype before the op:
    uint8 < -1 compares with 255, == 261 with 5; values torch 2.13 prints."""
    u = tt.tensor([250, 3], dtype=tt.uint8)
    assert (u + 300).tolist() == [38, 47] and (u + 10).tolist() == [4, 13]
    assert (u * 2).tolist() == [244, 6] and (u - 251).tolist() == [255, 8] and (-u).tolist() == [6, 253]
    assert (u * 1000).tolist() == [144, 184] and u.add(1000).tolist() == [226, 235]
    assert (u < -1).tolist() == [True, True] and (u == 259).tolist() == [False, True]
    assert (u + tt.tensor(-1)).tolist() == [249, 2] and (u < tt.tensor(-1)).tolist() == [True, True]
    i8 = tt.tensor([100, -128], dtype=tt.int8)
    assert (i8 + 100).tolist() == [-56, -28] and (i8 // 3).tolist() == [33, -43]
    assert i8.abs().tolist() == [100, -128] and (-i8).tolist() == [-100, -128]
    assert (i8 + 1.5).tolist() == [101.5, -126.5] and (i8 / 2).tolist() == [50.0, -64.0]
    assert (tt.tensor([16], dtype=tt.uint8) ** 2).tolist() == [0]
    assert (tt.tensor([3], dtype=tt.int8) ** 5).tolist() == [-13]
    assert (tt.tensor([5], dtype=tt.uint8) + tt.tensor([-1], dtype=tt.int8)).dtype is tt.int16


@pytest.mark.parametrize("dtype", SMALL, ids=str)
def test_reductions(dtype):
    x, x_np = make((3, 5), dtype, "transposed", _ints(dtype))
    x_np = x_np.astype(np.int64)
    s = x.sum()
    assert s.dtype is tt.int64 and s.item() == x_np.sum()  # integer sums are int64, as torch's
    assert_close(x.sum(1).cpu().numpy(), x_np.sum(1), tt.int64)
    assert x.prod(0).dtype is tt.int64
    assert_close(x.cumsum(1).cpu().numpy(), np.cumsum(x_np, 1), tt.int64)
    m = x.max(1)
    assert m.values.dtype is dtype and m.indices.dtype is tt.int64
    assert_close(m.values.cpu().numpy(), x_np.max(1).astype(NP[dtype]), dtype)
    assert_close(m.indices.cpu().numpy(), x_np.argmax(1), tt.int64)
    assert x.min().item() == x_np.min() and x.amax(0).dtype is dtype
    assert x.argmax().item() == x_np.argmax() and x.argmin(0).tolist() == x_np.argmin(0).tolist()
    with pytest.raises(RuntimeError, match=f"could not infer output dtype.*Got: {dtype.type_name}"):
        x.mean()
    # dtype= keeps the small type: the sum wraps, as torch's (x.sum(dtype=torch.uint8))
    assert x.sum(dtype=dtype).dtype is dtype and x.sum(dtype=dtype).item() == np.array(x_np.sum()).astype(NP[dtype])
    assert_close(x.cumsum(1, dtype=dtype).cpu().numpy(), np.cumsum(x_np, 1).astype(NP[dtype]), dtype)
    assert_close(x.float().mean().item(), x_np.mean(), tt.float32)


@pytest.mark.parametrize("dtype", SMALL, ids=str)
def test_casts_wrap_as_torch(dtype):
    """Floats truncate toward zero then wrap (torch's CPU casts: -1.0 -> 255 in uint8), wider
    integers wrap; values as torch 2.13 gives them."""
    f = tt.tensor([1.5, -1.0, 300.0, -0.5, float("nan")])
    want = {tt.uint8: [1, 255, 44, 0, 0], tt.int8: [1, -1, 44, 0, 0], tt.int16: [1, -1, 300, 0, 0]}[dtype]
    assert f.to(dtype).tolist() == want
    for low in (tt.float16, tt.bfloat16, tt.float64):
        assert f.to(low).to(dtype).tolist() == want
    wide = tt.tensor([1, -1, 300, 70000])
    assert wide.to(dtype).tolist() == np.array([1, -1, 300, 70000]).astype(NP[dtype]).tolist()
    x = tt.tensor(np.array([0, 1, 2, 100], dtype=NP[dtype]))
    assert x.float().dtype is tt.float32 and x.to(tt.bfloat16).tolist() == [0.0, 1.0, 2.0, 100.0]
    assert x.bool().tolist() == [False, True, True, True] and x.long().tolist() == [0, 1, 2, 100]
    assert {tt.uint8: x.byte(), tt.int8: x.char(), tt.int16: x.short()}[dtype] is x
    assert tt.tensor([1.0]).byte().dtype is tt.uint8 and tt.tensor([1.0]).char().dtype is tt.int8
    assert tt.tensor([1.0]).short().dtype is tt.int16


def test_creation_and_overflow_checks():
    assert tt.zeros(2, 3, dtype=tt.uint8).tolist() == [[0] * 3] * 2
    assert tt.full((2,), 3, dtype=tt.int16).dtype is tt.int16
    assert tt.full((1,), -1, dtype=tt.uint8).tolist() == [255]  # unsigned types take -max..max, wrapping
    assert tt.tensor([-1, 1.5], dtype=tt.uint8).tolist() == [255, 1]
    assert tt.tensor([[1, 2]], dtype=tt.int8).shape == (1, 2)
    for bad, c_name in ((lambda: tt.full((1,), 300, dtype=tt.uint8), "uint8_t"),
                        (lambda: tt.full((1,), 128, dtype=tt.int8), "int8_t"),
                        (lambda: tt.full((1,), 40000, dtype=tt.int16), "int16_t"),
                        (lambda: tt.zeros(1, dtype=tt.uint8).fill_(256), "uint8_t"),
                        (lambda: tt.full((1,), 255.5, dtype=tt.uint8), "uint8_t"),
                        (lambda: tt.tensor([300], dtype=tt.uint8), "uint8"),
                        (lambda: tt.tensor([-0.5], dtype=tt.uint8), "uint8"),
                        (lambda: tt.tensor([2**31], dtype=tt.int32), "int32")):
        with pytest.raises(RuntimeError, match=f"value cannot be converted to type {c_name} without overflow"):
            bad()
    assert tt.tensor(np.array([300])).to(tt.uint8).tolist() == [44]  # an array casts (wraps) unchecked
    assert tt.arange(250, 260, dtype=tt.uint8).tolist() == [250, 251, 252, 253, 254, 255, 0, 1, 2, 3]
    assert tt.arange(-3, 3, dtype=tt.int8).tolist() == [-3, -2, -1, 0, 1, 2]
    r = tt.randint(0, 256, (64,), dtype=tt.uint8)
    assert r.dtype is tt.uint8 and 0 <= r.min().item() and r.max().item() <= 255
    r = tt.randint(-128, 128, (64,), dtype=tt.int8)
    assert r.dtype is tt.int8 and r.min().item() >= -128
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds for unsigned char"):
        tt.randint(0, 300, (2,), dtype=tt.uint8)
    with pytest.raises(RuntimeError, match="from is out of bounds for signed char"):
        tt.randint(-1000, 3, (2,), dtype=tt.int8)
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds for short int"):
        tt.randint(0, 10**6, (2,), dtype=tt.int16)


@pytest.mark.parametrize("dtype", SMALL, ids=str)
def test_numpy_round_trips(dtype):
    a = np.array([[0, 1], [2, np.iinfo(NP[dtype]).max]], dtype=NP[dtype])
    t = tt.from_numpy(a)
    assert t.dtype is dtype and t.device.type == "cpu"
    a[0, 0] = 7  # from_numpy shares memory
    assert t[0, 0].item() == 7 and t.numpy().dtype == NP[dtype]
    assert tt.tensor(a).dtype is dtype and tt.as_tensor(a).dtype is dtype
    d = tt.tensor(a)  # on the default device
    np.testing.assert_array_equal(d.cpu().numpy(), a)
    np.testing.assert_array_equal(np.asarray(d.cpu()), a)
    assert d.tolist() == a.tolist() and d[1, 1].item() == int(a[1, 1])
    import pickle
    assert pickle.loads(pickle.dumps(d)).tolist() == a.tolist()


@pytest.mark.parametrize("dtype", SMALL, ids=str)
def test_dlpack_round_trips(dtype):
    a = np.array([1, 2, 3], dtype=NP[dtype])
    t = tt.from_numpy(a)
    b = np.from_dlpack(t)
    assert b.dtype == NP[dtype] and b.tolist() == [1, 2, 3]
    back = tt.from_dlpack(b)
    assert back.dtype is dtype and back.tolist() == [1, 2, 3]
    d = tt.tensor(a)
    assert tt.from_dlpack(d).dtype is dtype and tt.from_dlpack(d).cpu().tolist() == [1, 2, 3]


@pytest.mark.parametrize("dtype", SMALL, ids=str)
def test_scatters_accumulate_in_int32_and_wrap(dtype):
    """The atomics have no 8/16-bit forms: scatter_add, index_add, index_put(accumulate=True) and
    scatter_reduce accumulate in int32 and wrap on the way back, as torch's integer sums wrap."""
    info = np.iinfo(NP[dtype])
    x_np = rng.integers(max(info.min, -100), min(info.max, 100), size=7, endpoint=True).astype(NP[dtype])
    src_np = rng.integers(info.min, info.max, size=7, endpoint=True).astype(NP[dtype])
    idx_np = np.array([0, 1, 0, 2, 1, 0, 6])
    x, src, idx = tt.tensor(x_np), tt.tensor(src_np), tt.tensor(idx_np)
    acc = x_np.astype(np.int64)
    np.add.at(acc, idx_np, src_np.astype(np.int64))
    want = acc.astype(NP[dtype])  # wraps
    assert_close(x.scatter_add(0, idx, src).cpu().numpy(), want, dtype)
    assert_close(x.index_add(0, idx, src).cpu().numpy(), want, dtype)
    assert_close(x.index_put((idx,), src, accumulate=True).cpu().numpy(), want, dtype)
    assert_close(x.scatter_reduce(0, idx, src, "sum").cpu().numpy(), want, dtype)
    amax = x_np.astype(np.int64)
    np.maximum.at(amax, idx_np, src_np.astype(np.int64))
    assert_close(x.scatter_reduce(0, idx, src, "amax").cpu().numpy(), amax.astype(NP[dtype]), dtype)
    prod = x_np.astype(np.int64)
    np.multiply.at(prod, idx_np, src_np.astype(np.int64) % 7)
    assert_close(x.scatter_reduce(0, idx, src % 7, "prod").cpu().numpy(),
                 prod.astype(NP[dtype]), dtype)


@pytest.mark.parametrize("dtype", SMALL, ids=str)
def test_random_fill_range_and_index_dtype_errors(dtype):
    r = tt.empty(2000, dtype=dtype).random_()  # torch's range: [0, 2**bits) unsigned, [0, 2**(bits-1)) signed
    hi = np.iinfo(NP[dtype]).max
    assert r.dtype is dtype and 0 <= r.min().item() and r.max().item() <= hi and r.max().item() > hi // 2
    idx = tt.tensor([0, 1], dtype=dtype)
    name = tt.runtime.dtype.tensor_type_name(dtype, idx.device.type)
    assert name.endswith({tt.uint8: "ByteTensor", tt.int8: "CharTensor", tt.int16: "ShortTensor"}[dtype])
    with pytest.raises(RuntimeError, match=f"Long, Int; but got {name} instead"):  # torch's, with its type name
        tt.nn.functional.embedding(idx, tt.zeros(3, 2))


def test_indexing_with_a_uint8_mask_warns_as_torch():
    x = tt.arange(3)
    mask = tt.tensor([1, 0, 1], dtype=tt.uint8)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = x[mask]
    assert out.tolist() == [0, 2]
    assert any(issubclass(m.category, UserWarning) and "indexing with dtype tritensor.uint8 is now deprecated" in
               str(m.message) for m in w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = tt.arange(3)
        y[mask] = 9
    assert y.tolist() == [9, 1, 9]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[tt.tensor([0, 1], dtype=tt.int8)]


def test_other_ops_keep_the_dtype():
    u = tt.tensor([5, 1, 3], dtype=tt.uint8)
    assert u.sort().values.tolist() == [1, 3, 5] and u.sort().values.dtype is tt.uint8
    assert u.flip(0).tolist() == [3, 1, 5] and u.clamp(2, 4).tolist() == [4, 2, 3]
    assert tt.cat([u, u]).dtype is tt.uint8 and u.index_select(0, tt.tensor([0, 2])).tolist() == [5, 3]
    assert tt.where(tt.tensor([True, False, True]), u, 0).tolist() == [5, 0, 3]
    assert u.masked_fill(tt.tensor([True, False, False]), 7).tolist() == [7, 1, 3]
    assert u.sqrt().dtype is tt.float32 and u.unique().tolist() == [1, 3, 5]
    m = tt.tensor([[1, 2], [3, 4]], dtype=tt.uint8).t()
    assert m.contiguous().tolist() == [[1, 3], [2, 4]] and m.clone().dtype is tt.uint8


def test_printing_matches_torch():
    assert repr(tt.tensor([1, 2], dtype=tt.uint8).cpu()) == "tensor([1, 2], dtype=tritensor.uint8)"
    assert repr(tt.tensor([1, -2], dtype=tt.int8).cpu()) == "tensor([ 1, -2], dtype=tritensor.int8)"
    assert repr(tt.tensor([], dtype=tt.int16).cpu()) == "tensor([], dtype=tritensor.int16)"
    t = tt.tensor([1], dtype=tt.uint8)
    assert t.cpu().type() == "tritensor.ByteTensor"
    assert t.type() == ("tritensor.cuda.ByteTensor" if t.device.type == "cuda" else "tritensor.ByteTensor")

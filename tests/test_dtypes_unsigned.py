"""torch's barebones unsigned dtypes ``uint16``, ``uint32``, ``uint64``, at torch 2.13's support level:
tensors of them are made, cast both ways, copied, indexed, sorted, printed, saved and moved to and from
NumPy, a few ops run (mul, div, eq/ne, & | ^, sum/prod/cumsum/cumprod to int64, all/any), and the rest
raise torch's NotImplementedError naming its kernel. Promotion with anything but a float is refused.
Every expectation below was printed by torch 2.13 (CPU); values are checked against NumPy on the
full range (uint64 past 2**63 included, where an int64 or float64 round trip would lose them)."""
import io
import math

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import NP, assert_close

UNSIGNED = [tt.uint16, tt.uint32, tt.uint64]
ORDER = [tt.bool, tt.uint8, tt.int8, tt.int16, tt.int32, tt.int64, tt.float16, tt.bfloat16, tt.float32, tt.float64]
rng = np.random.default_rng(17)
ids = str


def full_range(d, shape):
    """Random values over the whole of ``d``, its extremes and the int64 sign boundary included."""
    info = np.iinfo(NP[d])
    v = rng.integers(0, info.max, shape, dtype=NP[d], endpoint=True)
    flat = v.reshape(-1)
    edges = np.array([0, 1, info.max, info.max // 2, info.max // 2 + 1], dtype=NP[d])[:flat.size]
    flat[:edges.size] = edges
    return v


def dev(t):
    return t.device.type


@pytest.mark.parametrize("u", UNSIGNED, ids=ids)
def test_properties_promotion_and_can_cast(u):
    assert tt.iinfo(u).min == 0 and tt.iinfo(u).max == 2 ** u.bits - 1 and tt.iinfo(u).bits == u.bits
    assert not u.is_signed and not u.is_floating_point and u.itemsize == u.bits // 8
    assert tt.zeros(2, dtype=u).element_size() == u.itemsize
    assert tt.zeros(2, dtype=u).type() == f"tritensor.{'cuda.' if tt.zeros(1).is_cuda else ''}{u.type_name}Tensor"
    for other in ORDER + UNSIGNED:
        if other is u or other.is_floating_point:
            assert tt.promote_types(u, other) is (u if other is u else other)
            assert tt.promote_types(other, u) is tt.promote_types(u, other)
            continue
        with pytest.raises(RuntimeError, match=f"^Promotion for uint16, uint32, uint64 types is not supported, "
                                               f"attempted to promote {u.type_name} and {other.type_name}$"):
            tt.promote_types(u, other)
    # torch.can_cast: only to bool from u is refused, and from the floats to u
    assert [tt.can_cast(u, d) for d in ORDER + UNSIGNED] == [False] + [True] * 12
    assert [tt.can_cast(d, u) for d in ORDER + UNSIGNED] == [True] * 6 + [False] * 4 + [True] * 3
    x = tt.tensor([1, 2], dtype=u)
    assert tt.result_type(x, 1) is u and tt.result_type(x, 1.0) is tt.float32
    assert tt.result_type(x, tt.tensor(1)) is u  # a 0-d int64 tensor does not promote it
    with pytest.raises(RuntimeError, match="attempted to promote UInt32 and Long"):
        tt.tensor([1], dtype=tt.uint32) * tt.tensor([1, 2])


@pytest.mark.parametrize("u", UNSIGNED, ids=ids)
def test_creation_numpy_and_printing(u):
    v = full_range(u, (3, 4))
    t = tt.tensor(v.tolist(), dtype=u)
    assert t.dtype is u and t.tolist() == v.tolist()
    assert_close(t, v, u)
    assert_close(tt.from_numpy(v).to(t.device), v, u)
    back = t.cpu().numpy()
    assert back.dtype == NP[u] and (back == v).all()
    assert t[0, 2].item() == int(v[0, 2])
    for made, value in [(tt.zeros(2, 3, dtype=u), 0), (tt.ones(2, 3, dtype=u), 1), (tt.full((2, 3), 7, dtype=u), 7),
                        (tt.zeros_like(t), 0), (tt.ones_like(t), 1), (tt.full_like(t, 5), 5)]:
        assert made.dtype is u
        assert_close(made, np.full(made.shape, value, NP[u]), u)
    assert tt.empty(2, dtype=u).dtype is u and tt.empty_like(t).shape == t.shape
    r = tt.randint(0, 2 ** 15, (50,), dtype=u)
    c_name = {tt.uint16: "short unsigned int", tt.uint32: "unsigned int", tt.uint64: "long unsigned int"}[u]
    with pytest.raises(RuntimeError, match=f"^from is out of bounds for {c_name}$"):
        tt.randint(-1, 3, (2,), dtype=u)
    if u is not tt.uint64:
        with pytest.raises(RuntimeError, match=f"^to - 1 is out of bounds for {c_name}$"):
            tt.randint(0, 2 ** u.bits + 1, (2,), dtype=u)
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):  # torch's bounds are int64s
        tt.randint(0, 2 ** 64, (2,), dtype=u)
    assert r.dtype is u and 0 <= int(r.to(tt.float64).min().item()) and int(r.to(tt.float64).max().item()) < 2 ** 15
    assert repr(tt.tensor([1, 2 ** 16 - 1], dtype=u)).endswith(f"dtype=tritensor.{u.name})")
    # torch: a negative int wraps into uint16/uint32 (-1 -> max), a whole-range int goes into uint64
    assert tt.full((2,), -1, dtype=u).tolist() == [2 ** u.bits - 1] * 2
    with pytest.raises(RuntimeError, match=f"value cannot be converted to type {u.c_name} without overflow"):
        tt.full((2,), 2 ** u.bits, dtype=u)
    with pytest.raises(RuntimeError, match=f"value cannot be converted to type {u.c_name} without overflow"):
        tt.full((2,), -1.0, dtype=u)


def test_uint64_python_ints_keep_their_whole_range():
    t = tt.tensor([2 ** 64 - 1, 2 ** 63 + 5, 3], dtype=tt.uint64)
    assert t.tolist() == [2 ** 64 - 1, 2 ** 63 + 5, 3]
    with pytest.raises(OverflowError, match="can't convert negative int to unsigned"):
        tt.tensor([-1], dtype=tt.uint64)
    with pytest.raises(OverflowError, match="int too big to convert"):
        tt.tensor([2 ** 64], dtype=tt.uint64)
    assert tt.tensor([-1], dtype=tt.uint16).tolist() == [65535]  # torch wraps here


@pytest.mark.parametrize("u", UNSIGNED, ids=ids)
def test_casts_both_ways_against_numpy(u):
    info = np.iinfo(NP[u])
    # integers into u wrap (two's complement), as NumPy's astype and torch's casts
    ints = np.array([-1, -2 ** 31, 70000, 2 ** 40 + 3, 0, 5, -2 ** 63, 2 ** 63 - 1], dtype=np.int64)
    for src in (tt.int64, tt.int32, tt.int16, tt.int8, tt.uint8, tt.bool):
        vals = ints.astype(NP[src])
        assert_close(tt.tensor(vals).to(u), vals.astype(NP[u]), u, err_msg=str(src))
    # floats in range truncate toward zero; negatives truncate then wrap (-1.5 -> max), as torch's CPU casts.
    # Past the range, NaN and inf the C++ conversion torch runs is undefined: tritensor saturates (NaN -> 0)
    floats = [0.0, 3.7, 65535.0, 1234.9, -1.5, -2.0, -70000.0]
    if u is not tt.uint16:
        floats += [3e9, 4294967295.0]
    if u is tt.uint64:
        floats += [2.0 ** 63, 1.8e19, 2.0 ** 64 - 2048]
    for src in (tt.float64, tt.float32):
        vals = [float(np.asarray(f, NP[src])) for f in floats]  # as the source dtype holds them
        vals = [f for f in vals if f < 2 ** u.bits]  # 2**64 - 2048 rounds to 2**64 in fp32: out of range
        want = [math.trunc(f) % 2 ** u.bits for f in vals]
        assert tt.tensor(vals, dtype=src).to(u).tolist() == want, src
    sat = tt.tensor([float("nan"), float("inf"), 1e30]).to(u).tolist()
    assert sat == [0, info.max, info.max]
    # u into every other dtype, over the full range
    v = full_range(u, (64,))
    t = tt.tensor(v)
    for dst in ORDER + UNSIGNED:
        with np.errstate(over="ignore"):
            want = v.astype(NP[dst]) if dst is not tt.bool else v != 0
        got = t.to(dst)
        assert got.dtype is dst
        if dst.is_floating_point:  # NumPy rounds to nearest as the casts do
            assert_close(got, want.astype(np.float64), dst)
        else:
            assert_close(got, want, dst, err_msg=str(dst))
    assert t.type(tt.int64).dtype is tt.int64 and tt.tensor([1]).type(u).dtype is u


@pytest.mark.parametrize("u", UNSIGNED, ids=ids)
def test_supported_ops_against_numpy(u):
    a, b = full_range(u, (5, 7)), full_range(u, (5, 7))
    ta, tb = tt.tensor(a), tt.tensor(b)
    with np.errstate(over="ignore"):
        assert_close(ta * tb, a * b, u)  # wraps modulo 2**bits
        assert_close(ta * 3, a * NP[u](3), u)
        assert_close(tb[:, :1] * ta, b[:, :1] * a, u)  # broadcasting
    assert_close(ta == tb, a == b, tt.bool)
    assert_close(ta != ta, np.zeros(a.shape, bool), tt.bool)
    assert_close(ta == 1, a == 1, tt.bool)
    # a Python int is cast to the tensor's dtype first (it wraps), as torch: -1 and 2**64 - 1 are its max
    top = np.iinfo(NP[u]).max
    assert_close(ta == -1, a == top, tt.bool)
    assert_close(ta == 2 ** 64 - 1, a == top, tt.bool)
    assert_close(ta != 2 ** 64 - 1, a != top, tt.bool)
    assert_close(ta & tb, a & b, u)
    assert_close(ta | tb, a | b, u)
    assert_close(ta ^ tb, a ^ b, u)
    assert_close(ta / 2, a.astype(np.float64) / 2, tt.float32)
    assert_close(tt.where(ta == tb, ta, tb), np.where(a == b, a, b), u)
    # integer sums and products go to int64 (wrapped), as torch
    wide = a.astype(np.uint64).astype(np.int64)
    with np.errstate(over="ignore"):
        assert_close(ta.sum(), wide.sum(), tt.int64)
        assert_close(ta.sum(1), wide.sum(1), tt.int64)
        assert_close(ta.prod(0), np.prod(wide, 0), tt.int64)
        assert_close(ta.cumsum(1), np.cumsum(wide, 1), tt.int64)
        assert_close(ta.cumprod(0), np.cumprod(wide, 0), tt.int64)
    assert ta.sum().dtype is tt.int64
    assert_close(ta.all(1), a.all(1), tt.bool)
    assert_close(ta.any(0), a.any(0), tt.bool)
    # sorting compares unsigned: the upper half sorts above the lower
    s = ta.sort(1)
    assert_close(s.values, np.sort(a, 1), u)
    assert_close(ta.sort(1, descending=True).values, np.sort(a, 1)[:, ::-1], u)
    assert_close(ta[tt.arange(5)[:, None], s.indices], np.sort(a, 1), u)  # the indices are where the values were
    assert_close(ta.flatten().unique(), np.unique(a), u)
    assert_close(tt.cat([ta, tb]), np.concatenate([a, b]), u)
    assert_close(ta[1:4:2, ::3], a[1:4:2, ::3], u)
    assert_close(ta[tt.tensor([3, 0])], a[[3, 0]], u)
    assert_close(ta[ta == tb], a[a == b], u)
    c = ta.clone()
    c[1:3] = 7
    a7 = a.copy()
    a7[1:3] = 7
    assert_close(c, a7, u)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_copies_and_ops_read_strided_layouts(layout):
    for u in UNSIGNED:
        t, ref = make((3, 4, 5), u, layout, lambda shape: rng.integers(0, 60000, shape).astype(np.float64))
        check_layout(t, layout)
        r = ref.astype(NP[u])
        assert_close(t.contiguous(), r, u)
        assert_close(t.to(tt.float64), ref, tt.float64)
        assert_close(t * t, r * r, u)
        assert_close(t.sum(-1), r.astype(np.int64).sum(-1), tt.int64)


REFUSED = [  # (call, torch 2.13's kernel name; "{}" the device type)
    (lambda a, b: a + b, "add_stub"), (lambda a, b: a - b, "add_stub"), (lambda a, b: a + 1, "add_stub"),
    (lambda a, b: a < b, "lt_{}"), (lambda a, b: a <= b, "le_{}"), (lambda a, b: a > b, "gt_{}"),
    (lambda a, b: a >= b, "ge_{}"), (lambda a, b: -a, "neg_{}"), (lambda a, b: a.abs(), "abs_{}"),
    (lambda a, b: ~a, "bitwise_not_{}"), (lambda a, b: a << b, "lshift_{}"), (lambda a, b: a >> b, "rshift_{}"),
    (lambda a, b: a // b, "div_floor_{}"), (lambda a, b: a % b, "remainder_{}"), (lambda a, b: a ** 2, "pow"),
    (lambda a, b: tt.maximum(a, b), "maximum_{}"), (lambda a, b: a.sign(), "sign_{}"),
    (lambda a, b: a.relu(), "clamp_min_scalar_{}"), (lambda a, b: a.max(), "max_all"),
    (lambda a, b: a.min(), "min_all"), (lambda a, b: a.max(0), "max_{}"), (lambda a, b: a.amax(), "max_values_{}"),
    (lambda a, b: a.amin(0), "min_values_{}"), (lambda a, b: a.argmax(), "argmax_{}"),
    (lambda a, b: a.argmin(), "argmin_{}"), (lambda a, b: tt.aminmax(a), "aminmax_{}"),
    (lambda a, b: a.sum(dtype=a.dtype), "sum_{}"), (lambda a, b: a.prod(dtype=a.dtype), "prod_out_{}"),
    (lambda a, b: a.count_nonzero(), "nonzero_count_{}"), (lambda a, b: tt.hash_tensor(a), "xor_sum_{}"),
    # the ordering ops (an unsigned order the kernels would not keep), refused by torch
    (lambda a, b: a.topk(1), "topk_{}"), (lambda a, b: a.kthvalue(1), "kthvalue_{}"),
    (lambda a, b: a.median(), "median_{}"), (lambda a, b: a.nanmedian(0), "median_{}"), (lambda a, b: a.mode(), "mode_{}"),
    (lambda a, b: a.cummax(0), "cummax_{}"), (lambda a, b: a.cummin(0), "cummin_{}"),
    (lambda a, b: a.cumsum(0, dtype=a.dtype), "cumsum_out_{}"), (lambda a, b: a.cumprod(0, dtype=a.dtype), "cumprod_out_{}"),
    (lambda a, b: tt.searchsorted(a, b), "searchsorted_out_{}"), (lambda a, b: tt.bucketize(b, a), "searchsorted_out_{}"),
    (lambda a, b: tt.isin(a, b), "isin_default_{}"), (lambda a, b: a.clamp(0, 1), "clamp_scalar_{}"),
    (lambda a, b: a.clamp(min=1), "clamp_min_scalar_{}"), (lambda a, b: a.clamp_max(1), "clamp_max_scalar_{}"),
    (lambda a, b: a.clone().clamp_(0, 1), "clamp_scalar_{}"),
    # copies and index ops torch 2.13 has no kernel of for them (where it has, they run: cat, clone, a[idx] ...)
    (lambda a, b: a.flip(0), "flip_{}"), (lambda a, b: a.view(1, 3).tril(), "tril"), (lambda a, b: a.view(3, 1).triu(), "triu"),
    (lambda a, b: tt.arange(3, dtype=a.dtype, device=a.device), "arange_{}"), (lambda a, b: a.dot(b), "dot"),
    (lambda a, b: a.view(1, 3).trace(), "trace"), (lambda a, b: a.nonzero(), "nonzero_count_{}"),
    (lambda a, b: a.masked_fill(a == b, 1), "masked_fill"), (lambda a, b: a.masked_fill_(a == b, 1), "masked_fill"),
    (lambda a, b: a.masked_select(a == b), "masked_select"), (lambda a, b: a.bincount(), "bincount_{}"),
    (lambda a, b: a.index_select(0, tt.tensor([1], device=a.device)), "index_select"),
    (lambda a, b: a.gather(0, tt.tensor([1], device=a.device)), "scatter_gather_tensor_{}"),
    (lambda a, b: a.scatter(0, tt.tensor([1], device=a.device), b), "scatter_gather_tensor_{}"),
    (lambda a, b: a.index_put((tt.tensor([1], device=a.device),), b[:1]), "index_put"),
    (lambda a, b: a.__setitem__(tt.tensor([0, 1], device=a.device), 5), "index_put"),
    (lambda a, b: a.__setitem__(a == b, 5), "masked_fill"),
    (lambda a, b: a.histc(), "aminmax_{}"),
]


@pytest.mark.parametrize("u", UNSIGNED, ids=ids)
def test_ops_torch_refuses_raise_its_error(u):
    a, b = tt.tensor([3, 1, 4], dtype=u), tt.tensor([2, 7, 1], dtype=u)
    for call, kernel in REFUSED:
        name = kernel.format(dev(a))
        with pytest.raises(NotImplementedError, match=f"^\"{name}\" not implemented for '{u.type_name}'$"):
            call(a, b)
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
        a.mean()
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        a.var()


def test_save_load_round_trip_keeps_every_bit():
    tensors = {u.name: tt.tensor(full_range(u, (2, 3))) for u in UNSIGNED}
    buf = io.BytesIO()
    tt.save(tensors, buf)
    buf.seek(0)
    back = tt.load(buf)
    for name, t in tensors.items():
        assert back[name].dtype is t.dtype
        assert_close(back[name], t.cpu().numpy(), t.dtype)


@pytest.mark.parametrize("u", UNSIGNED, ids=ids)
def test_view_dtype_dlpack_and_array_interface_keep_the_bits(u):
    v = full_range(u, (4, 6))
    t = tt.tensor(v)
    assert_close(t.view(tt.uint8), v.view(np.uint8), tt.uint8)  # bit reinterpretation, as torch's view(dtype)
    signed = {tt.uint16: tt.int16, tt.uint32: tt.int32, tt.uint64: tt.int64}[u]
    assert_close(t.view(signed), v.view(NP[signed]), signed)
    assert_close(tt.tensor(v.view(NP[signed])).view(u), v, u)
    host = t.cpu()
    assert_close(np.from_dlpack(host), v, u)
    back = tt.from_dlpack(v)
    assert back.dtype is u
    assert_close(back, v, u)
    if t.is_cuda:
        assert t.__cuda_array_interface__["typestr"] == np.dtype(NP[u]).str

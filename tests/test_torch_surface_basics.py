"""PyTorch names a ported script expects at the top level: the legacy tensor type names
(``LongTensor`` ...), ``Tensor.type()``, ``finfo``/``iinfo``, the constants, ``can_cast``, the free
function forms of the view ops and ``divide``, and the factories' keywords (``size=``, ``layout=``,
``pin_memory=``, ``dims=``, ``non_blocking=``). Messages and values are torch 2.13's."""
import math

import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, NP, assert_close

TYPES = {"ByteTensor": tt.uint8, "CharTensor": tt.int8, "ShortTensor": tt.int16, "IntTensor": tt.int32,
         "LongTensor": tt.int64, "HalfTensor": tt.float16, "BFloat16Tensor": tt.bfloat16, "FloatTensor": tt.float32,
         "DoubleTensor": tt.float64, "BoolTensor": tt.bool}


@pytest.mark.parametrize("name", list(TYPES))
def test_tensor_type_names_construct_and_check(name):
    T, d = getattr(tt, name), TYPES[name]
    assert T.dtype is d and T.is_cuda is False and repr(T) == f"<class 'tritensor.{name}'>"
    x = T([1, 0])
    assert type(x) is tt.Tensor and x.dtype is d and x.device.type == "cpu" and x.tolist() in ([1, 0], [True, False])
    assert isinstance(x, T) and isinstance(x, tt.Tensor)
    assert not isinstance(x.to(tt.float32 if d is not tt.float32 else tt.float64), T) and not isinstance(3, T)
    e = T(2, 3)  # uninitialised, of that shape
    assert e.shape == (2, 3) and e.dtype is d
    assert T(tt.Size([4])).shape == (4,) and T().shape == (0,) and T((1, 0)).tolist() in ([1, 0], [True, False])
    assert T(x) is not x and T(x).data_ptr() == x.data_ptr()  # a tensor of the same type is shared
    assert x.cpu().type() == f"tritensor.{name}" and tt.zeros(1).type(T).dtype is d
    assert tt.zeros(1).type(f"torch.{name}").dtype is d and tt.zeros(1).type(f"tritensor.{name}").dtype is d


def test_tensor_type_errors_and_annotations():
    def f(x: tt.LongTensor) -> tt.FloatTensor:  # usable in annotations, as torch's
        return x.float()

    assert f(tt.LongTensor([1])).dtype is tt.float32
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension -1: \[-1\]"):
        tt.FloatTensor(-1)
    with pytest.raises(TypeError, match=r"new\(\): data must be a sequence \(got float\)"):
        tt.FloatTensor(2.5)
    with pytest.raises(TypeError, match="expected tritensor.LongTensor"):
        tt.LongTensor(tt.tensor([1.0]))
    with pytest.raises(ValueError, match="invalid type: 'foo'"):
        tt.zeros(1).type("foo")
    assert tt.zeros(2).type(tt.int16).dtype is tt.int16 and tt.zeros(2).cpu().type() == "tritensor.FloatTensor"
    assert tt.tensor([1]).cpu().type() == "tritensor.LongTensor"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_finfo_matches_numpy_and_torch(dtype):
    info = ml_dtypes.finfo(NP[dtype]) if dtype is tt.bfloat16 else np.finfo(NP[dtype])
    fi = tt.finfo(dtype)
    assert fi.bits == 8 * dtype.itemsize and fi.dtype == dtype.name
    assert fi.eps == float(info.eps) and fi.max == float(info.max) and fi.min == float(info.min)
    assert fi.tiny == fi.smallest_normal == float(info.smallest_normal)
    assert fi.resolution == {tt.float16: 0.001, tt.bfloat16: 0.01, tt.float32: 1e-06, tt.float64: 1e-15}[dtype]
    assert repr(tt.finfo()) == ("finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, "
                                "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)")  # torch's text


def test_iinfo_and_wrong_kinds():
    for d in (tt.uint8, tt.int8, tt.int16, tt.int32, tt.int64):
        ii = tt.iinfo(d)
        assert (ii.min, ii.max, ii.bits, ii.dtype) == (int(np.iinfo(NP[d]).min), int(np.iinfo(NP[d]).max),
                                                       8 * d.itemsize, d.name)
    assert repr(tt.iinfo(tt.uint8)) == "iinfo(min=0, max=255, dtype=uint8)"
    with pytest.raises(TypeError, match=r"finfo\(\) requires a floating point input type"):
        tt.finfo(tt.int32)
    with pytest.raises(TypeError, match=r"iinfo\(\) requires an integer input type"):
        tt.iinfo(tt.float32)
    with pytest.raises(TypeError, match="tritensor.bool is not supported by tritensor.iinfo"):
        tt.iinfo(tt.bool)


def test_constants_and_can_cast():
    assert tt.pi == math.pi and tt.e == math.e and tt.inf == math.inf and math.isnan(tt.nan) and tt.newaxis is None
    assert tt.zeros(2, 3)[:, tt.newaxis].shape == (2, 1, 3)
    assert not tt.can_cast(tt.float32, tt.int32) and tt.can_cast(tt.int32, tt.uint8)
    assert not tt.can_cast(tt.int8, tt.bool) and tt.can_cast(tt.bool, tt.uint8)
    assert repr(tt.strided) == "tritensor.strided"


def test_function_forms_match_numpy():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = tt.tensor(a)
    assert_close(tt.transpose(x, 0, 2).cpu().numpy(), a.transpose(2, 1, 0), tt.float32)
    assert_close(tt.swapaxes(x, 0, 1).cpu().numpy(), np.swapaxes(a, 0, 1), tt.float32)
    assert_close(tt.swapdims(x, 1, 2).cpu().numpy(), np.swapaxes(a, 1, 2), tt.float32)
    assert_close(x.swapdims(0, 2).cpu().numpy(), np.swapaxes(a, 0, 2), tt.float32)
    assert_close(tt.permute(x, (2, 0, 1)).cpu().numpy(), a.transpose(2, 0, 1), tt.float32)
    assert_close(tt.narrow(x, 2, 1, 2).cpu().numpy(), a[:, :, 1:3], tt.float32)
    assert_close(tt.moveaxis(x, 0, 2).cpu().numpy(), np.moveaxis(a, 0, 2), tt.float32)
    for got, want in zip(tt.chunk(x, 2, dim=2), np.array_split(a, 2, axis=2)):
        assert_close(got.cpu().numpy(), want, tt.float32)
    for got, want in zip(tt.split(x, [1, 2], 1), np.split(a, [1], axis=1)):
        assert_close(got.cpu().numpy(), want, tt.float32)
    assert [t.shape for t in tt.split(x, 3, dim=2)] == [(2, 3, 3), (2, 3, 1)]
    assert len(tt.chunk(x, 3)) == 2  # torch's chunk: ceil(2 / 3) = 1 per chunk, 2 chunks
    i = tt.tensor(np.arange(6).reshape(2, 3))
    assert_close(tt.divide(i, 4).cpu().numpy(), np.arange(6).reshape(2, 3) / 4, tt.float32)
    assert_close(i.divide(4).cpu().numpy(), np.arange(6).reshape(2, 3) / 4, tt.float32)
    assert_close(tt.true_divide(i, 4).cpu().numpy(), np.arange(6).reshape(2, 3) / 4, tt.float32)
    y = i.float()
    assert y.divide_(2) is y and y._version == 1
    with pytest.raises(TypeError, match="must be Tensor"):
        tt.split([1, 2], 1)


def test_function_forms_record_gradients():
    x = tt.tensor(np.arange(6, dtype=np.float64).reshape(2, 3), requires_grad=True)
    assert tt.autograd.gradcheck(lambda t: tt.permute(tt.transpose(t, 0, 1), (1, 0)) * t, (x,))
    assert tt.autograd.gradcheck(lambda t: tt.chunk(tt.narrow(t, 1, 0, 2), 2, 1)[1] * tt.divide(t, 3)[:, :1], (x,))
    assert tt.autograd.gradcheck(lambda t: tt.flip(tt.swapdims(t, 0, 1), dims=(0,)), (x,))


def test_factory_keywords():
    assert tt.zeros(size=(2, 3)).shape == (2, 3) and tt.ones(size=[2]).tolist() == [1.0, 1.0]
    assert tt.empty(size=(1, 2), dtype=tt.int16).shape == (1, 2) and tt.rand(size=(3,)).shape == (3,)
    assert tt.randn(2, layout=tt.strided).shape == (2,)
    r = tt.randint(5, size=(4,))
    assert r.shape == (4,) and r.dtype is tt.int64 and tt.randint(1, 5, size=(3,), dtype=tt.uint8).dtype is tt.uint8
    z = tt.zeros(2, layout=tt.strided, pin_memory=False, requires_grad=True)
    assert z.requires_grad and z.is_leaf
    f = tt.full_like(tt.zeros(2), 1, layout=tt.strided)
    assert f.tolist() == [1.0, 1.0]
    assert tt.zeros_like(f, layout=tt.strided).tolist() == [0.0, 0.0] and tt.empty_like(f, layout=None).shape == (2,)
    assert tt.arange(3, layout=tt.strided).tolist() == [0, 1, 2] and tt.tensor([1], pin_memory=False).tolist() == [1]
    with pytest.raises(TypeError, match="got multiple values for argument 'size'"):
        tt.zeros(2, size=(2,))
    with pytest.raises(TypeError, match="got multiple values for argument 'size'"):
        tt.randint(1, 5, (2,), size=(2,))
    with pytest.raises(TypeError, match="argument 'layout' must be tritensor.layout"):
        tt.zeros(2, layout="sparse")
    x = tt.tensor(np.arange(6.0).reshape(2, 3))
    assert_close(tt.flip(x, dims=(0,)).cpu().numpy(), np.arange(6.0).reshape(2, 3)[::-1], tt.float32)
    assert_close(x.flip(dims=[1]).cpu().numpy(), np.arange(6.0).reshape(2, 3)[:, ::-1], tt.float32)
    assert_close(x.mean(1, keepdims=True).cpu().numpy(), np.arange(6.0).reshape(2, 3).mean(1, keepdims=True),
                 tt.float32)
    assert x.to(tt.float64, non_blocking=True).dtype is tt.float64
    assert x.to(x.device, tt.float64, True, True).dtype is tt.float64  # to(device, dtype, non_blocking, copy)
    y = x.to(x.device, x.dtype, False, True)
    assert y is not x and y.data_ptr() != x.data_ptr()
    if x.device.type == "cuda":
        assert x.cuda(non_blocking=True) is x and x.cpu().cuda(non_blocking=True).device.type == "cuda"


def test_cuda_tensor_type_names():
    T = tt.cuda.FloatTensor
    assert T.dtype is tt.float32 and T.is_cuda and repr(T) == "<class 'tritensor.cuda.FloatTensor'>"
    assert tt.cuda.ByteTensor.dtype is tt.uint8 and tt.cuda.BoolTensor.dtype is tt.bool and T is not tt.FloatTensor
    if not tt.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            T(2)
        return
    x = T(2, 3)
    assert x.shape == (2, 3) and x.device.type == "cuda" and isinstance(x, T) and not isinstance(x, tt.FloatTensor)
    assert x.type() == "tritensor.cuda.FloatTensor" and not isinstance(x.cpu(), T)
    assert tt.cuda.LongTensor([1, 2]).cpu().tolist() == [1, 2]
    assert tt.zeros(2).cpu().type("torch.cuda.IntTensor").device.type == "cuda"
    with pytest.raises(RuntimeError, match="legacy constructor expects device type: cuda"):
        T(2, device="cpu")


def test_tensor_called_as_torchs_legacy_constructor():
    """``torch.Tensor(data)`` / ``Tensor(*sizes)`` / ``Tensor()`` build a tensor of the default dtype, as
    torch's legacy constructor does (old scripts and pytorch/examples' generate.py write them); core's own
    constructions, which pass a storage, are untouched."""
    a = tt.Tensor([[3]])
    assert type(a) is tt.Tensor and a.dtype is tt.float32 and a.tolist() == [[3.0]]
    assert tt.Tensor(2, 3).shape == (2, 3) and tt.Tensor(tt.Size([4])).shape == (4,)
    assert tt.Tensor().shape == (0,) and tt.Tensor(np.array([1.5, 2.5])).tolist() == [1.5, 2.5]
    x = tt.ones(2)
    y = tt.Tensor(x)  # the same data, as torch's alias
    y[0] = 5
    assert x.tolist() == [5.0, 1.0]
    with pytest.raises(TypeError, match=r"expected tritensor\.(cuda\.)?FloatTensor"):  # on the default device
        tt.Tensor(tt.ones(2, dtype=tt.int64))
    with pytest.raises(RuntimeError, match="negative dimension"):
        tt.Tensor(2, -1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtype'"):
        tt.Tensor([1], dtype=tt.float64)

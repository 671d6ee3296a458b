"""stft and istft (core/ops/spectral.py) against float64 NumPy (np.fft.rfft/fft of framed, windowed,
padded signals) over fp32/fp64, odd and even n_fft, batch dims, layouts and the options; the
round trip; torch's errors and warning; the gradchecks."""
import warnings
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import check_layout, make
from tolerances import assert_close


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _reference(sig, n_fft, hop, win, window, center, pad_mode, normalized, onesided):
    """np.fft of each frame: the signal padded as torch, framed, windowed (zero-padded to n_fft)."""
    sig = np.atleast_2d(sig)
    w = np.ones(win) if window is None else window
    left = (n_fft - win) // 2
    w = np.pad(w, (left, n_fft - win - left))
    if center:
        sig = np.pad(sig, ((0, 0), (n_fft // 2, n_fft // 2)), mode=pad_mode)
    n = 1 + (sig.shape[1] - n_fft) // hop
    frames = np.stack([sig[:, i * hop:i * hop + n_fft] * w for i in range(n)], 1)
    spec = np.fft.rfft(frames, axis=-1) if onesided else np.fft.fft(frames, axis=-1)
    if normalized:
        spec = spec / np.sqrt(n_fft)
    spec = spec.transpose(0, 2, 1)
    return np.stack([spec.real, spec.imag], -1)


# (n_fft, hop, win, window?, center, pad_mode, normalized, onesided)
OPTIONS = [(8, 2, 8, True, True, "reflect", False, True), (7, 3, 7, True, True, "constant", True, True),
           (9, 4, 6, False, False, "reflect", False, False), (6, 6, 5, True, True, "reflect", True, False)]


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64], ids=str)
@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_stft_matches_numpy_fft(dtype, options):
    n_fft, hop, win, has_window, center, pad_mode, normalized, onesided = options
    for shape, layout in (((23,), "contiguous"), ((3, 29), "transposed" if dtype == tt.float32 else "sliced")):
        x, r = make(shape, dtype, layout, RNG.standard_normal)
        check_layout(x, layout)
        w = RNG.random(win) if has_window else None
        wt = None if w is None else tt.tensor(w.astype(np.float32 if dtype == tt.float32 else np.float64))
        wr = None if w is None else wt.numpy().astype(np.float64)
        with pytest.warns(UserWarning, match="stft with return_complex=False is deprecated"):
            got = tt.stft(x, n_fft, hop_length=hop, win_length=win, window=wt, center=center, pad_mode=pad_mode,
                          normalized=normalized, onesided=onesided, return_complex=False)
        ref = _reference(r, n_fft, hop, win, wr, center, pad_mode, normalized, onesided)
        ref = ref[0] if x.ndim == 1 else ref
        assert tuple(got.shape) == ref.shape
        assert_close(got, ref, dtype, "accumulate", k=n_fft)


def test_stft_defaults_method_and_istft_round_trip():
    sig = RNG.standard_normal((2, 40))
    x = tt.tensor(sig)
    w = tt.hann_window(16, dtype=tt.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = x.stft(16, window=w, return_complex=False)  # hop n_fft // 4, centred, reflected
        ref = _reference(sig, 16, 4, 16, w.numpy(), True, "reflect", False, True)
        assert_close(spec, ref, tt.float64, "accumulate", k=16)
        for kwargs in ({}, {"length": 40}, {"length": 45}):
            back = tt.istft(spec, 16, window=w, **kwargs)
            # past the signal: the reconstruction of the reflected padding, as torch's
            expected = np.pad(sig, ((0, 0), (8, 8)), mode="reflect")[:, 8:8 + kwargs.get("length", 40)]
            assert_close(back, expected, tt.float64, "accumulate", k=16)
        one = tt.tensor(sig[0].astype(np.float32))
        spec1 = tt.stft(one, 10, hop_length=3, window=tt.hann_window(10), normalized=True, onesided=False,
                        return_complex=False)
        back1 = spec1.istft(10, hop_length=3, window=tt.hann_window(10), normalized=True, onesided=False, length=40)
        assert_close(back1, sig[0].astype(np.float32), tt.float32, "accumulate", k=10)


def test_stft_istft_errors_follow_torch():
    x = tt.tensor(RNG.standard_normal(20).astype(np.float32))
    with pytest.raises(RuntimeError, match="return_complex parameter be given for real inputs"):
        tt.stft(x, 8)
    with pytest.raises(RuntimeError, match="complex dtype"):
        tt.stft(x, 8, return_complex=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kwargs, msg in (({"n_fft": 30, "center": False}, "expected 0 < n_fft < 20, but got n_fft=30"),
                            ({"n_fft": 8, "hop_length": 0}, "expected hop_length > 0"),
                            ({"n_fft": 8, "win_length": 9}, "expected 0 < win_length <= n_fft"),
                            ({"n_fft": 8, "window": tt.ones(7)}, "window tensor of size equal to win_length=8")):
            with pytest.raises(RuntimeError, match=msg):
                tt.stft(x, return_complex=False, **kwargs)
        with pytest.raises(RuntimeError, match="expected a 1D or 2D tensor"):
            tt.stft(tt.ones(2, 2, 20), 8, return_complex=False)
        with pytest.raises(RuntimeError, match="expected a tensor of floating point"):
            tt.stft(tt.arange(20), 8, return_complex=False)
        with pytest.raises(NotImplementedError, match="Unrecognised padding mode bogus"):
            tt.stft(x, 8, pad_mode="bogus", return_complex=False)
        with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
            tt.stft([1.0] * 20, 8, return_complex=False)
        spec = tt.stft(x, 8, window=tt.hann_window(8), return_complex=False)
    with pytest.raises(RuntimeError, match="complex dtype"):
        tt.istft(spec, 8, return_complex=True)
    with pytest.raises(RuntimeError, match="n_fft / 2 \\+ 1"):
        tt.istft(spec, 10)
    with pytest.raises(RuntimeError, match="real form"):
        tt.istft(spec[..., 0], 8)
    with pytest.raises(RuntimeError, match="window overlap add min"):
        tt.istft(spec, 8, window=tt.hann_window(8), hop_length=8, center=False)


def test_stft_empty_batch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = tt.stft(tt.ones(0, 16), 8, return_complex=False)
    assert tuple(out.shape) == (0, 5, 9, 2)


def test_spectral_gradcheck():
    x = tt.tensor(RNG.standard_normal((2, 11)), requires_grad=True)
    w = tt.tensor(RNG.random(5), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tt.autograd.gradcheck(lambda a, b: tt.stft(a, 5, 2, window=b, return_complex=False), (x, w),
                                     fast_mode=True)
        spec = tt.stft(x.detach(), 6, 2, window=tt.hann_window(6, dtype=tt.float64), return_complex=False)
        spec.requires_grad_()
        assert tt.autograd.gradcheck(lambda s: tt.istft(s, 6, 2, window=tt.hann_window(6, dtype=tt.float64)),
                                     (spec,), fast_mode=True)


@pytest.mark.parametrize("dtype", [tt.float16, tt.bfloat16], ids=str)
def test_stft_low_precision(dtype):
    """fp16/bf16 (torch's CUDA stft takes them): the frames and the DFT basis are rounded to the dtype
    before the product, so each output errs by a few ulps of the sum of its terms' magnitudes:
    the elementwise "product_chain" bound with k = that sum (np.fft of |frames| at frequency 0)."""
    x, r = make((2, 24), dtype, "sliced", RNG.standard_normal)
    check_layout(x, "sliced")
    w = tt.hann_window(8, dtype=dtype)
    wr = w.to(tt.float64).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = x.stft(8, 3, window=w, return_complex=False)
    ref = _reference(r, 8, 3, 8, wr, True, "reflect", False, True)
    terms = _reference(np.abs(r), 8, 3, 8, wr, True, "reflect", False, True)[:, :1, :, :1]
    assert got.dtype == dtype
    assert_close(got, ref, dtype, "product_chain", k=np.broadcast_to(terms, ref.shape))

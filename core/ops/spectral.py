"""torch's short-time Fourier transforms, ``stft`` and ``istft``, over real tensors.

Why a module of its own, and why no FFT kernel: tritensor has no complex dtypes (see
tests/torch_names/not_provided.tsv), so the transforms work on torch's older real form, a trailing
dimension of 2 holding (real, imaginary). The DFT of every frame is one matmul against a cached
basis of cosines and sines (``n_fft`` by ``2 * n_freq``, built once per size, dtype and device in
float64 NumPy and rounded once): O(n_fft^2) per frame where an FFT is O(n_fft log n_fft), but on
tensor cores and for the sizes audio uses (up to 4096) the product is faster than a radix-2 kernel,
and it is a recorded op, so both transforms are differentiable with no derivative of their own.
Framing is ``Tensor.unfold`` (a view), centre padding an ``index_select`` of reflected positions
(or the signal placed into zeros by ``slice_scatter``), and ``istft``'s overlap-add an
``index_add`` of the frames, divided by the overlapped squared window.

Differences from torch: ``stft`` gives only the real form (``return_complex=False``, with torch's
deprecation warning); ``return_complex=True`` raises, naming the missing complex dtype. ``istft``
takes that real (..., n_freq, n_frames, 2) form, which torch 2.13 refuses (it wants
``torch.view_as_complex`` of it), and ``return_complex=True`` raises.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numbers
import warnings

import numpy as np

from ..tensor_base import TensorBase
from . import host_tensor

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

_DEPRECATED = ("stft with return_complex=False is deprecated. In a future pytorch release, stft will return complex "
               "tensors for all inputs, and return_complex=False will raise an error.\nNote: you can still call "
               "torch.view_as_real on the complex output to recover the old return format.")
_NO_COMPLEX = ("{op}: return_complex=True needs a complex dtype, which tritensor does not have; pass "
               "return_complex=False for the real form with a trailing dimension of 2 (real, imaginary)")

_BASES: dict = {}  # (kind, n_fft, onesided, dtype, device) -> basis tensor


def _basis(kind: str, n_fft: int, onesided: bool, dtype, device):
    """The DFT as a matrix, rounded once from float64: ``forward`` is (n_fft, 2 * n_freq), frames @ it
    giving (re, im) interleaved per frequency; ``inverse`` is (2 * n_freq, n_fft), the inverse DFT
    of (re, im) rows (onesided: the Hermitian half counted twice, the imaginary parts of the DC and
    Nyquist bins ignored, as NumPy's irfft)."""
    key = (kind, n_fft, onesided, dtype, str(device))
    if key not in _BASES:
        n_freq = n_fft // 2 + 1 if onesided else n_fft
        n = np.arange(n_fft)[:, None]
        k = np.arange(n_freq)[None, :]
        ang = 2 * np.pi * ((n * k) % n_fft) / n_fft
        if kind == "forward":
            b = np.stack([np.cos(ang), -np.sin(ang)], axis=-1).reshape(n_fft, 2 * n_freq)
        else:
            w = np.full(n_freq, 1.0)
            if onesided:
                w[1:] = 2.0
                if n_fft % 2 == 0:
                    w[-1] = 1.0
            re, im = np.cos(ang) * w / n_fft, -np.sin(ang) * w / n_fft
            if onesided:
                im[:, 0] = 0.0
                if n_fft % 2 == 0:
                    im[:, -1] = 0.0
            b = np.stack([re.T, im.T], axis=1).reshape(2 * n_freq, n_fft)
        _BASES[key] = host_tensor(b.astype(dtype.np), device)
    return _BASES[key]


def _describe(input, n_fft, hop, win, window, normalized, onesided, return_complex) -> str:
    w = "None" if window is None else f"Tensor{list(window.shape)}"
    return (f"stft(Tensor{list(input.shape)}, n_fft={n_fft}, hop_length={hop}, win_length={win}, window={w}, "
            f"normalized={int(bool(normalized))}, onesided={onesided}, return_complex={return_complex})")


def _int(v, name: str, op: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(v).__name__}")
    return int(v)


def _full_window(window, win: int, n_fft: int, dtype, device, describe):
    """The window as n_fft values: ones(win_length) when none is given, centred with zeros when shorter."""
    if window is None:
        w = host_tensor(np.ones(win, dtype=dtype.np), device)
    else:
        if not isinstance(window, TensorBase):
            raise TypeError(f"stft(): argument 'window' must be Tensor, not {type(window).__name__}")
        if window.ndim != 1 or window.shape[0] != win:
            raise RuntimeError(f"{describe}: expected a 1D window tensor of size equal to win_length={win}, but got "
                               f"window with size {list(window.shape)}")
        if window.device != device:
            raise RuntimeError(f"{describe}: expected the window on {device}, the input's device, got {window.device}")
        w = window.to(dtype)
    if win < n_fft:
        left = (n_fft - win) // 2
        zeros = host_tensor(np.zeros(n_fft, dtype=dtype.np), device)
        w = zeros.slice_scatter(w, 0, left, left + win)
    return w


def _pad(x, pad: int, mode: str):
    """``x`` (batch, length) padded by ``pad`` on both ends of its last dim: reflected positions
    gathered by index_select, or zeros joined on (recorded either way)."""
    length = x.shape[-1]
    if mode == "constant":
        return x.new_zeros((x.shape[0], length + 2 * pad)).slice_scatter(x, 1, pad, pad + length)
    idx = np.arange(-pad, length + pad)
    if mode == "reflect":
        if pad >= length:
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                               f"got: padding ({pad}, {pad}) at dimension 1 of input {list(x.shape)}")
        idx = np.abs(idx)
        idx = np.where(idx >= length, 2 * (length - 1) - idx, idx)
    elif mode == "replicate":
        idx = np.clip(idx, 0, length - 1)
    elif mode == "circular":
        idx = idx % length
    else:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    return x.index_select(-1, host_tensor(idx.astype(np.int64), x.device))


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center: bool = True, pad_mode: str = "reflect",
         normalized: bool = False, onesided=None, return_complex=None) -> Tensor:
    """The short-time Fourier transform of a real 1-D or (batch, length) signal: (…, n_freq, n_frames,
    2), torch's real form (``return_complex=False``). Each frame is windowed and multiplied by the
    cached DFT basis (one matmul for every frame of every batch)."""
    if not isinstance(input, TensorBase):
        raise TypeError(f"stft(): argument 'input' must be Tensor, not {type(input).__name__}")
    n_fft = _int(n_fft, "n_fft", "stft")
    hop = n_fft // 4 if hop_length is None else _int(hop_length, "hop_length", "stft")
    win = n_fft if win_length is None else _int(win_length, "win_length", "stft")
    if return_complex is None:
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                           "require that return_complex=True in a future PyTorch release.")
    if return_complex:
        raise RuntimeError(_NO_COMPLEX.format(op="stft"))
    describe = _describe(input, n_fft, hop, win, window, normalized, onesided, return_complex)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{describe} : expected a tensor of floating point or complex values")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{describe} : expected a 1D or 2D tensor")
    x = input.unsqueeze(0) if input.ndim == 1 else input
    if center:
        x = _pad(x, n_fft // 2, pad_mode)
    length = x.shape[-1]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"{describe} : expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"{describe} : expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{describe} : expected 0 < win_length <= n_fft, but got win_length={win}")
    w = _full_window(window, win, n_fft, x.dtype, x.device, describe)
    warnings.warn(_DEPRECATED, UserWarning, stacklevel=3)
    onesided = True if onesided is None else bool(onesided)
    n_freq = n_fft // 2 + 1 if onesided else n_fft
    frames = x.unfold(-1, n_fft, hop) * w  # (batch, n_frames, n_fft)
    spec = frames.matmul(_basis("forward", n_fft, onesided, x.dtype, x.device))
    if normalized:
        spec = spec * (n_fft ** -0.5)
    out = spec.reshape(x.shape[0], frames.shape[1], n_freq, 2).transpose(1, 2)
    return out.squeeze(0) if input.ndim == 1 else out


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center: bool = True, normalized: bool = False,
          onesided=None, length=None, return_complex: bool = False) -> Tensor:
    """The inverse of ``stft``, from its real (…, n_freq, n_frames, 2) form: each frame's inverse DFT
    (one matmul against the cached basis), windowed, overlap-added (``index_add``) and divided by
    the overlapped squared window (torch's least-squares inverse)."""
    if not isinstance(input, TensorBase):
        raise TypeError(f"istft(): argument 'input' must be Tensor, not {type(input).__name__}")
    if return_complex:
        raise RuntimeError(_NO_COMPLEX.format(op="istft"))
    n_fft = _int(n_fft, "n_fft", "istft")
    hop = n_fft // 4 if hop_length is None else _int(hop_length, "hop_length", "istft")
    win = n_fft if win_length is None else _int(win_length, "win_length", "istft")
    if not input.dtype.is_floating_point:
        raise RuntimeError("istft: expected a tensor of floating point values in the real (..., n_freq, n_frames, 2) "
                           f"form, got {input.dtype.name}")
    if input.ndim not in (3, 4) or input.shape[-1] != 2:
        raise RuntimeError("istft: expected the real form of a 2D or 3D complex tensor, (n_freq, n_frames, 2) or "
                           f"(batch, n_freq, n_frames, 2), but got {list(input.shape)}")
    if not 0 < n_fft:
        raise RuntimeError(f"istft: expected 0 < n_fft, but got n_fft={n_fft}")
    if hop <= 0 or hop > win:
        raise RuntimeError(f"istft: expected 0 < hop_length <= win_length, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"istft: expected 0 < win_length <= n_fft, but got win_length={win}")
    x = input.unsqueeze(0) if input.ndim == 3 else input
    batch, n_freq, n_frames = x.shape[0], x.shape[1], x.shape[2]
    onesided = (n_freq != n_fft) if onesided is None else bool(onesided)
    if onesided and n_freq != n_fft // 2 + 1:
        raise RuntimeError("istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {n_freq}")
    if not onesided and n_freq != n_fft:
        raise RuntimeError("istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft when onesided=False, but got {n_freq}")
    w = _full_window(window, win, n_fft, x.dtype, x.device, "istft")
    if normalized:
        x = x * (n_fft ** 0.5)
    spec = x.transpose(1, 2).reshape(batch, n_frames, 2 * n_freq)
    frames = spec.matmul(_basis("inverse", n_fft, onesided, x.dtype, x.device)) * w  # (batch, n_frames, n_fft)
    total = n_fft + hop * (n_frames - 1)
    pos = (np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :]).reshape(-1)
    pos_t = host_tensor(pos.astype(np.int64), x.device)
    zeros = host_tensor(np.zeros((batch, total), dtype=x.dtype.np), x.device)
    signal = zeros.index_add(1, pos_t, frames.reshape(batch, n_frames * n_fft))
    envelope = host_tensor(np.zeros(total, dtype=x.dtype.np), x.device).index_add(
        0, pos_t, (w * w).expand(n_frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0)
    if length is not None:
        end = start + _int(length, "length", "istft")
    end_in = min(end, total)
    envelope = envelope[start:end_in]
    if envelope.numel() and float(envelope.abs().min().item()) < 1e-11:
        raise RuntimeError("istft: window overlap add min: the squared window summed over overlapping frames is "
                           "below 1e-11 somewhere (choose a window and hop_length that satisfy the NOLA condition)")
    out = signal[:, start:end_in] / envelope
    if end > end_in:  # a requested length past the signal: zeros, as torch pads
        out = out.new_zeros((batch, end - start)).slice_scatter(out, 1, 0, end_in - start)
    return out.squeeze(0) if input.ndim == 3 else out

"""torch's root forms of nn ops (``torch.conv1d``, ``torch.embedding``, ``torch.dropout`` ...).

torch exposes these at its root with the native (ATen) signature, which often differs from
``nn.functional``'s: ``torch.embedding(weight, indices, padding_idx=-1, ...)`` takes the weight first,
the root losses take ``reduction`` as an int (0 none, 1 mean, 2 sum), ``torch.batch_norm`` takes the
affine before the running statistics and a ``cudnn_enabled`` flag, ``native_*`` return tuples. Users
porting code that calls them get the same arguments and results here. Each one translates its
arguments and calls the ``nn.functional`` implementation (or a core op), so no kernel is duplicated.
The package root exports them (they sit on nn, so they cannot live in core).
"""
from __future__ import annotations

import numbers

from ..autograd import no_grad
from ..core.creation import triu_indices
from ..core.factories import arange, full, ones, rand, zeros
from ..core.functional import cat, cdist, searchsorted
from ..core.linalg import svdvals, vector_norm as linalg_vector_norm
from ..core.ops.embedding import _host_indices, renorm_
from ..core.tensor import Tensor
from ..runtime.dtype import bool_, float32, float64, int64
from . import functional as F

__all__ = [
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "affine_grid_generator", "alpha_dropout", "alpha_dropout_",
    "avg_pool1d", "batch_norm", "bilinear", "binary_cross_entropy_with_logits", "celu", "celu_", "channel_shuffle",
    "constant_pad_nd", "conv1d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose3d", "convolution",
    "cosine_embedding_loss", "cosine_similarity", "ctc_loss", "dropout", "dropout_", "embedding",
    "embedding_bag", "embedding_renorm_", "feature_alpha_dropout", "feature_alpha_dropout_", "feature_dropout", "feature_dropout_",
    "frobenius_norm", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "group_norm", "hardshrink", "hinge_embedding_loss",
    "instance_norm", "kl_div", "margin_ranking_loss", "max_pool1d", "max_pool1d_with_indices", "max_pool3d",
    "native_batch_norm", "native_channel_shuffle", "native_dropout", "native_group_norm", "native_norm",
    "norm_except_dim", "nuclear_norm", "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle",
    "poisson_nll_loss", "prelu", "rms_norm", "rrelu", "rrelu_", "selu", "selu_", "threshold", "threshold_",
    "triplet_margin_loss",
]

_REDUCTIONS = ("none", "mean", "sum")  # ATen's Reduction enum, by value


def _reduction(reduction, fn: str) -> str:
    """ATen's int ``reduction`` as nn.functional's string. torch's native losses accept any int and
    read an unknown one as one of the three; here it is refused rather than guessed."""
    if isinstance(reduction, bool) or not isinstance(reduction, numbers.Integral):
        raise TypeError(f"{fn}(): argument 'reduction' must be int, not {type(reduction).__name__}")
    if not 0 <= reduction <= 2:
        raise ValueError(f"{fn}(): reduction must be 0 (none), 1 (mean) or 2 (sum), but got {reduction}")
    return _REDUCTIONS[reduction]


def _tensor(x, fn: str, name: str = "input", pos: int = 1) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not {type(x).__name__}")


def _stride(stride):
    """ATen's ``stride=[]`` (the default) means the kernel size, as nn.functional's None."""
    return None if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else stride


# ----- activations ----------------------------------------------------------------------------
def celu(input, alpha=1.0):
    """torch.celu(input, alpha=1.)."""
    return F.celu(input, alpha)


def celu_(input, alpha=1.0):
    """torch.celu_: celu in place."""
    return F.celu(input, alpha, inplace=True)


def selu(input):
    """torch.selu(input)."""
    return F.selu(input)


def selu_(input):
    """torch.selu_: selu in place."""
    return F.selu(input, inplace=True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """torch.rrelu(input, lower, upper, training, generator); the slopes are drawn from the default
    generator (a ``generator`` is refused, not ignored)."""
    _check_generator(generator, "rrelu")
    return F.rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """torch.rrelu_: rrelu in place."""
    _check_generator(generator, "rrelu_")
    return F.rrelu(input, lower, upper, training, inplace=True)


def _check_generator(generator, fn):
    if generator is not None:
        raise NotImplementedError(f"{fn}(): an explicit generator is not supported; the slopes are drawn from the "
                                  "default generator (seed it with tritensor.manual_seed)")


def threshold(input, threshold, value):
    """torch.threshold(input, threshold, value)."""
    return F.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    """torch.threshold_: threshold in place."""
    return F.threshold_(input, threshold, value)


def hardshrink(input, lambd=0.5):
    """torch.hardshrink(input, lambd=0.5)."""
    return F.hardshrink(input, lambd)


def prelu(input, weight):
    """torch.prelu(input, weight)."""
    return F.prelu(input, weight)


# ----- dropout: ATen's (input, p, train), all three required ------------------------------------
def dropout(input, p, train):
    """torch.dropout(input, p, train)."""
    return F.dropout(input, p, train)


def dropout_(input, p, train):
    """torch.dropout_: dropout in place."""
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input, p, train):
    """torch.alpha_dropout(input, p, train)."""
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    """torch.alpha_dropout_: alpha_dropout in place."""
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input, p, train):
    """torch.feature_alpha_dropout(input, p, train): alpha dropout of whole (N, C) channels."""
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):
    """torch.feature_alpha_dropout_: feature_alpha_dropout in place."""
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def _check_p(p) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_dropout(input, p, train, inplace, fn):
    _tensor(input, fn)
    _check_p(p)
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not train or p == 0.0:
        return input
    # one draw per (N, C), for any rank >= 2 (dropout1d/2d/3d fix the rank)
    keep = rand(tuple(input.shape[:2]) + (1,) * (input.ndim - 2), device=input.device) >= p
    out = input * keep * (0.0 if p == 1.0 else 1.0 / (1.0 - p))
    return input.copy_(out) if inplace else out


def feature_dropout(input, p, train):
    """torch.feature_dropout(input, p, train): zero whole (N, C) channels of an input of rank >= 2."""
    return _feature_dropout(input, p, train, False, "feature_dropout")


def feature_dropout_(input, p, train):
    """torch.feature_dropout_: feature_dropout in place."""
    return _feature_dropout(input, p, train, True, "feature_dropout_")


def native_dropout(input, p, train):
    """torch.native_dropout(input, p, train) -> (output, mask), the mask the bool of kept elements.
    With ``train`` False the output is a copy and the mask all True; ``train`` None means training."""
    _tensor(input, "native_dropout")
    _check_p(p)
    if train is None or train:
        keep = rand(tuple(input.shape), device=input.device) >= p
        return input * keep * (0.0 if p == 1.0 else 1.0 / (1.0 - p)), keep
    return input.clone(), ones(tuple(input.shape), dtype=bool_, device=input.device)


# ----- normalization --------------------------------------------------------------------------
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """torch.batch_norm: ATen's order (affine before running statistics); ``cudnn_enabled`` picks a
    backend in torch and changes nothing here."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """torch.native_batch_norm -> (output, save_mean, save_invstd): the batch's mean and 1/sqrt(var +
    eps) per channel (float32; float64 for float64 input) in training, empty tensors in evaluation, as
    torch's."""
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    sd = float64 if input.dtype is float64 else float32
    if not training:
        empty = input.new_empty((0,), dtype=sd)
        return out, empty, empty
    dims = tuple(d for d in range(input.ndim) if d != 1)
    with no_grad():
        x = input.detach().to(sd)
        mean = x.mean(dims)
        invstd = (x.var(dims, correction=0) + eps).rsqrt()
    return out, mean, invstd


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    """torch.instance_norm: ATen's order (affine before running statistics)."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """torch.group_norm(input, num_groups, weight, bias, eps, cudnn_enabled)."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """torch.native_group_norm -> (output, mean, rstd), the statistics (N, group) in the input's dtype."""
    _tensor(input, "native_group_norm")
    if tuple(input.shape[:2]) != (N, C) or input.numel() != N * C * HxW:
        raise RuntimeError(f"Expected input to have {N * C * HxW} elements laid out as (N={N}, C={C}, HxW={HxW}), "
                           f"but got input of size {list(input.shape)}")
    out = F.group_norm(input, group, weight, bias, eps)
    with no_grad():
        x = input.detach().reshape((N, group, -1))
        acc = x.to(float64 if input.dtype is float64 else float32)
        mean = acc.mean(2)
        rstd = (acc.var(2, correction=0) + eps).rsqrt()
    return out, mean.to(input.dtype), rstd.to(input.dtype)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """torch.rms_norm(input, normalized_shape, weight=None, eps=None)."""
    return F.rms_norm(input, normalized_shape, weight, eps)


# ----- norms (torch's older root names) --------------------------------------------------------
def native_norm(input, p=2, dim=None, keepdim=False, dtype=None):
    """torch.native_norm(input, p=2), or (input, p, dim, keepdim, dtype): a vector norm."""
    return linalg_vector_norm(input, 2 if p is None else p, dim, keepdim, dtype=dtype)


def norm_except_dim(v, pow=2, dim=0):
    """torch.norm_except_dim(v, pow=2, dim=0): the ``pow``-norm over every dim but ``dim``, kept as
    size-1 dims (weight norm's); ``dim=-1`` is the norm of everything, a 0-d tensor."""
    _tensor(v, "norm_except_dim", "v")
    if dim == -1:
        return linalg_vector_norm(v, pow)
    if not 0 <= dim < max(v.ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-v.ndim}, {v.ndim - 1}], but got "
                         f"{dim})")
    others = tuple(d for d in range(v.ndim) if d != dim)
    return linalg_vector_norm(v, pow, others, True)


def frobenius_norm(input, dim, keepdim=False):
    """torch.frobenius_norm(input, dim, keepdim=False): the 2-norm over ``dim`` (torch's own
    deprecated name for linalg.vector_norm(input, 2, dim, keepdim))."""
    return linalg_vector_norm(input, 2, dim, keepdim)


def nuclear_norm(input, dim=None, keepdim=False):
    """torch.nuclear_norm(input, keepdim=False) of a 2-D input, or (input, dim, keepdim) over two dims."""
    if isinstance(dim, bool):  # torch.nuclear_norm(x, True): the keepdim overload
        dim, keepdim = None, dim
    _tensor(input, "nuclear_norm")
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError(f"Expected a tensor with 2 dimensions, but got a tensor with {input.ndim} "
                               f"dimension{'s' if input.ndim != 1 else ''} instead.")
        dim = (0, 1)
    d0, d1 = (d % input.ndim for d in dim) if input.ndim else (0, 0)
    if d0 == d1:
        raise RuntimeError(f"nuclear_norm(): dims must be different. Got ({dim[0]}, {dim[1]})")
    out = svdvals(input.movedim((d0, d1), (-2, -1))).sum(-1)  # the sum of the singular values
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out


# ----- pooling ----------------------------------------------------------------------------------
def adaptive_avg_pool1d(input, output_size):
    """torch.adaptive_avg_pool1d(input, output_size)."""
    return F.adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input, output_size):
    """torch.adaptive_max_pool1d(input, output_size) -> (output, indices)."""
    return F.adaptive_max_pool1d(input, output_size, True)


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    """torch.avg_pool1d; ``stride=[]`` (the default) is the kernel size."""
    return F.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch.max_pool1d; ``stride=[]`` (the default) is the kernel size."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch.max_pool1d_with_indices -> (output, indices)."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode, True)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch.max_pool3d; ``stride=[]`` (the default) is the kernel size."""
    return F.max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


# ----- convolution ----------------------------------------------------------------------------
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.conv1d (F's signature; ``padding`` may be 'valid' or 'same')."""
    return F.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.conv3d (F's signature; ``padding`` may be 'valid' or 'same')."""
    return F.conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """torch.conv_transpose1d (F's signature)."""
    return F.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """torch.conv_transpose3d (F's signature)."""
    return F.conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """torch.convolution: the 1-, 2- or 3-d (transposed) convolution ``weight``'s rank picks."""
    _tensor(input, "convolution")
    _tensor(weight, "convolution", "weight", 2)
    k = weight.ndim - 2
    if k not in _CONV:
        raise RuntimeError(f"convolution(): expected a 3-D, 4-D or 5-D weight, but got weight of size "
                           f"{list(weight.shape)}")
    if transposed:
        return _CONV_T[k](input, weight, bias, stride, padding, output_padding, groups, dilation)
    return _CONV[k](input, weight, bias, stride, padding, dilation, groups)


def conv_tbc(input, weight, bias, pad=0):
    """torch.conv_tbc: a 1-d convolution of time-batch-channel input (T, B, C_in) with a (K, C_in,
    C_out) weight and a (C_out,) bias, ``pad`` zeros each side of time -> (T + 2 pad - K + 1, B, C_out)."""
    _tensor(input, "conv_tbc")
    _tensor(weight, "conv_tbc", "weight", 2)
    _tensor(bias, "conv_tbc", "bias", 3)
    if input.ndim != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.ndim != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    if bias.ndim != 1:
        raise RuntimeError("Bias must be 1-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if weight.shape[2] != bias.shape[0]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    out = F.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, 1, pad)
    return out.permute(2, 0, 1)


def bilinear(input1, input2, weight, bias=None):
    """torch.bilinear(input1, input2, weight, bias=None)."""
    return F.bilinear(input1, input2, weight, bias)


# ----- losses: ATen's int reduction -------------------------------------------------------------
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    """torch.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)."""
    r = _reduction(reduction, "binary_cross_entropy_with_logits")
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=r, pos_weight=pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    """torch.cosine_embedding_loss(input1, input2, target, margin, reduction)."""
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction,
                                                                                        "cosine_embedding_loss"))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    """torch.hinge_embedding_loss(input, target, margin, reduction)."""
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


def kl_div(input, target, reduction=1, *, log_target=False):
    """torch.kl_div(input, target, reduction=1, *, log_target=False)."""
    return F.kl_div(input, target, reduction=_reduction(reduction, "kl_div"), log_target=log_target)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    """torch.margin_ranking_loss(input1, input2, target, margin, reduction)."""
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction,
                                                                                    "margin_ranking_loss"))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """torch.poisson_nll_loss(input, target, log_input, full, eps, reduction): all required."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction(reduction, "poisson_nll_loss"))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction=1):
    """torch.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction)."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction(reduction, "triplet_margin_loss"))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    """torch.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity)."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction, "ctc_loss"),
                      zero_infinity)


# ----- distances ------------------------------------------------------------------------------
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """torch.cosine_similarity(x1, x2, dim=1, eps=1e-8)."""
    return F.cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """torch.pairwise_distance(x1, x2, p=2., eps=1e-6, keepdim=False)."""
    return F.pairwise_distance(x1, x2, p, eps, keepdim)


def pdist(input, p=2.0):
    """torch.pdist(input, p=2.): the p-norm distance between each pair of the N rows of (N, M)
    ``input``, the upper triangle of cdist(input, input) row by row, N (N - 1) / 2 values."""
    _tensor(input, "pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    rows = triu_indices(n, n, 1, device=input.device)
    return cdist(input, input, p)[rows[0], rows[1]]


# ----- embedding --------------------------------------------------------------------------------
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """torch.embedding(weight, indices, padding_idx=-1, ...): the weight first; a negative
    ``padding_idx`` means none, as ATen's."""
    _tensor(weight, "embedding", "weight")
    _tensor(indices, "embedding", "indices", 2)
    pad = None if padding_idx is None or padding_idx < 0 else padding_idx
    return F.embedding(indices, weight, pad, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


_BAG_MODES = ("sum", "mean", "max")  # ATen's EmbeddingBagMode, by value


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """torch.embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
    include_last_offset, padding_idx) -> (output, offset2bag, bag_size, max_indices): the weight first,
    ``mode`` an int (0 sum, 1 mean, 2 max), 1-D ``indices`` cut into bags by ``offsets``. The three
    bookkeeping tensors are torch's CPU ones: offset2bag (each index's bag; empty for a plain sum),
    bag_size (non-padding indices per bag; zeros for sum), max_indices (the weight row of each max for
    max, bag_size for mean, zeros for sum), in the indices' dtype."""
    fn = "embedding_bag"
    _tensor(weight, fn, "weight")
    _tensor(indices, fn, "indices", 2)
    _tensor(offsets, fn, "offsets", 3)
    if isinstance(mode, bool) or not isinstance(mode, numbers.Integral) or not 0 <= mode <= 2:
        raise ValueError(f"embedding_bag(): mode must be 0 (sum), 1 (mean) or 2 (max), but got {mode!r}")
    if indices.ndim != 1:
        raise RuntimeError(f"embedding_bag(): expected 1-D indices with offsets, but got indices of dimension "
                           f"{indices.ndim}")
    pad = None if padding_idx is None or padding_idx < 0 else padding_idx
    out = F.embedding_bag(indices, weight, offsets, scale_grad_by_freq=scale_grad_by_freq, mode=_BAG_MODES[mode],
                          sparse=sparse, per_sample_weights=per_sample_weights,
                          include_last_offset=include_last_offset, padding_idx=pad)
    B, n, it = out.shape[0], indices.shape[0], indices.dtype
    with no_grad():
        bag = (searchsorted(offsets, arange(n, dtype=offsets.dtype, device=indices.device), right=True) - 1)
        bag = bag.clamp(0, max(B - 1, 0)).to(int64)
        offset2bag = bag.to(it) if (mode != 0 or pad is not None) else indices.new_zeros((0,))
        if mode == 0:
            zeros_b = zeros((B,), dtype=it, device=indices.device)
            return out, offset2bag, zeros_b, zeros_b.clone()
        valid = (indices != pad) if pad is not None else ones((n,), dtype=bool_, device=indices.device)
        bag_size = zeros((B,), dtype=int64, device=indices.device).index_add(0, bag, valid.to(int64)).to(it)
        if mode == 1:
            return out, offset2bag, bag_size, bag_size.clone()
        # max: the first index of each bag whose row reaches the bag's maximum, per column
        D = weight.shape[1]
        rows = weight.detach().index_select(0, indices.to(int64))
        hit = (rows == out.detach().index_select(0, bag)) & valid.unsqueeze(1)
        pos = arange(n, dtype=int64, device=indices.device).unsqueeze(1).expand(n, D)
        first = full((B, D), n, dtype=int64, device=indices.device).scatter_reduce(
            0, bag.unsqueeze(1).expand(n, D), pos.where(hit, n), "amin")
        padded = cat([indices.to(int64), zeros((1,), dtype=int64, device=indices.device)])  # an empty bag: 0
        max_indices = padded.index_select(0, first.reshape(-1)).reshape((B, D)).to(it)
    return out, offset2bag, bag_size, max_indices


def embedding_renorm_(weight, indices, max_norm, norm_type):
    """torch.embedding_renorm_: the rows of ``weight`` that ``indices`` picks whose ``norm_type``-norm
    exceeds ``max_norm`` scaled down to it, in place (not recorded); returns ``weight``."""
    _tensor(weight, "embedding_renorm_", "weight")
    _tensor(indices, "embedding_renorm_", "indices", 2)
    if weight.ndim != 2:
        raise RuntimeError(f"embedding_renorm_(): expected 2-D weight, but got {weight.ndim}-D")
    renorm_(weight, _host_indices(indices, weight.shape[0]), float(max_norm), float(norm_type))
    return weight


# ----- shape ------------------------------------------------------------------------------------
def channel_shuffle(input, groups):
    """torch.channel_shuffle(input, groups): (N, g, C/g, *) channels read as (N, C/g, g, *)."""
    _tensor(input, "channel_shuffle")
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral):
        raise TypeError(f"channel_shuffle(): argument 'groups' must be int, not {type(groups).__name__}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if input.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"sizes {list(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    return input.reshape((n, groups, c // groups) + rest).transpose(1, 2).reshape((n, c) + rest)


def native_channel_shuffle(input, groups):
    """torch.native_channel_shuffle: channel_shuffle."""
    return channel_shuffle(input, groups)


def constant_pad_nd(input, pad, value=0):
    """torch.constant_pad_nd(input, pad, value=0): F.pad in constant mode."""
    return F.pad(input, pad, "constant", value)


def pixel_shuffle(input, upscale_factor):
    """torch.pixel_shuffle(input, upscale_factor)."""
    return F.pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):
    """torch.pixel_unshuffle(input, downscale_factor)."""
    return F.pixel_unshuffle(input, downscale_factor)


# ----- sampling ---------------------------------------------------------------------------------
_INTERP = ("bilinear", "nearest", "bicubic")  # ATen's GridSamplerInterpolation, by value
_PADDING = ("zeros", "border", "reflection")  # ATen's GridSamplerPadding, by value


def _enum(v, names, what, fn):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < len(names):
        raise ValueError(f"{fn}(): {what} must be an int in [0, {len(names) - 1}] "
                         f"({', '.join(f'{i} {n}' for i, n in enumerate(names))}), but got {v!r}")
    return names[v]


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler: F.grid_sample with ATen's int modes (0 bilinear, 1 nearest, 2 bicubic;
    0 zeros, 1 border, 2 reflection)."""
    mode = _enum(interpolation_mode, _INTERP, "interpolation_mode", "grid_sampler")
    pmode = _enum(padding_mode, _PADDING, "padding_mode", "grid_sampler")
    return F.grid_sample(input, grid, mode, pmode, bool(align_corners))


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler_2d: grid_sampler of a 4-D input."""
    _tensor(input, "grid_sampler_2d")
    if input.ndim != 4:
        raise RuntimeError(f"grid_sampler_2d(): expected 4D input, but got input with sizes {list(input.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler_3d: grid_sampler of a 5-D input (bilinear is trilinear there)."""
    _tensor(input, "grid_sampler_3d")
    if input.ndim != 5:
        raise RuntimeError(f"grid_sampler(): expected 5D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(getattr(grid, 'shape', ()))}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def affine_grid_generator(theta, size, align_corners):
    """torch.affine_grid_generator(theta, size, align_corners): F.affine_grid."""
    return F.affine_grid(theta, list(size), bool(align_corners))

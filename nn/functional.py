"""``nn.functional``: the stateless forms of the layers, as ``torch.nn.functional``.

The entries the op table marks ``functional`` (linear, conv2d, the 2-D pools, layer_norm,
batch_norm, embedding, the fused losses ...) are generated here from it (``core/ops/table.py``), so
they take the one dispatch path like every op. The rest are compositions of ops, grouped by kind as
torch's documentation groups them, each kind in a module of its own that this one re-exports:

- ``functional_activations``: non-linear activations and the softmax family;
- ``functional_attention``: ``multi_head_attention_forward``, MultiheadAttention's forward;
- ``functional_dropout``: dropout, per element and per channel;
- ``functional_normalization``: group, instance and RMS norms, ``normalize``;
- ``functional_convolution``: 1-D and 3-D convolutions over the 2-D kernels, ``unfold``/``fold``;
- ``functional_pooling``: 1-D, 3-D and adaptive pooling;
- ``functional_vision``: padding, resizing, pixel shuffles, affine grids and grid sampling;
- ``functional_linear``, ``functional_distance``, ``functional_sparse``, ``functional_losses``:
  ``bilinear``; the distances; ``one_hot`` and ``embedding_bag``; the losses without a kernel.

``functional_checks`` holds the argument checks they share.
"""
from __future__ import annotations

from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.tensor import Tensor  # noqa: F401  (torch's F has Tensor too)

from . import functional_activations as _activations
from . import functional_attention as _attention
from . import functional_convolution as _convolution
from . import functional_distance as _distance
from . import functional_dropout as _dropout
from . import functional_linear as _linear
from . import functional_linear_ce as _linear_ce
from . import functional_losses as _losses
from . import functional_normalization as _normalization
from . import functional_pooling as _pooling
from . import functional_sparse as _sparse
from . import functional_vision as _vision
from .functional_activations import (celu, elu, elu_, gelu, glu, gumbel_softmax, hardshrink,  # noqa: F401
                                     hardsigmoid, hardswish, hardtanh, hardtanh_, leaky_relu, leaky_relu_,
                                     log_softmax, logsigmoid, mish, prelu, relu, relu6, rrelu, selu, sigmoid, silu,
                                     softmax, softmin, softplus, softshrink, softsign, tanh, tanhshrink, threshold,
                                     threshold_)
from .functional_attention import multi_head_attention_forward  # noqa: F401
from .functional_convolution import conv1d, conv3d, conv_transpose1d, conv_transpose3d, fold, unfold  # noqa: F401
from .functional_distance import cosine_similarity, pairwise_distance  # noqa: F401
from .functional_dropout import (alpha_dropout, dropout, dropout1d, dropout2d, dropout3d,  # noqa: F401
                                 feature_alpha_dropout)
from .functional_linear import bilinear  # noqa: F401
from .functional_linear_ce import linear_cross_entropy  # noqa: F401
from .functional_losses import (cosine_embedding_loss, gaussian_nll_loss, huber_loss,  # noqa: F401
                                hinge_embedding_loss, margin_ranking_loss, multi_margin_loss, multilabel_margin_loss,
                                multilabel_soft_margin_loss, poisson_nll_loss, soft_margin_loss, triplet_margin_loss,
                                triplet_margin_with_distance_loss)
from .functional_normalization import (group_norm, instance_norm, local_response_norm, normalize,  # noqa: F401
                                       rms_norm)
from .functional_pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d,  # noqa: F401
                                 adaptive_max_pool1d, adaptive_max_pool1d_with_indices, adaptive_max_pool2d,
                                 adaptive_max_pool2d_with_indices, adaptive_max_pool3d,
                                 adaptive_max_pool3d_with_indices, avg_pool1d, avg_pool3d, fractional_max_pool2d,
                                 fractional_max_pool2d_with_indices, fractional_max_pool3d,
                                 fractional_max_pool3d_with_indices, lp_pool1d, lp_pool2d, lp_pool3d, max_pool1d,
                                 max_pool1d_with_indices, max_pool3d, max_pool3d_with_indices, max_unpool1d,
                                 max_unpool2d, max_unpool3d)
from .functional_sparse import embedding_bag, one_hot  # noqa: F401
from ..core.ops.scaled_mm import ScalingType, SwizzleType  # noqa: F401  (scaled_mm's recipe and layout enums)
from .functional_vision import (GRID_SAMPLE_INTERPOLATION_MODES, GRID_SAMPLE_PADDING_MODES,  # noqa: F401
                                affine_grid, grid_sample, interpolate, pad, pixel_shuffle, pixel_unshuffle, upsample,
                                upsample_bilinear, upsample_nearest)

__all__ = ["flatten", "assert_int_or_pair"]
for _kind in (_activations, _attention, _convolution, _distance, _dropout, _linear, _linear_ce, _losses, _normalization,
              _pooling, _sparse, _vision):
    __all__ += _kind.__all__
for _op in _table.OPS.values():
    if _op.functional:
        globals()[_op.name] = _function(_op, _op.name, numpy_names=False)
        __all__.append(_op.name)


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    """``input.flatten(start_dim, end_dim)``. torch's F has no ``flatten`` (torch has ``torch.flatten``
    and ``nn.Flatten``); tritensor's has had it from its first version, so it stays for its callers."""
    return input.flatten(start_dim, end_dim)


def assert_int_or_pair(arg, arg_name: str, message: str) -> None:
    """torch's helper: ``arg`` is an int or a pair, else AssertionError with ``message`` naming it."""
    if not (isinstance(arg, int) or len(arg) == 2):
        raise AssertionError(message.format(arg_name))

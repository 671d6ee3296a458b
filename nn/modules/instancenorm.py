"""``nn.InstanceNorm1d`` / ``InstanceNorm2d`` / ``InstanceNorm3d`` (and their lazy forms), in
torch's file: each (sample, channel) normalized over
its own spatial dims (``F.instance_norm``); ``affine`` adds torch's per-channel weight and bias
(``bias=False`` drops the bias), ``track_running_stats`` keeps running statistics used in eval,
as torch. The parameters and buffers are ``_BatchNorm``'s (torch's ``_NormBase``)."""
from __future__ import annotations

import warnings

from .. import functional as F
from .batchnorm import _BatchNorm, _LazyNormBase


class _InstanceNorm(_BatchNorm):
    _no_batch_dim = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, input) -> None:
        n = self._no_batch_dim
        if input.ndim not in (n, n + 1):
            raise ValueError(f"expected {n}D or {n + 1}D input (got {input.ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.ndim - self._no_batch_dim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False",
                          stacklevel=2)
        unbatched = input.ndim == self._no_batch_dim
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Over (N, C, L) or (C, L) inputs."""


class InstanceNorm2d(_InstanceNorm):
    """Over (N, C, H, W) or (C, H, W) inputs."""
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Over (N, C, D, H, W) or (C, D, H, W) inputs."""

    _no_batch_dim = 4


class _LazyInstanceNorm(_LazyNormBase, _InstanceNorm):
    def initialize_parameters(self, input) -> None:
        # the channels are dim 0 of an unbatched input
        if self.has_uninitialized_params() and input.ndim == self._no_batch_dim:
            input = input.unsqueeze(0)
        super().initialize_parameters(input)


class LazyInstanceNorm1d(_LazyInstanceNorm):
    """An InstanceNorm1d whose ``num_features`` comes from its first input, as torch.nn.LazyInstanceNorm1d."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm):
    """An InstanceNorm2d whose ``num_features`` comes from its first input, as torch.nn.LazyInstanceNorm2d."""

    cls_to_become = InstanceNorm2d
    _no_batch_dim = 3


class LazyInstanceNorm3d(_LazyInstanceNorm):
    """An InstanceNorm3d whose ``num_features`` comes from its first input, as torch.nn.LazyInstanceNorm3d."""

    cls_to_become = InstanceNorm3d
    _no_batch_dim = 4

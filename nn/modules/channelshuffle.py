"""``nn.ChannelShuffle``, in torch's file: ShuffleNet's channel shuffle, (N, g * c, ...) seen as
(N, g, c, ...) and transposed to (N, c, g, ...), a reshape and a copy that autograd records."""
from __future__ import annotations

from .module import Module


class ChannelShuffle(Module):
    """Divide the channels of (N, C, *) into ``groups`` and interleave them, as torch.nn.ChannelShuffle."""

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        g = self.groups
        if input.ndim < 3:
            raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                               f"sizes {list(input.shape)}")
        if g <= 0:
            raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{g}")
        C = input.shape[1]
        if C % g:
            raise RuntimeError(f"Number of channels must be divisible by groups. Got {C} channels and {g} groups.")
        lead, rest = input.shape[0], tuple(input.shape[2:])
        return input.reshape((lead, g, C // g) + rest).transpose(1, 2).reshape(tuple(input.shape))

    def extra_repr(self) -> str:
        return f"groups={self.groups}"

"""``nn.Fold`` and ``nn.Unfold``, in torch's file, over ``F.fold`` / ``F.unfold`` (sliding patches
summed back into an image, and taken out as columns)."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class Unfold(Module):
    """Extract sliding blocks (im2col): (N, C, H, W) -> (N, C kh kw, L), as torch.nn.Unfold."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, x):
        return F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """Sum sliding blocks back into an image (col2im): (N, C kh kw, L) -> (N, C, *output_size), overlaps added, as
    torch.nn.Fold."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")

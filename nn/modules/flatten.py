"""``nn.Flatten`` and ``nn.Unflatten``, in torch's file: Modules over ``Tensor.flatten`` and
``Tensor.unflatten``."""
from __future__ import annotations

from .module import Module


class Flatten(Module):
    """Flatten dims ``start_dim``..``end_dim`` into one (by default all but the batch dim), as torch.nn.Flatten."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split ``dim`` into ``unflattened_size``, as torch.nn.Unflatten; named dimensions (a str ``dim``) are refused
    with NotImplementedError."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, int):
            if not isinstance(unflattened_size, (tuple, list)) or not all(isinstance(n, int)
                                                                         for n in unflattened_size):
                raise TypeError("unflattened_size must be a tuple of ints, but found type "
                                f"{type(unflattened_size).__name__}")
        elif isinstance(dim, str):
            raise NotImplementedError("Unflatten: named dimensions are not supported")
        else:
            raise TypeError("invalid argument type for dim parameter")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"

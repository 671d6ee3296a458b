"""``parameters_to_vector`` / ``vector_to_parameters`` (torch.nn.utils): all parameters as one
flat vector, and back. The vector is built by writing each parameter into its slice (a private
stand-in for ``cat``); the writes are recorded ops, so the vector is differentiable with respect
to the parameters, as torch's."""
from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ...core.factories import zeros
from ...core.tensor import Tensor


def _check(parameters, what: str):
    if isinstance(parameters, Tensor):
        raise TypeError(f"{what}: expected an iterable of Tensors, got a Tensor")
    params = list(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"expected Tensor, but got: {type(p).__name__}")
    if params:
        dev = params[0].device
        for p in params:
            if p.device != dev:
                raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return params


def parameters_to_vector(parameters) -> Tensor:
    """One 1-D tensor holding every parameter, flattened, in order (differentiable)."""
    params = _check(parameters, "parameters_to_vector")
    if not params:
        raise RuntimeError("parameters_to_vector(): expected a non-empty iterable of Tensors")
    out = zeros(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
    pos = 0
    for p in params:
        n = p.numel()
        out[pos:pos + n] = p.reshape(-1)  # a recorded write: gradients flow back to p
        pos += n
    return out


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy consecutive slices of ``vec`` into the parameters (their ``.data``), in order."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    params = _check(parameters, "vector_to_parameters")
    total = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() != total:
        raise RuntimeError(f"vector_to_parameters(): vec must be 1-D with {total} elements, got shape "
                           f"{list(vec.shape)}")
    pos = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec.narrow(0, pos, n).reshape(p.shape))
            pos += n

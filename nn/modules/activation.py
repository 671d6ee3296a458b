"""The activation modules, as torch keeps them: ``ReLU GELU Softmax LogSoftmax Tanh Sigmoid SiLU
LeakyReLU ELU Softplus Mish Hardswish RReLU Softmin Softmax2d`` (each a thin Module over ``nn.functional`` with torch's
constructor arguments and ``extra_repr``) and ``MultiheadAttention``, which torch keeps here too.

``MultiheadAttention``: PyTorch's module, parameter names and forward semantics.

Why it exists beside ``F.scaled_dot_product_attention``: models (and state_dicts) written for
PyTorch use this module, so its parameters carry PyTorch's names (``in_proj_weight``,
``in_proj_bias``, or ``q_proj_weight``/``k_proj_weight``/``v_proj_weight`` when kdim/vdim differ
from embed_dim, and ``out_proj.weight``/``out_proj.bias``) and initialisation (xavier-uniform
projections, zero biases), and its forward is ``nn.functional.multi_head_attention_forward``
(``nn/functional_attention.py``), as torch's:

* inputs (L, N, E), or (N, L, E) with ``batch_first``, or unbatched (L, E);
* ``key_padding_mask`` (N, S) and ``attn_mask`` (L, S) or (N·num_heads, L, S): boolean masks
  mean True = *not* allowed (the opposite of SDPA's), float masks are added; both merge into one
  additive mask in the query's dtype;
* ``need_weights=False``: the fused attention kernel; ``need_weights=True``: the unfused path
  (scores, softmax, dropout, weights @ V) that returns the weights, averaged over heads unless
  ``average_attn_weights=False`` — as PyTorch does;
* ``is_causal`` is a hint that ``attn_mask`` is the causal mask: with no key_padding_mask and
  need_weights=False the mask is dropped and the kernel masks causally itself.

Not supported: ``add_bias_kv`` / ``add_zero_attn`` (a learned or zero key/value row concatenated
along the sequence): ``NotImplementedError`` at construction.
"""
from __future__ import annotations

import warnings

from ...core.factories import empty
from ...core.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module


class ReLU(Module):
    """max(0, x) elementwise, as torch.nn.ReLU (``inplace=True`` runs the in-place op)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        return F.relu(x, self.inplace)


class GELU(Module):
    """x * Phi(x), the Gaussian error linear unit, as torch.nn.GELU; ``approximate='tanh'`` uses the tanh
    approximation, anything but 'none'/'tanh' is refused with ValueError."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


def _legacy_softmax_dim(name: str, ndim: int) -> int:
    """torch's implicit dim for Softmax(dim=None): 0 for 0-, 1- and 3-d inputs, else 1 (with a warning)."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """exp(x) / sum(exp(x)) along ``dim``, as torch.nn.Softmax; ``dim=None`` picks torch's legacy implicit dim (0 for
    0-, 1- and 3-D input, else 1) with its deprecation warning."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _legacy_softmax_dim("softmax", input.ndim)
        return F.softmax(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax(x)) along ``dim``, computed stably by the log_softmax kernel, as torch.nn.LogSoftmax (the same
    legacy rule for ``dim=None``)."""

    def forward(self, input):
        dim = self.dim if self.dim is not None else _legacy_softmax_dim("log_softmax", input.ndim)
        return F.log_softmax(input, dim)


class Tanh(Module):
    """tanh(x) elementwise, as torch.nn.Tanh."""

    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    """1 / (1 + exp(-x)) elementwise, as torch.nn.Sigmoid."""

    def forward(self, input):
        return F.sigmoid(input)


class SiLU(Module):
    """x * sigmoid(x) (swish), as torch.nn.SiLU."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """x for x > 0, else ``negative_slope * x``, as torch.nn.LeakyReLU."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """x for x > 0, else ``alpha * (exp(x) - 1)``, as torch.nn.ELU."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > ``threshold``, as torch.nn.Softplus."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(Module):
    """x * tanh(softplus(x)), as torch.nn.Mish."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.mish(input, self.inplace)


class Hardswish(Module):
    """x * relu6(x + 3) / 6, as torch.nn.Hardswish."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardswish(input, self.inplace)


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads with torch.nn.MultiheadAttention's parameters, initialisation and forward
    (see the module docstring); ``add_bias_kv`` and ``add_zero_attn`` are refused with NotImplementedError."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported "
                                      "(the extra key/value row they concatenate along the sequence is not implemented)")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        kw = dict(device=device, dtype=dtype)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        for t, name in ((query, "query"), (key, "key"), (value, "value")):
            if not isinstance(t, Tensor):
                raise TypeError(f"MultiheadAttention.forward(): argument '{name}' must be Tensor, not {type(t).__name__}")
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise AssertionError(f"query, key and value should be 2-D (unbatched) or 3-D (batched) tensors of the same "
                                 f"rank, but got query {query.ndim}-D, key {key.ndim}-D and value {value.ndim}-D")
        # As torch's: a self-attention call (query is key is value) stays one tensor through the
        # layout changes, so the functional projects it once with the packed weight.
        if self.batch_first and batched:
            query, key, value = _same_views(query, key, value, lambda t: t.transpose(0, 1))
        if not batched:
            query, key, value = _same_views(query, key, value, lambda t: t.unsqueeze(1))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if not batched:
            return out.squeeze(1), (weights.squeeze(0) if weights is not None else None)
        return (out.transpose(0, 1) if self.batch_first else out), weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def _same_views(query, key, value, view):
    """``view`` of each of query, key and value, made once per distinct tensor, so that arguments that
    were the same tensor stay the same tensor."""
    q = view(query)
    k = q if key is query else view(key)
    v = k if value is key else (q if value is query else view(value))
    return q, k, v


# ----- the activations over nn/functional_activations.py: torch's constructors and reprs ------------------

class Threshold(Module):
    """x where x > ``threshold``, else ``value``, as torch.nn.Threshold."""

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class Hardtanh(Module):
    """clamp(x, ``min_val``, ``max_val``), as torch.nn.Hardtanh; the old ``min_value``/``max_value`` keywords still
    work, with torch's FutureWarning."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False, min_value=None,
                 max_value=None):
        super().__init__()
        if min_value is not None or max_value is not None:  # torch's old keyword names, with its warning
            warnings.warn("keyword argument `min_value`/`max_value` is deprecated and renamed to "
                          "`min_val`/`max_val`", FutureWarning, stacklevel=2)
            min_val = min_value if min_value is not None else min_val
            max_val = max_value if max_value is not None else max_val
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({max_val}) must be greater than min_val ({min_val})")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """min(max(0, x), 6), as torch.nn.ReLU6 (a Hardtanh from 0 to 6, its repr showing only ``inplace``)."""

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class _InplaceOnly(Module):
    """An activation whose only argument is ``inplace``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class SELU(_InplaceOnly):
    """scale * (max(0, x) + min(0, alpha * (exp(x) - 1))) with torch's fixed alpha and scale, as torch.nn.SELU."""

    def forward(self, input):
        return F.selu(input, self.inplace)


class Hardsigmoid(_InplaceOnly):
    """relu6(x + 3) / 6, as torch.nn.Hardsigmoid."""

    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class CELU(Module):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)), as torch.nn.CELU."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Hardshrink(Module):
    """x where |x| > ``lambd``, else 0, as torch.nn.Hardshrink."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """x - lambd for x > lambd, x + lambd for x < -lambd, else 0, as torch.nn.Softshrink."""

    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Tanhshrink(Module):
    """x - tanh(x), as torch.nn.Tanhshrink."""

    def forward(self, input):
        return F.tanhshrink(input)


class Softsign(Module):
    """x / (1 + |x|), as torch.nn.Softsign."""

    def forward(self, input):
        return F.softsign(input)


class LogSigmoid(Module):
    """log(sigmoid(x)), computed without overflow, as torch.nn.LogSigmoid."""

    def forward(self, input):
        return F.logsigmoid(input)


class GLU(Module):
    """a * sigmoid(b), a and b the two halves of the input along ``dim`` (its size must be even), as torch.nn.GLU."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """max(0, x) + a min(0, x) with a learnable ``a``: one, or one per channel (``num_parameters``)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)  # the module: reset_parameters has no argument named init

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Randomized leaky ReLU: in training a negative element's slope is drawn from U(lower, upper), in
    evaluation it is (lower + upper) / 2, as torch.nn.RReLU."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Softmin(Module):
    """softmax(-x) along ``dim``, as torch.nn.Softmin (``dim=None``: torch's legacy implicit dim, with its
    warning)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _legacy_softmax_dim("softmin", input.ndim)
        return F.softmin(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """softmax over the channels of (N, C, H, W) or (C, H, W) at each location, as torch.nn.Softmax2d."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)

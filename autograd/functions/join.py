"""Derivatives of the joining and reshaping copies (core entries: ``core/ops/join.py``; kernels:
``triton_kernels/join.py`` and the strided copy of ``cast.py``).

Each backward is the adjoint copy, written with recorded ops so double backward works:
``cat`` -> ``narrow`` per input, ``stack`` -> ``select``, ``flip`` -> ``flip``, ``roll`` -> ``roll``
by the opposite shift, ``repeat``/``tile`` -> a sum over the repeats, ``tril``/``triu`` -> the same
triangle of the gradient, ``diag`` -> ``diag`` (vector <-> diagonal). ``hstack``/``vstack``/
``movedim`` are recorded as the ops they are made of (``reshape`` + ``cat``, ``permute``).
``diagonal`` (a view) -> the gradient written into the diagonal of zeros.
"""
from __future__ import annotations

from ...core.ops import join as _j
from ...core.tensor import Tensor
from ..function import BuiltinFunction


class Cat(BuiltinFunction):
    """cat's derivative: each input gets its slice of the gradient along the joined dim (legacy empty 1-D
    inputs get none)."""
    @staticmethod
    def forward(ctx, dim, *tensors):
        out = _j.cat(list(tensors), dim)
        live = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
        ctx.d = dim % live[0].ndim if live else 0
        ctx.sizes = [None if (t.ndim == 1 and t.shape[0] == 0) else t.shape[ctx.d] for t in tensors]
        return out

    @staticmethod
    def backward(ctx, g):
        grads, start = [None], 0
        for n in ctx.sizes:
            if n is None:
                grads.append(None)
                continue
            grads.append(g.narrow(ctx.d, start, n))
            start += n
        return tuple(grads)


def cat(tensors, dim=0):
    """The recorder of cat: runs it as Cat, so autograd records it (torch's cat)."""
    return Cat.apply(dim, *_j._tensor_list(tensors, "cat"))  # the core entry's type errors first


class Stack(BuiltinFunction):
    """stack's derivative: each input gets its slice of the gradient along the new dim."""
    @staticmethod
    def forward(ctx, dim, *tensors):
        out = _j.stack(list(tensors), dim)
        ctx.d = dim % out.ndim
        return out

    @staticmethod
    def backward(ctx, g):
        return (None,) + tuple(g.select(ctx.d, i) for i in range(g.shape[ctx.d]))


def stack(tensors, dim=0):
    """The recorder of stack: runs it as Stack, so autograd records it (torch's stack)."""
    return Stack.apply(dim, *_j._tensor_list(tensors, "stack"))


def _atleast(t: Tensor, nd: int) -> Tensor:
    return t if t.ndim >= nd else t.reshape((1,) * (nd - t.ndim) + tuple(t.shape))


def hstack(tensors):
    """The recorder of hstack: runs it as a Cat of the inputs made at least 1-D, so autograd records it
    (torch's hstack)."""
    ts = [_atleast(t, 1) for t in _j._tensor_list(tensors, "hstack")]
    return cat(ts, _j.hstack_dim(ts))


def vstack(tensors):
    """The recorder of vstack: runs it as a Cat along dim 0 of the inputs made at least 2-D, so autograd
    records it (torch's vstack)."""
    return cat([_atleast(t, 2) for t in _j._tensor_list(tensors, "vstack")], 0)


class Flip(BuiltinFunction):
    """flip's derivative: the gradient flipped back along the same dims."""
    @staticmethod
    def forward(ctx, x, *dims):
        ctx.dims = dims
        return _j.flip(x, *dims)

    @staticmethod
    def backward(ctx, g):
        return g.flip(*ctx.dims)


class Roll(BuiltinFunction):
    """roll's derivative: the gradient rolled back by the negated shifts."""
    @staticmethod
    def forward(ctx, x, shifts, dims=None):
        ctx.shifts, ctx.dims = shifts, dims
        return _j.roll(x, shifts, dims)

    @staticmethod
    def backward(ctx, g):
        neg = tuple(-s for s in ctx.shifts) if isinstance(ctx.shifts, (tuple, list)) else -ctx.shifts
        return g.roll(neg, ctx.dims)


class Repeat(BuiltinFunction):
    """repeat's (and tile's) derivative: the gradient summed over the repeats of each input element."""
    @staticmethod
    def forward(ctx, x, *sizes):
        out = _j.repeat(x, *sizes)
        ctx.in_shape = x.shape
        return out

    @staticmethod
    def backward(ctx, g):
        lead = g.ndim - len(ctx.in_shape)
        n = (1,) * lead + tuple(ctx.in_shape)
        reps = [o // k if k else 0 for o, k in zip(g.shape, n)]
        if 0 in reps or 0 in n:  # an empty result or input: nothing flows back
            return g.new_zeros(ctx.in_shape)
        split = [v for r, k in zip(reps, n) for v in (r, k)]
        return g.reshape(split).sum(tuple(range(0, 2 * len(n), 2))).reshape(ctx.in_shape)


def repeat(input, *sizes):
    """The recorder of Tensor.repeat: runs it as Repeat, so autograd records it (torch's Tensor.repeat)."""
    return Repeat.apply(input, *sizes)


def tile(input, dims):
    """The recorder of tile: runs it as Repeat, so autograd records it (torch's tile, the dims padded with
    leading ones)."""
    dims = _j._ints(dims, "dims", "tile")
    return Repeat.apply(input, (1,) * (input.ndim - len(dims)) + dims)


class Triangle(BuiltinFunction):
    """tril's and triu's derivative: the same triangle of the gradient."""
    @staticmethod
    def forward(ctx, x, diagonal=0, upper=False):
        ctx.k, ctx.upper = diagonal, upper
        return (_j.triu if upper else _j.tril)(x, diagonal)

    @staticmethod
    def backward(ctx, g):
        return g.triu(ctx.k) if ctx.upper else g.tril(ctx.k)


class Diag(BuiltinFunction):
    """diag's derivative: a vector's gradient is the diagonal of the matrix gradient; a matrix's is the vector
    gradient placed on that diagonal (DiagScatter)."""
    @staticmethod
    def forward(ctx, x, diagonal=0):
        ctx.k, ctx.shape = diagonal, x.shape
        return _j.diag(x, diagonal)

    @staticmethod
    def backward(ctx, g):
        if len(ctx.shape) == 1:
            return g.diag(ctx.k)
        return DiagScatter.apply(g, ctx.shape, ctx.k)


class DiagScatter(BuiltinFunction):
    """zeros(shape) with its ``k``-th diagonal set to ``g``: the backward of taking a diagonal."""

    @staticmethod
    def forward(ctx, g, shape, k):
        ctx.k = k
        z = Tensor._empty(shape, g.dtype, g.device)
        z.fill_(0)
        if g.numel():
            _j.diagonal_view(z, k).copy_(g)
        return z

    @staticmethod
    def backward(ctx, gg):
        return gg.diag(ctx.k)


class Diagonal(BuiltinFunction):
    """diagonal's derivative: the gradient placed on the same diagonal of zeros (DiagonalScatter)."""
    _is_view = True

    @staticmethod
    def forward(ctx, x, offset=0, dim1=0, dim2=1):
        ctx.shape, ctx.args = x.shape, (offset, dim1, dim2)
        return _j.diagonal(x, offset, dim1, dim2)

    @staticmethod
    def backward(ctx, g):
        return DiagonalScatter.apply(g, ctx.shape, ctx.args)


class DiagonalScatter(BuiltinFunction):
    """zeros(shape) with ``diagonal(*args)`` set to ``g``; its own backward takes the diagonal again."""

    @staticmethod
    def forward(ctx, g, shape, args):
        ctx.args = args
        z = Tensor._empty(shape, g.dtype, g.device)
        z.fill_(0)
        if g.numel():
            _j.diagonal(z, *args).copy_(g)
        return z

    @staticmethod
    def backward(ctx, gg):
        return gg.diagonal(*ctx.args), None, None


class DiagEmbed(BuiltinFunction):
    """diag_embed: the gradient's diagonal (a recorded view), so double backward works."""

    @staticmethod
    def forward(ctx, x, offset=0, dim1=-2, dim2=-1):
        out = _j.diag_embed(x, offset, dim1, dim2)
        ctx.args, ctx.shape = (offset, dim1, dim2), x.shape
        return out

    @staticmethod
    def backward(ctx, g):
        d = g.diagonal(*ctx.args)
        return d.reshape(ctx.shape) if len(ctx.shape) == 0 else d


def column_stack(tensors):
    """The recorder of column_stack: runs it as a Cat along dim 1 of the inputs as columns, so autograd
    records it (torch's column_stack; torch's checks first)."""
    _j.stack_columns(tensors)  # torch's checks and errors; the columns are made below as recorded reshapes
    return cat([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors], 1)


def movedim(input, source, destination):
    """The recorder of movedim: runs it as a recorded permute, so autograd records it (torch's movedim)."""
    return input.permute(_j.movedim_perm(input.ndim, source, destination))


RECORD = {
    "cat": cat, "stack": stack, "hstack": hstack, "vstack": vstack, "column_stack": column_stack,
    "diag_embed": lambda input, offset=0, dim1=-2, dim2=-1: DiagEmbed.apply(input, offset, dim1, dim2),
    "flip": lambda input, *args, dims=None: Flip.apply(input, *(args if dims is None else (dims,))),
    "roll": lambda input, shifts, dims=None: Roll.apply(input, shifts, dims),
    "repeat": repeat, "tile": tile,
    "tril": lambda input, diagonal=0: Triangle.apply(input, diagonal, False),
    "triu": lambda input, diagonal=0: Triangle.apply(input, diagonal, True),
    "diag": lambda input, diagonal=0: Diag.apply(input, diagonal),
    "movedim": movedim,
    "diagonal": lambda input, offset=0, dim1=0, dim2=1: Diagonal.apply(input, offset, dim1, dim2),
}

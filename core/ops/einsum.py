"""``einsum``: an equation planned into sums, permutes, reshapes and batched matmuls.

No Python loop runs over elements: the equation is parsed once, then operands are contracted
left to right, two at a time. For a pair (A, B) with the subscripts still needed later (by the
output or by operands not yet contracted) called *kept*:

- subscripts only one side has and nobody needs are summed out of that side first;
- *batch* subscripts (both sides, kept), *left* (A only, kept), *right* (B only, kept) and
  *contracted* (both sides, not kept) are each merged into one dim, so the pair becomes
  ``bmm((batch, left, contracted), (batch, contracted, right))``;
- the result is unfolded back to ``batch + left + right`` subscripts.

A subscript repeated within one operand (``'ii->i'``, ``'bii->b'``) is first taken as a
``diagonal`` view. A single operand only needs its sums and a permute. Everything is written with
Tensor methods (``diagonal``, ``sum``, ``permute``, ``expand``, ``reshape``, ``bmm``, ``mul``), each a
dispatched op, so autograd records einsum piece by piece and autocast lowers its matmuls as it
would a user's. Broadcasting (``...`` and size-1 dims) follows PyTorch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import functools
import math
import string

from ...runtime import dtype as dt
from ..tensor_base import TensorBase

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

_LETTERS = set(string.ascii_letters)


def _parse(equation: str, operands):
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' must be str, not {type(equation).__name__}")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): more operands were provided than specified in the equation"
                         if len(operands) > len(terms) else
                         "einsum(): fewer operands were provided than specified in the equation")
    ell_dims = 0
    parsed = []
    for k, (term, t) in enumerate(zip(terms, operands)):
        if term.count("...") > 1 or "." in term.replace("...", ""):
            raise ValueError(f"einsum(): found '.' for operand {k} that is not part of any ellipsis")
        letters = term.replace("...", "")
        for c in letters:
            if c not in _LETTERS:
                raise ValueError(f"einsum(): invalid subscript given in the equation string: {c!r}. "
                                 "Subscripts must be in [a-zA-Z]")
        has_ell = "..." in term
        if (len(letters) != t.ndim) if not has_ell else (len(letters) > t.ndim):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(letters)}) does not match "
                               f"the number of dimensions ({t.ndim}) for operand {k}"
                               + ("" if has_ell else " and no ellipsis was given"))
        n_ell = t.ndim - len(letters) if has_ell else 0
        ell_dims = max(ell_dims, n_ell)
        parsed.append((term, n_ell))
    ell = [chr(0x100 + i) for i in range(ell_dims)]  # stand-ins for the broadcast dims, right-aligned

    def expand_term(term, n_ell):
        head, _, tail = term.partition("...")
        return list(head) + ell[ell_dims - n_ell:] + list(tail) if "..." in term else list(term)

    subs = [expand_term(term, n) for term, n in parsed]
    if arrow:
        if rhs.count("...") > 1 or "." in rhs.replace("...", ""):
            raise ValueError("einsum(): found '.' for output that is not part of any ellipsis")
        for c in rhs.replace("...", ""):
            if c not in _LETTERS:
                raise ValueError(f"einsum(): invalid subscript given in the equation string: {c!r}")
            if not any(c in s for s in subs):
                raise ValueError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                 "operand")
        if len(set(rhs.replace("...", ""))) != len(rhs.replace("...", "")):
            raise ValueError("einsum(): output subscript appears more than once in the output")
        out = expand_term(rhs, ell_dims) if "..." in rhs else list(rhs)
    else:  # implicit output: the broadcast dims, then every subscript seen exactly once, sorted
        counts = {}
        for s in subs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1 and c not in ell)
    return subs, out


def _diagonals(t, s, k):
    """Take the diagonal of every subscript repeated in operand ``k`` (it moves to the last dim)."""
    s = list(s)
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i = s.index(c)
        j = s.index(c, i + 1)
        if t.shape[i] != t.shape[j]:
            raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but the sizes don't match, "
                               f"{t.shape[i]} != {t.shape[j]}")
        t = t.diagonal(0, i, j)
        s = [x for n, x in enumerate(s) if n not in (i, j)] + [c]
    return t, s


def _sizes(subs, operands) -> dict:
    sizes = {}
    for s, t in zip(subs, operands):
        for c, n in zip(s, t.shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = n
            elif n != 1 and n != sizes[c]:
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes (original->remapped): "
                                   f"subscript {c!r} has sizes {sizes[c]} and {n}")
    return sizes


def _sum_out(t, s, keep):
    """Sum the subscripts of ``t`` not in ``keep``."""
    drop = tuple(i for i, c in enumerate(s) if c not in keep)
    if not drop:
        return t, s
    return t.sum(drop), [c for c in s if c in keep]


def _arrange(t, s, order, sizes):
    """``t`` (subscripts ``s``) permuted to ``order``; missing subscripts get size 1, then expanded."""
    for c in order:
        if c not in s:
            t, s = t.unsqueeze(t.ndim), s + [c]
    t = t.permute([s.index(c) for c in order])
    return t.expand([sizes[c] for c in order])


def _contract(a, sa, b, sb, keep, sizes):
    a, sa = _sum_out(a, sa, keep | set(sb))
    b, sb = _sum_out(b, sb, keep | set(sa))
    batch = [c for c in sa if c in sb and c in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    con = [c for c in sa if c in sb and c not in keep]
    n = lambda cs: math.prod(sizes[c] for c in cs)  # noqa: E731
    a3 = _arrange(a, sa, batch + left + con, sizes).reshape(n(batch), n(left), n(con))
    b3 = _arrange(b, sb, batch + con + right, sizes).reshape(n(batch), n(con), n(right))
    if a3.dtype.is_floating_point:
        r = a3.bmm(b3)
    else:  # bmm is floating point only: integer operands multiply and sum instead
        r = (a3.unsqueeze(3) * b3.unsqueeze(1)).sum(2)
    rs = batch + left + right
    return r.reshape([sizes[c] for c in rs]), rs


def einsum(equation, *operands) -> Tensor:
    """``einsum('bij,bjk->bik', a, b)``; operands may also be given as one list."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for k, t in enumerate(operands):
        if not isinstance(t, TensorBase):
            raise TypeError(f"einsum(): operand {k} must be a Tensor, not {type(t).__name__}")
    if not operands:
        raise ValueError("einsum(): must provide at least one operand")
    devs = {t.device for t in operands}
    if len(devs) > 1:
        a, b = sorted(devs, key=str)[:2]
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {a} and {b}!")
    subs, out = _parse(equation, operands)
    operands, subs = zip(*(_diagonals(t, s, k) for k, (t, s) in enumerate(zip(operands, subs))))
    sizes = _sizes(subs, operands)
    result = functools.reduce(dt.promote_types, (t.dtype for t in operands))
    ts = [t if t.dtype is result else t.to(result) for t in operands]
    t, s = ts[0], list(subs[0])
    for k in range(1, len(ts)):
        keep = set(out).union(*(subs[j] for j in range(k + 1, len(ts))))
        t, s = _contract(t, s, ts[k], list(subs[k]), keep, sizes)
    t, s = _sum_out(t, s, set(out))
    t = _arrange(t, s, out, sizes)
    return t if t.is_contiguous() or t.ndim == 0 else t.contiguous()

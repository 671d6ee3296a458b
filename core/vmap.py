"""``vmap`` (torch.vmap, torch.func.vmap): map a function of tensors over a dimension of its inputs.

torch batches by running the function once on BatchedTensors, each op of it applying a batching rule.
tritensor has no batched tensor, so this runs the function **once per slice** of the mapped dimension
and stacks the results along ``out_dims``: the same values (and, since every op is recorded, the same
gradients), at the cost of one call per slice. Everything torch checks before it runs is checked here,
with its messages: ``in_dims``/``out_dims`` against the structure of the inputs and outputs (tuples,
lists and dicts, as torch's pytrees), the mapped sizes, ``chunk_size``, and ``randomness``. For
``randomness="error"`` a random op is caught by the default generator's state moving during the first
slice; ``"same"`` replays the generator's state for every slice, so each draws the same numbers;
``"different"`` lets each slice draw its own. ``chunk_size`` is checked as torch checks it and has nothing
more to do: torch uses it to bound the memory of one batched call, and the loop already runs one slice
at a time. A mapped size of 0 runs the function once on a slice of
zeros only to learn the output's shape, and returns empty results of that shape.

Where the loop is looser than torch: a function may call ``.item()`` or branch on a slice's values,
which torch refuses inside vmap.
"""
from __future__ import annotations

import functools

from . import functional as F
from .factories import empty, zeros
from .generator import default_generator
from .tensor_base import TensorBase

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


# ----- a small pytree: tuples, lists and dicts of leaves, as torch.utils._pytree flattens them -------
def _flatten(tree) -> tuple:
    """(leaves, spec): spec rebuilds the structure from a list of leaves."""
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for item in tree:
            sub, spec = _flatten(item)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (type(tree), None, specs)
    if isinstance(tree, dict):
        leaves, specs = [], []
        for item in tree.values():
            sub, spec = _flatten(item)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (dict, list(tree.keys()), specs)
    return [tree], None


def _unflatten(leaves: list, spec):
    if spec is None:
        return leaves[0]
    kind, keys, specs = spec
    items, at = [], 0
    for n, sub in specs:
        items.append(_unflatten(leaves[at:at + n], sub))
        at += n
    if kind is dict:
        return dict(zip(keys, items))
    return tuple(items) if kind is tuple else list(items)


def _spec_str(spec) -> str:
    if spec is None:
        return "*"
    kind, keys, specs = spec
    inner = ", ".join(_spec_str(s) for _, s in specs)
    return f"TreeSpec({kind.__name__}, {keys}, [{inner}])"


def _broadcast_dims(dims, tree, what: str, head: str):
    """``dims`` (an int/None, or a structure matching a prefix of ``tree``'s) as one dim per leaf of ``tree``."""
    if dims is None or isinstance(dims, int):
        return [dims] * len(_flatten(tree)[0])
    if isinstance(dims, (tuple, list, dict)) and type(dims) is type(tree) and len(dims) == len(tree) and (
            not isinstance(dims, dict) or list(dims.keys()) == list(tree.keys())):
        out = []
        items = zip(dims.values(), tree.values()) if isinstance(dims, dict) else zip(dims, tree)
        for d, t in items:
            out += _broadcast_dims(d, t, what, head)
        return out
    raise ValueError(f"{head}: {what}_dims is not compatible with the structure of `{what}puts`. {what}_dims has "
                     f"structure {_spec_str(_flatten(dims)[1])} but {what}puts has structure {_spec_str(_flatten(tree)[1])}.")


def _name(func) -> str:
    return getattr(func, "__name__", repr(func))


def _check_dims_type(dims, what: str, head: str) -> None:
    leaves = _flatten(dims)[0] if isinstance(dims, (tuple, list, dict)) else [dims]
    if not all(d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in leaves):
        raise ValueError(f"{head}: expected `{what}_dims` to be int or a (potentially nested) tuple matching the "
                         f"structure of {what}puts, got: {type(dims)}.")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``vmap(func, in_dims=0, out_dims=0, randomness='error', *, chunk_size=None)``: a function that maps
    ``func`` over dimension ``in_dims`` of its inputs and stacks its outputs along ``out_dims``. It runs
    ``func`` once per slice (this module's docstring says why and what differs from torch)."""
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        name = _name(func)
        head = f"vmap({name}, in_dims={in_dims}, ...)(<inputs>)"
        if not (isinstance(in_dims, (int, tuple)) and not isinstance(in_dims, bool)):
            raise ValueError(f"{head}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
                             f"structure of inputs, got: {type(in_dims)}.")
        if not args:
            raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                             "trying to vmap over a function with no inputs. The latter is unsupported.")
        _check_dims_type(in_dims, "in", head)
        leaves, spec = _flatten(args)
        dims = _broadcast_dims(in_dims, args, "in", head)
        sizes = []
        for leaf, d in zip(leaves, dims):
            if d is None:
                continue
            if not isinstance(leaf, TensorBase):
                raise ValueError(f"{head}: Got in_dim={d} for an input but the input is of type {type(leaf)}. We "
                                 "cannot vmap over non-Tensor arguments, please use None as the respective in_dim")
            if not -leaf.dim() <= d < leaf.dim():
                raise ValueError(f"{head}: Got in_dim={d} for some input, but that input is a Tensor of "
                                 f"dimensionality {leaf.dim()} so expected in_dim to satisfy "
                                 f"-{leaf.dim()} <= in_dim < {leaf.dim()}.")
            sizes.append(leaf.shape[d])
        if not sizes:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): at least one input must be a Tensor "
                             "mapped over a dimension (in_dims was None for every input).")
        if len(set(sizes)) != 1:
            raise ValueError("vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes} for the mapped dimension")
        batch = sizes[0]

        def call(i, empty_batch=False):
            sliced = []
            for leaf, d in zip(leaves, dims):
                if d is None:
                    sliced.append(leaf)
                elif empty_batch:  # the batch is empty: a slice of the right shape, only to learn the output's
                    shape = leaf.shape[:d % leaf.dim()] + leaf.shape[d % leaf.dim() + 1:]
                    sliced.append(zeros(shape, dtype=leaf.dtype, device=leaf.device))
                else:
                    sliced.append(leaf.select(d, i))
            a = _unflatten(sliced, spec)
            return func(*a, **kwargs)

        state = default_generator.get_state() if randomness != "different" else None
        results = []
        for i in range(max(batch, 1)):
            if randomness == "same":
                default_generator.set_state(state)
            results.append(call(i, empty_batch=batch == 0))
            if i == 0 and randomness == "error" and not _same_state(state, default_generator.get_state()):
                raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use "
                                   "the 'same' or 'different' randomness flags on vmap or perform the randomness "
                                   "operation out of vmap")
        return _stack_outputs(results, batch, out_dims, name)

    return wrapped


def _unbatched(c, first) -> bool:
    """Whether a slice's output equals the first slice's (an out_dim of None asks for one value for all)."""
    if c is first:
        return True
    if isinstance(c, TensorBase) or isinstance(first, TensorBase):
        return (isinstance(c, TensorBase) and isinstance(first, TensorBase) and c.shape == first.shape
                and bool((c == first).all()))
    return c == first


def _same_state(a, b) -> bool:
    return bool((a == b).all())


def _stack_outputs(results: list, batch: int, out_dims, name: str):
    first_leaves, spec = _flatten(results[0])
    per_slice = [_flatten(r)[0] for r in results]
    ohead = f"vmap({name}, ..., out_dims={out_dims})(<inputs>)"
    _check_dims_type(out_dims, "out", ohead)
    dims = _broadcast_dims(out_dims, results[0], "out", ohead)
    outs = []
    for j, d in enumerate(dims):
        column = [leaves[j] for leaves in per_slice]
        if d is None:
            first = column[0]
            same = all(_unbatched(c, first) for c in column)
            if not same:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            outs.append(first)
            continue
        if not all(isinstance(c, TensorBase) for c in column):
            bad = next(c for c in column if not isinstance(c, TensorBase))
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(bad)}. Did you "
                             "mean to set out_dims= to None for output?")
        nd = column[0].dim() + 1
        if not -nd <= d < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})")
        if batch == 0:
            shape = list(column[0].shape)
            shape.insert(d % nd, 0)
            outs.append(empty(shape, dtype=column[0].dtype, device=column[0].device))
        else:
            outs.append(F.stack(column, d % nd))
    return _unflatten(outs, spec)


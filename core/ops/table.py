"""The op table: every public op of tritensor, declared once.

An :class:`Op` names the op, its core entry (``impl``: argument checks, output allocation, the
kernel launch; in ``core/ops/<family>.py``), its autocast category, and how it is exposed: as a
Tensor method, a ``tritensor.*`` function, an ``nn.functional.*`` function, under aliases, and as
Python operators. From this table, and nothing else, ``core/tensor.py`` generates Tensor's op
methods and operators when the class is created, ``core/functional.py`` the ``tritensor.*``
functions and ``nn/functional.py`` its entries; each of them is ``dispatch.call(op, ...)``, the
one path every call takes (``core/dispatch.py``). An op's derivative is found by its name in
``autograd/functions/__init__.py`` (``DERIVATIVES``), its tests by its name in
``tests/test_op_table.py``. How to add an op: CONTRIBUTING.md. Tensor's composite methods
(``flatten``, ``diff``, ``half`` ...: no ops, written with them) are listed here too, in
``COMPOSITE_METHODS``, so that ``core/tensor.py`` builds the whole class from this module.

Autocast categories, from PyTorch's CUDA autocast op lists (the AMP issue refines them):
  ``lower``    run in the autocast dtype (fp16/bf16): matmuls and convolutions
  ``fp32``     run in float32: ops whose range or accuracy suffers in low precision
               (exp, log, pow, sums, softmax, norms, losses)
  ``promote``  run in the widest dtype among the inputs: ops mixing several tensors
  ``none``     untouched: views, copies, comparisons, indexing, everything else
In-place forms (``exp_``) are ``none``: autocast never changes the dtype of a tensor written in place.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

from ...triton_kernels import elementwise as _k
from . import cdist, ctc, histc
from . import linalg_eig_svd, linalg_factor
from . import shape_more, stats_more, windows
from . import batch_norm_stats
from . import tensor_odds
from . import signal_more, spectral
from . import activation_methods
from . import grouped_mm
from . import scaled_mm
from . import (attention, batch_norm, bitwise, conv, copies, einsum, elementwise, embedding, index, join, layer_norm,
               loss, math_ops, matmul, orthogonalize, pool, random, reduce, rnn, scan, scatter, select, softmax, sort,
               views)

CATEGORIES = ("lower", "fp32", "promote", "none")


@dataclass(frozen=True)
class Op:
    """One op's declaration: its name, core entry and autocast category, and how it is exposed (method,
    function, nn.functional, aliases, Python operators, the op it is the in-place form of)."""
    name: str
    impl: object  # the core entry, called with the op's arguments
    autocast: str  # one of CATEGORIES
    method: bool = True  # Tensor.<name>
    function: bool = True  # tritensor.<name>
    functional: bool = False  # tritensor.nn.functional.<name>
    self_arg: int = 0  # the argument a method's ``self`` is (where(condition, input, other): 1)
    aliases: tuple = ()  # more names for the same method/function (clip for clamp)
    dunders: tuple = ()  # Python operators calling op(self, other): __add__
    rdunders: tuple = ()  # reflected operators calling op(other, self): __radd__
    inplace_of: str = ""  # for ``add_``: the op it is the in-place form of
    kernel: bool = True  # False for Tensor's autograd API (backward, hooks ...): no kernel, no autocast

    def __post_init__(self):
        if self.autocast not in CATEGORIES:
            raise ValueError(f"op {self.name}: autocast must be one of {CATEGORIES}, got {self.autocast!r}")


OPS: dict = {}

# PyTorch's argument parser takes NumPy's names for two arguments of its native functions and
# methods: ``axis`` for ``dim``, ``keepdims`` for ``keepdim`` (``x.sum(axis=1, keepdims=True)``).
# ``norm`` and ``unique`` are Python functions in torch, and so is all of ``nn.functional``: they don't.
NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}
_NO_NUMPY_NAMES = frozenset(("norm", "unique"))


def numpy_names(fn, name: str = "") -> dict:
    """{NumPy's name: torch's} for the arguments of ``fn`` (an op's core entry, or a composite) that
    have one; empty for most."""
    if name in _NO_NUMPY_NAMES:
        return {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    return {alias: real for alias, real in NUMPY_NAMES.items() if real in params}


def rename_numpy_keywords(kwargs: dict, names: dict, fn: str) -> dict:
    """``kwargs`` (a call's own dict) with NumPy's names replaced by torch's."""
    for alias, real in names.items():
        if alias in kwargs:
            if real in kwargs:
                raise TypeError(f"{fn}() got multiple values for argument '{real}' (as '{real}' and '{alias}')")
            kwargs[real] = kwargs.pop(alias)
    return kwargs


def accepts_numpy_names(fn):
    """A composite method or function (``tensor_split``, ``unbind`` ...) that takes ``axis``/``keepdims``
    too, as torch's native ones do."""
    names = numpy_names(fn, fn.__name__)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **(rename_numpy_keywords(kwargs, names, fn.__name__) if kwargs else kwargs))
    return wrapper


def _add(op: Op) -> Op:
    if op.name in OPS:
        raise ValueError(f"op {op.name} is declared twice")
    OPS[op.name] = op
    return op


def _with_inplace(name, impl, inplace_impl, autocast, *, function=True, aliases=(), dunders=(), rdunders=(),
                  idunders=(), inplace_function=False):
    """``name`` and its in-place form ``name_`` (a method, and a function too where torch has one:
    ``inplace_function``, as torch.exp_; category ``none``)."""
    _add(Op(name, impl, autocast, function=function, aliases=aliases, dunders=dunders, rdunders=rdunders))
    _add(Op(name + "_", inplace_impl, "none", function=inplace_function, aliases=tuple(a + "_" for a in aliases),
            dunders=idunders, inplace_of=name))


# ----- elementwise (core/ops/elementwise.py, triton_kernels/elementwise.py) -------------------
# Each op's record (triton_kernels/elementwise.py: SPECS) gives its autocast category, its Python
# operators and its aliases; the core module of its family makes its entries.
def _from_spec(name, entries):
    s = _k.SPEC[name]
    d = s.dunder  # "add": __add__, and for a reflected one __radd__ and __iadd__ too
    if not s.inplace:  # torch has no in-place form (signbit, fmax ...)
        _add(Op(name, entries[name][0], s.autocast, aliases=s.aliases, dunders=(f"__{d}__",) if d else ()))
        return
    _with_inplace(name, *entries[name], s.autocast, aliases=s.aliases, dunders=(f"__{d}__",) if d else (),
                  rdunders=(f"__r{d}__",) if s.reflected else (), idunders=(f"__i{d}__",) if s.reflected else (),
                  inplace_function=s.inplace == "function")


for _name in _k.UNARY:
    _from_spec(_name, elementwise.UNARY)
for _name in _k.BINARY:
    _from_spec(_name, elementwise.BINARY)
_add(Op("invert", elementwise.invert, "none", method=False, function=False, dunders=("__invert__",)))
# polygamma(n, input): the method's self is input (x.polygamma(n)), its in-place form x.polygamma_(n)
_add(Op("polygamma", elementwise.polygamma, "none", self_arg=1))
_add(Op("polygamma_", elementwise.polygamma_, "none", function=False, inplace_of="polygamma"))
_with_inplace("lerp", elementwise.lerp, elementwise.lerp_, "none")
for _name in ("addcmul", "addcdiv"):  # PyTorch's CUDA autocast promotes both
    _with_inplace(_name, getattr(elementwise, _name), getattr(elementwise, _name + "_"), "promote")

# ----- bitwise (core/ops/bitwise.py; the elementwise kernel) ------------------------------------
# Python's & | ^ << >> are the bitwise ops, as in PyTorch (on bools & is logical and), reflected and in place too
for _name in _k.BITWISE_UNARY:
    _from_spec(_name, bitwise.UNARY)
for _name in _k.BITWISE_BINARY:
    _from_spec(_name, bitwise.BINARY)
_with_inplace("clamp", elementwise.clamp, elementwise.clamp_, "none", aliases=("clip",), inplace_function=True)
for _name in ("clamp_min", "clamp_max"):
    _with_inplace(_name, getattr(elementwise, _name), getattr(elementwise, _name + "_"), "none",
                  inplace_function=True)
# torch's further elementwise forms written with the ops above (core/ops/elementwise.py): each piece is
# dispatched, so recorded; frexp runs the kernel twice and has a derivative of its own
_add(Op("positive", elementwise.positive, "none"))
_add(Op("fill", elementwise.fill, "none", method=False))
_add(Op("zero_", elementwise.zero_, "none", method=False))  # Tensor.zero_ is copies' composite
_add(Op("isreal", elementwise.isreal, "none"))
_add(Op("rsub", elementwise.rsub, "none", method=False))
_add(Op("frexp", elementwise.frexp, "none"))
_with_inplace("float_power", elementwise.float_power, elementwise.float_power_, "none")
_with_inplace("ldexp", elementwise.ldexp, elementwise.ldexp_, "none", inplace_function=True)
_with_inplace("mvlgamma", elementwise.mvlgamma, elementwise.mvlgamma_, "none")
# questions about a tensor, as torch's functions; methods where TensorBase has none of its own
for _name in ("is_complex", "is_floating_point", "is_signed", "is_nonzero", "is_same_size", "numel"):
    _add(Op(_name, getattr(elementwise, _name), "none", method=_name not in ("is_floating_point", "numel")))
_add(Op("where", elementwise.where, "promote", self_arg=1))

# ----- matmul family (core/ops/matmul.py) ----------------------------------------------------
_add(Op("matmul", matmul.matmul, "lower", dunders=("__matmul__",), rdunders=("__rmatmul__",)))
_add(Op("mm", matmul.mm, "lower"))
_add(Op("bmm", matmul.bmm, "lower"))
_add(Op("linear", matmul.linear, "lower", method=False, functional=True))
_add(Op("grouped_mm", grouped_mm.grouped_mm, "none", method=False, function=False, functional=True))
_add(Op("scaled_mm", scaled_mm.scaled_mm, "none", method=False, function=False, functional=True))
# composites of mm/bmm/matmul and one add (each dispatched, so recorded); PyTorch's CUDA autocast lowers all four
_add(Op("mv", matmul.mv, "lower"))
for _name in ("addmv", "addmm", "baddbmm"):  # torch.addmv_ is a function too
    _with_inplace(_name, getattr(matmul, _name), getattr(matmul, _name + "_"), "lower",
                  inplace_function=_name == "addmv")

# ----- cdist (core/ops/cdist.py, triton_kernels/cdist.py); PyTorch's CUDA autocast runs it in fp32
_add(Op("cdist", cdist.cdist, "fp32", method=False))
# ----- ctc_loss (core/ops/ctc.py, triton_kernels/ctc.py); PyTorch's CUDA and CPU autocast run it in fp32
_add(Op("ctc_loss", ctc.ctc_loss, "fp32", method=False, function=False, functional=True))
# ----- histc (core/ops/histc.py, triton_kernels/histc.py)
_add(Op("histc", histc.histc, "none"))

# ----- attention (core/ops/attention.py, triton_kernels/attention.py + attention_bwd.py) -------
_add(Op("scaled_dot_product_attention", attention.scaled_dot_product_attention, "lower", method=False, function=False,
        functional=True))

# ----- the fused recurrent cells (core/ops/rnn.py, triton_kernels/rnn.py); torch's CUDA autocast
# lists run them in the autocast dtype. tritensor._thnn_fused_lstm_cell, as torch._thnn_fused_lstm_cell.
for _name in ("_thnn_fused_lstm_cell", "_thnn_fused_gru_cell"):
    _add(Op(_name, getattr(rnn, _name), "lower", method=False))

# ----- reductions, scans, normalizations (core/ops/reduce.py, scan.py, softmax.py, layer_norm.py) ----
for _name in ("sum", "prod"):
    _add(Op(_name, getattr(reduce, _name), "fp32"))
for _name in ("mean", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "all", "any", "hash_tensor"):
    _add(Op(_name, getattr(reduce, _name), "none"))
# composites of the reductions (core/ops/reduce.py); torch's CUDA autocast lists none of them
for _name in ("std_mean", "var_mean"):
    _add(Op(_name, getattr(reduce, _name), "none", method=False))
for _name in ("aminmax", "nansum", "nanmean", "count_nonzero"):
    _add(Op(_name, getattr(reduce, _name), "none"))
_add(Op("cumsum", scan.cumsum, "fp32"))
# nn.functional's softmax/log_softmax take dim=None (torch's implicit-dim choice): written in nn/functional.py
_add(Op("softmax", softmax.softmax, "fp32"))
_add(Op("log_softmax", softmax.log_softmax, "fp32"))
_add(Op("layer_norm", layer_norm.layer_norm, "fp32", method=False, functional=True))
_add(Op("native_layer_norm", layer_norm.native_layer_norm, "fp32", method=False))

# ----- convolution and pooling (core/ops/conv.py, core/ops/pool.py) ---------------------------
_add(Op("conv2d", conv.conv2d, "lower", method=False, functional=True))
_add(Op("conv_transpose2d", conv.conv_transpose2d, "lower", method=False, functional=True))
_add(Op("max_pool2d", pool.max_pool2d, "none", method=False, functional=True))
_add(Op("max_pool2d_with_indices", pool.max_pool2d_with_indices, "none", method=False, functional=True))
_add(Op("avg_pool2d", pool.avg_pool2d, "none", method=False, functional=True))

# ----- losses (core/ops/loss.py) ----------------------------------------------------------------
for _name in ("cross_entropy", "nll_loss", "mse_loss"):
    _add(Op(_name, getattr(loss, _name), "fp32", method=False, function=False, functional=True))

# ----- indexing (core/ops/index.py) -------------------------------------------------------------
_add(Op("index_select", index.index_select, "none"))
_add(Op("gather", index.gather, "none"))
_with_inplace("scatter_add", index.scatter_add, index.scatter_add_, "promote")
_with_inplace("index_add", index.index_add, index.index_add_, "promote")
# scatter, index_put and friends (core/ops/scatter.py, triton_kernels/scatter.py); torch's CUDA autocast promotes index_put
for _name in ("scatter", "scatter_reduce", "index_fill", "index_copy", "masked_scatter", "index_put"):
    _with_inplace(_name, getattr(scatter, _name), getattr(scatter, _name + "_"),
                  "promote" if _name == "index_put" else "none", inplace_function=_name == "index_put")
_add(Op("take_along_dim", scatter.take_along_dim, "none"))
_add(Op("getitem", index.getitem_any, "none", method=False, function=False, dunders=("__getitem__",)))
_add(Op("setitem", index.setitem_any, "none", method=False, function=False, dunders=("__setitem__",)))

# ----- nn layers' ops -----------------------------------------------------------------------------
_add(Op("embedding", embedding.embedding, "none", method=False, function=False, functional=True))
_add(Op("batch_norm", batch_norm.batch_norm, "none", method=False, function=False, functional=True))
for _name in ("l1_loss", "smooth_l1_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"):
    _add(Op(_name, getattr(loss, _name), "fp32", method=False, function=False, functional=True))

# ----- views (core/ops/views.py) ----------------------------------------------------------------
# tritensor.reshape/permute/narrow/select/transpose as torch's free functions (torch has no torch.view or torch.expand)
for _name in ("view", "reshape", "permute", "expand", "squeeze", "unsqueeze", "narrow", "select"):
    _add(Op(_name, getattr(views, _name), "none", function=_name not in ("view", "expand")))
_add(Op("transpose", views.transpose, "none", aliases=("swapaxes", "swapdims")))

# ----- copies (core/ops/copies.py) --------------------------------------------------------------
for _name in ("clone", "to", "copy_", "fill_"):
    _add(Op(_name, getattr(copies, _name), "none", function=_name in ("fill_", "clone")))  # torch.fill_/clone too


# ----- joining and reshaping (core/ops/join.py, triton_kernels/join.py) --------------------------
# cat/stack promote (PyTorch's autocast lists); hstack/vstack are cat in PyTorch, so they promote too.
_add(Op("cat", join.cat, "promote", method=False, aliases=("concat", "concatenate")))
for _name in ("stack", "hstack", "vstack"):
    _add(Op(_name, getattr(join, _name), "promote", method=False))
for _name in ("flip", "roll", "repeat", "tile", "tril", "triu", "diag"):
    _add(Op(_name, getattr(join, _name), "none", function=_name != "repeat"))
_add(Op("movedim", join.movedim, "none", aliases=("moveaxis",)))
_add(Op("diagonal", join.diagonal, "none"))
_add(Op("diag_embed", join.diag_embed, "none"))
_add(Op("column_stack", join.column_stack, "promote", method=False))  # a cat in PyTorch, so it promotes
_add(Op("unfold", views.unfold, "none", function=False))  # Tensor.unfold: windows as a view (views family)
# unbind: one op (one node, UnbindBackward0, as torch's), not a select per slice; tritensor.unbind is
# core/functional.py's
_add(Op("unbind", views.unbind, "none", function=False))

# ----- math and comparison (core/ops/math_ops.py, einsum.py; triton_kernels/math_ops.py) -----------
# PyTorch's CUDA lists: logsumexp, norm, linalg_vector_norm, linalg_matrix_norm run in fp32; dot promotes.
_with_inplace("round", math_ops.round, math_ops.round_, "none", inplace_function=True)
_with_inplace("nan_to_num", math_ops.nan_to_num, math_ops.nan_to_num_, "none", inplace_function=True)
for _name in ("isnan", "isinf", "isfinite", "isclose", "allclose", "equal", "outer", "trace"):
    _add(Op(_name, getattr(math_ops, _name), "none", aliases=("ger",) if _name == "outer" else ()))
_add(Op("dot", math_ops.dot, "promote"))
# composites (core/ops/math_ops.py); PyTorch's CUDA autocast promotes cross and tensordot, lists neither
# linalg_cross nor kron
_add(Op("cross", math_ops.cross, "promote"))
_add(Op("linalg_cross", math_ops.linalg_cross, "none", method=False, function=False))  # tritensor.linalg.cross
_add(Op("tensordot", math_ops.tensordot, "promote", method=False))
_add(Op("kron", math_ops.kron, "none"))
_add(Op("logsumexp", math_ops.logsumexp, "fp32"))
_add(Op("norm", math_ops.norm, "fp32"))
for _name in ("linalg_vector_norm", "linalg_matrix_norm"):  # tritensor.linalg.* (core/linalg.py)
    _add(Op(_name, getattr(math_ops, _name), "fp32", method=False, function=False))
_add(Op("einsum", einsum.einsum, "none", method=False))

# ----- scans, sorting, selection (core/ops/scan.py, sort.py, select.py; triton_kernels/scan.py, sort.py)
# PyTorch's CUDA lists: cumprod runs in fp32; the rest are "none".
_add(Op("cumprod", scan.cumprod, "fp32"))
_add(Op("logcumsumexp", scan.logcumsumexp, "none"))
for _name in ("cummax", "cummin"):
    _add(Op(_name, getattr(scan, _name), "none"))
for _name in ("median", "nanmedian", "mode"):  # composites of sort (core/ops/sort.py)
    _add(Op(_name, getattr(sort, _name), "none"))
for _name in ("sort", "argsort", "msort", "topk", "kthvalue", "unique", "searchsorted"):
    _add(Op(_name, getattr(sort, _name), "none", method=_name != "searchsorted"))
_add(Op("unique_consecutive", sort.unique_consecutive, "none"))
_add(Op("bucketize", sort.bucketize, "none", method=False))  # the searchsorted kernel on 1-D boundaries
for _name in ("nonzero", "argwhere", "masked_select", "bincount"):
    _add(Op(_name, getattr(select, _name), "none"))
_with_inplace("masked_fill", select.masked_fill, select.masked_fill_, "none")

# ----- random (core/ops/random.py; triton_kernels/random.py; core/generator.py)
_add(Op("bernoulli", random.bernoulli, "none"))
_add(Op("bernoulli_", random.bernoulli_, "none", function=False, inplace_of="bernoulli"))
_add(Op("multinomial", random.multinomial, "none"))
_add(Op("normal", random.normal, "none", method=False))
for _name in ("normal_", "uniform_", "random_"):
    _add(Op(_name, getattr(random, _name), "none", function=False))

# ----- PowerSGD's Gram-Schmidt (core/ops/orthogonalize.py, triton_kernels/orthogonalize.py): in place,
# no derivative; tritensor.orthogonalize_, so the DDP hook (a layer above core) calls a public function
_add(Op("orthogonalize_", orthogonalize.orthogonalize_, "none", method=False))


# ----- Tensor's composite methods: written in their family's module with the ops above, each piece a
# dispatched (so recorded) call, so they need no derivative, category or dispatch of their own and
# are not ops: Tensor has these functions as they are. The tritensor.* functions of the same names
# (flatten, split, diff ...) are core/functional.py's.
COMPOSITE_METHODS: dict = {}  # attribute name -> function, or property (T, mT)


def _composite(module, *names, numpy_names=False):
    for name in names:
        fn = getattr(module, name)
        COMPOSITE_METHODS[name] = accepts_numpy_names(fn) if numpy_names else fn


_composite(views, "view_as", "reshape_as", "flatten", "unflatten", "t", "expand_as", "broadcast_to", "split")
_composite(views, "chunk", "tensor_split", numpy_names=True)
COMPOSITE_METHODS.update(T=property(views.T), mT=property(views.mT))
_composite(join, "repeat_interleave", numpy_names=True)
COMPOSITE_METHODS["diff"] = accepts_numpy_names(join.diff_method(OPS["cat"]))
_composite(join, "rot90")
# ----- linear algebra (core/ops/linalg_factor.py, linalg_eig_svd.py; triton_kernels/linalg_*.py): torch.linalg's
# functions (core/linalg.py, named without the prefix) and torch's older torch.*/Tensor names. None is on
# torch's CUDA autocast lists. The composites are written over this table's ops (each piece dispatched).
for _name in ("linalg_lu_factor_ex", "linalg_solve_triangular", "linalg_cholesky_ex", "linalg_householder_product",
              "linalg_qr", "linalg_solve_ex", "linalg_inv_ex", "linalg_ldl_factor_ex", "linalg_ldl_solve"):
    _add(Op(_name, getattr(linalg_factor, _name), "none", method=False, function=False))
for _name in ("geqrf", "det", "slogdet", "matrix_exp"):
    _add(Op(_name, getattr(linalg_factor, _name), "none"))
for _name in ("linalg_eigh", "linalg_svd"):
    _add(Op(_name, getattr(linalg_eig_svd, _name), "none", method=False, function=False))
for _name, _fn in {**linalg_factor.composites(OPS), **linalg_eig_svd.composites(OPS)}.items():
    _add(Op(_name, _fn, "none", method=not _name.startswith("linalg_") and _name != "lu_unpack",
            function=not _name.startswith("linalg_")))

_composite(copies, "contiguous", "type_as", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "zero_",
           "pin_memory", "is_pinned")
COMPOSITE_METHODS.update(cuda=copies.to_cuda, cpu=copies.to_cpu, type=copies.to_type, **copies.DTYPE_METHODS)
# ----- what a tensor is, sharing, as_subclass and the host-only Python maps (core/ops/tensor_odds.py) ----
_composite(tensor_odds, *tensor_odds.__all__)
# ----- the activations torch has as Tensor methods too (core/ops/activation_methods.py): recorded where/compare ----
_composite(activation_methods, *activation_methods.__all__)

# ----- more shape functions (core/ops/shape_more.py): composites of views, copies, flips, index ops ----
for _name in ("hsplit", "vsplit", "dsplit", "fliplr", "flipud", "ravel", "take", "put", "put_", "diagflat",
              "unsafe_split", "unsafe_chunk", "unsafe_split_with_sizes", "split_with_sizes", "select_scatter",
              "slice_scatter", "diagonal_scatter", "narrow_copy"):
    _add(Op(_name, getattr(shape_more, _name), "none", function=_name != "put_"))
for _name in ("dstack", "row_stack", "block_diag", "vander", "combinations", "unravel_index", "t", "alias_copy",
              "detach_copy", "diagonal_copy", "expand_copy", "permute_copy", "select_copy", "slice_copy",
              "split_copy", "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy", "unfold_copy",
              "unsqueeze_copy", "view_copy", "split_with_sizes_copy"):
    _add(Op(_name, getattr(shape_more, _name), "none", method=False))
for _name in ("as_strided", "as_strided_scatter"):
    _add(Op(_name, getattr(shape_more, _name), "none"))
_add(Op("as_strided_copy", shape_more.as_strided_copy, "none", method=False))
for _name in ("tril_", "triu_", "t_", "transpose_", "squeeze_", "unsqueeze_", "sum_to_size", "ndimension",
              "dim_order", "as_strided_", "new_empty_strided", "resize_", "resize_as_", "new"):
    _add(Op(_name, getattr(shape_more, _name), "none", function=_name in ("as_strided_", "resize_as_"),
            aliases=("swapaxes_", "swapdims_") if _name == "transpose_" else ()))
# ----- statistics and products (core/ops/stats_more.py): composites of sort, gather, mm, sums, scatters ----
# torch's CUDA autocast lists: addr, addbmm, chain_matmul run in the autocast dtype; dist and renorm in fp32
_STATS_AUTOCAST = {"addr": "lower", "addbmm": "lower", "chain_matmul": "lower", "dist": "fp32", "renorm": "fp32"}
for _name in ("quantile", "nanquantile", "cov", "corrcoef", "dist", "inner", "vdot", "addr", "addbmm", "isin",
              "histogram", "renorm", "index_reduce"):
    _add(Op(_name, getattr(stats_more, _name), _STATS_AUTOCAST.get(_name, "none"), method=_name != "isin"))
for _name in ("addr_", "addbmm_", "renorm_", "index_reduce_", "fill_diagonal_", "cumsum_", "cumprod_"):
    _add(Op(_name, getattr(stats_more, _name), "none", function=False))
for _name in ("chain_matmul", "trapezoid", "trapz", "cumulative_trapezoid"):
    _add(Op(_name, getattr(stats_more, _name), _STATS_AUTOCAST.get(_name, "none"), method=False))
# ----- window functions (core/ops/windows.py, triton_kernels/windows.py): factories, no tensor argument
for _name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
    _add(Op(_name, getattr(windows, _name), "none", method=False))
# ----- short-time Fourier transforms (core/ops/spectral.py): windowed frames times a cached DFT basis, recorded
# matmuls; torch's CUDA autocast lists name neither
for _name in ("stft", "istft"):
    _add(Op(_name, getattr(spectral, _name), "none"))
# ----- odd numerical functions and samplers (core/ops/signal_more.py): composites of recorded ops and uniform draws
for _name in ("angle", "adjoint", "nonzero_static", "slice_inverse"):
    _add(Op(_name, getattr(signal_more, _name), "none"))
for _name in ("gradient", "histogramdd", "poisson", "binomial", "cond", "lobpcg"):
    _add(Op(_name, getattr(signal_more, _name), "none", method=False))
for _name in ("cauchy_", "exponential_", "geometric_", "log_normal_"):
    _add(Op(_name, getattr(signal_more, _name), "none", function=False))
COMPOSITE_METHODS.update(mH=property(signal_more.mH), H=property(signal_more.H))
# ----- batch-norm statistics (core/ops/batch_norm_stats.py): SyncBatchNorm's pieces, on the batch-norm kernels
# or composites of per-channel sums and elementwise ops; torch.* functions only, none on torch's autocast lists
for _name in ("batch_norm_stats", "batch_norm_elemt", "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts",
              "batch_norm_backward_reduce", "batch_norm_backward_elemt", "batch_norm_update_stats"):
    _add(Op(_name, getattr(batch_norm_stats, _name), "none", method=False))


# ----- Tensor's autograd API: answered by the autograd layer (autograd/tensor_methods.py) ------
def _needs_autograd(name):
    def impl(*args, **kwargs):
        raise RuntimeError(f"Tensor.{name} is served by tritensor.autograd, which registers itself with "
                           "core/dispatch.py when imported (import tritensor does)")

    impl.__name__ = impl.__qualname__ = name
    return impl


API = ("backward", "detach", "detach_", "register_hook", "register_post_accumulate_grad_hook", "retain_grad",
       "retains_grad", "get_data", "set_data", "get_grad_dtype", "set_grad_dtype")
_API_PROPERTIES = ("retains_grad", "get_data", "set_data", "get_grad_dtype", "set_grad_dtype")  # core/tensor.py's
for _name in API:
    _add(Op(_name, _needs_autograd(_name), "none", method=_name not in _API_PROPERTIES,
            function=_name in ("detach", "detach_"), kernel=False))  # torch.detach/detach_ are functions too

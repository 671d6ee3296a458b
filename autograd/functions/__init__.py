"""Each op's derivative, found by the op's name.

:data:`DERIVATIVES` maps an op name of the op table (``core/ops/table.py``) to its *recorder*: a
function with the op's signature that runs the op through a :class:`~tritensor.autograd.Function`
(forward = the core entry, plus a backward), so the result joins the graph. The autograd layer of
the dispatcher (``autograd/layer.py``) calls it instead of the core entry when grad mode is on and
an argument requires grad. An op that is not here records nothing (comparisons, argmax, ...); an
op made of other ops (``nll_loss``, ``flatten``) is recorded piece by piece.

The simple families are formula tables, one generic Function each: elementwise.py
(``UNARY_FORMULAS``, ``BINARY_FORMULAS``), reduce.py (``REDUCTION_FORMULAS``), scan.py
(``SCAN_FORMULAS``), softmax.py (``SOFTMAX_FORMULAS``); ``function.functions_from_table`` makes a
class per row, named for the op. The other ops are a ``BuiltinFunction`` subclass each.

Where an op's derivative lives:
  elementwise.py  unary math, + - * / ** maximum minimum remainder, where, clamp (and in-place forms)
  views.py        view reshape transpose permute expand squeeze unsqueeze narrow select, basic []
  copies.py       clone/contiguous, to (dtype/device), copy_, fill_/zero_
  reduce.py       sum mean prod amax amin max min var std
  softmax.py      softmax log_softmax
  layer_norm.py   layer_norm native_layer_norm
  matmul.py       matmul mm bmm linear
  conv.py         conv2d conv_transpose2d
  pool.py         max_pool2d max_pool2d_with_indices avg_pool2d
  loss.py         cross_entropy (fused log-softmax + NLL kernel)
  index.py        index_select gather, x[idx] (advanced: integer tensors, lists, masks), x[idx] = v
  attention.py    scaled_dot_product_attention (fused FlashAttention-2 backward kernels)
  embedding.py    embedding
  batch_norm.py   batch_norm
  batch_norm_stats.py  batch_norm_stats batch_norm_elemt batch_norm_backward_reduce (no derivative, as torch)
  join.py         cat stack hstack vstack flip roll repeat tile tril triu diag movedim
  math_ops.py     round nan_to_num dot
  scan.py         cumsum cumprod logcumsumexp cummax cummin
  sort.py         sort msort topk kthvalue
  select.py       masked_fill masked_fill_
  scatter.py      scatter scatter_reduce index_put (and in-place forms)
  random.py       normal_ uniform_ random_ bernoulli_ (a zero gradient; the fill is recorded)
  rnn.py          _thnn_fused_lstm_cell _thnn_fused_gru_cell (fused cell backward kernels)
  cdist.py        cdist (its direct kernel's backward kernel; the p = 2 product form is recorded op by op)
  linalg_factor.py  linalg_lu_factor_ex linalg_solve_triangular linalg_cholesky_ex linalg_qr det slogdet
                    linalg_inv_ex linalg_solve_ex matrix_exp
  linalg_eig_svd.py linalg_eigh linalg_svd (torch's formulas, written with recorded ops)
  shape_more.py   as_strided (the other shape functions are recorded piece by piece)
  ctc.py          ctc_loss (the beta and gradient kernels; the reduction is recorded op by op)
"""
from __future__ import annotations

from . import linalg_eig_svd, linalg_factor
from . import shape_more
from . import batch_norm_stats
from . import (attention, batch_norm, cdist, conv, ctc, copies, elementwise, embedding, index, join, layer_norm, loss,
               math_ops, matmul, pool, random, reduce, rnn, scan, scatter, select, softmax, sort, views)

DERIVATIVES: dict = {}
for _module in (elementwise, views, copies, reduce, softmax, layer_norm, matmul, conv, pool, loss, index, attention,
                embedding, batch_norm, join, math_ops, scan, sort, select, scatter, random, rnn, cdist, ctc,
                linalg_factor, linalg_eig_svd, shape_more, batch_norm_stats):
    for _name, _record in _module.RECORD.items():
        if _name in DERIVATIVES:
            raise ValueError(f"op {_name} has two derivatives ({_module.__name__})")
        DERIVATIVES[_name] = _record

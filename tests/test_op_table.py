"""The op table (core/ops/table.py) and the one dispatch path (core/dispatch.py).

Two kinds of checks:
- the structure: Tensor's methods are made once, in core, from the table; nothing above core
  rebinds them; every op call passes the dispatcher's layers in the declared order;
- the bookkeeping: :data:`TESTS` below is the maintained list of every op's forward test and
  gradcheck, and :data:`AUTOCAST` the maintained PyTorch autocast lists. Both are compared with
  the table, so an op added without tests, or without a category, fails here; and every op's
  kernel, core entry, derivative and tests must sit in the files named for its family
  (CONTRIBUTING.md), the tests actually calling the op.
"""
import ast
import functools
import inspect
import os
import pathlib
import re

import numpy as np
import pytest

import tritensor as tt
from tritensor.autograd.functions import DERIVATIVES
from tritensor.autograd.functions import elementwise as _ew_grad
from tritensor.core import dispatch
from tritensor.core.ops.table import API, CATEGORIES, OPS
from tritensor.core.tensor import Tensor, TensorOps
from tritensor.core.tensor_base import TensorBase
from tritensor.triton_kernels import elementwise as _ew_kernel

ROOT = pathlib.Path(tt.__file__).resolve().parent
TESTS_DIR = pathlib.Path(__file__).resolve().parent

# ----- the maintained lists ----------------------------------------------------------------------
# PyTorch's CUDA autocast lists, restricted to tritensor's ops; every other op is "none".
AUTOCAST = {
    "lower": ["matmul", "mm", "bmm", "linear", "conv2d", "scaled_dot_product_attention", "mv", "addmv", "addmm",
              "baddbmm",
              "conv_transpose2d", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell",
              "addr", "addbmm", "chain_matmul"],
    "fp32": ["exp", "exp2", "expm1", "log", "log2", "log1p", "reciprocal", "rsqrt", "pow", "sum", "prod", "cumsum",
             "softmax", "log_softmax", "layer_norm", "native_layer_norm", "cross_entropy", "nll_loss", "mse_loss",
             # the losses; torch bans binary_cross_entropy under autocast, we run it in fp32
             "l1_loss", "smooth_l1_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
             # math, norms and scans
             "logsumexp", "norm", "linalg_vector_norm", "linalg_matrix_norm", "cumprod",
             "tan", "asin", "acos", "sinh", "cosh", "erfinv", "log10", "cdist", "dist", "renorm", "ctc_loss"],
    "promote": ["add", "sub", "mul", "div", "maximum", "minimum", "floor_divide", "remainder", "where", "scatter_add",
                "index_add",
                # cat/stack promote; hstack/vstack are cat in PyTorch
                "cat", "stack", "hstack", "vstack", "dot",
                "index_put",
                "atan2", "addcmul", "addcdiv", "cross", "tensordot", "column_stack"],
}

# op -> (its forward test, its gradcheck), as "test_<family>.py::function"; the gradcheck is None only
# for an op with no gradient (comparisons, argmax, all ...). The family is the module of the op's
# core entry (core/ops/<family>.py); test_every_op_is_covered_in_its_family_files checks the rest.
PIECEWISE = ["floor", "ceil", "trunc", "sign"]
# The differentiable unary elementwise ops, from their records: a new one needs no line here (its
# forward test and gradcheck are still checked to call it, and its category against AUTOCAST)
# torch's further elementwise math (tests/test_elementwise_more.py): records and forms of their own
MORE_UNARY = ["erfc", "deg2rad", "rad2deg", "frac", "sinc", "i0", "logit"]
MORE_BINARY = ["copysign", "xlogy", "nextafter", "igamma", "igammac"]  # with an in-place form
MORE_BINARY_NO_INPLACE = ["fmax", "fmin", "logaddexp", "logaddexp2"]
UNARY = [s.name for s in _ew_kernel.SPECS if s.arity == 1 and s.family == "elementwise" and s.ints != "bool"
         and s.name not in PIECEWISE + MORE_UNARY]
MORE = "test_elementwise_more.py::"
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder", "atan2", "hypot"]
COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
VIEWS = ["view", "reshape", "transpose", "permute", "expand", "squeeze", "unsqueeze", "narrow", "select"]
EW, RED, IX, SM, LN, LOSS = ("test_elementwise.py::", "test_reduce.py::", "test_index.py::", "test_softmax.py::",
                             "test_layer_norm.py::", "test_loss.py::")
SC = "test_scatter.py::"
SHM, STM = "test_shape_more.py::", "test_stats_more.py::"
# The surface added for real PyTorch code: each forward test -> the ops it checks (their gradchecks
# are the family's one gradcheck test)
SHAPE_MORE = {
    "test_splits_stacks_flips_ravel_match_numpy": ("hsplit", "vsplit", "dsplit", "dstack", "row_stack", "fliplr",
                                                   "flipud", "ravel"),
    "test_split_and_flip_errors_follow_torch": ("t",),
    "test_inplace_layout_and_triangle_forms": ("tril_", "triu_", "t_", "transpose_", "squeeze_", "unsqueeze_"),
    "test_take_put_diagflat_match_numpy": ("take", "put", "put_", "diagflat"),
    "test_block_diag_vander_combinations_unravel_match_numpy": ("block_diag", "vander", "combinations"),
    "test_scatters_copies_and_size_splits_match_numpy": (
        "select_scatter", "slice_scatter", "diagonal_scatter", "alias_copy", "detach_copy", "diagonal_copy",
        "expand_copy", "permute_copy", "select_copy", "slice_copy", "split_copy", "squeeze_copy", "t_copy",
        "transpose_copy", "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy", "narrow_copy",
        "split_with_sizes", "split_with_sizes_copy", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
        "sum_to_size"),
    "test_as_strided_family_matches_numpy": ("as_strided_scatter", "as_strided_copy", "as_strided_"),
}
BNS = "test_batch_norm_stats.py::"
BN_STATS = {
    "test_stats_elemt_update_match_numpy": ("batch_norm_stats", "batch_norm_elemt", "batch_norm_update_stats"),
    "test_gathered_stats_equal_the_whole_batch": ("batch_norm_gather_stats", "batch_norm_gather_stats_with_counts"),
    "test_backward_reduce_and_elemt_give_batch_norm_s_gradient": ("batch_norm_backward_reduce",
                                                                  "batch_norm_backward_elemt"),
}
BN_STATS_KERNEL = ("batch_norm_stats", "batch_norm_elemt", "batch_norm_backward_reduce")  # the others: composites
STATS_MORE = {
    "test_quantile_nanquantile_match_numpy": ("quantile", "nanquantile"),
    "test_cov_corrcoef_match_numpy": ("cov", "corrcoef"),
    "test_products_and_distances_match_numpy": ("dist", "inner", "vdot", "addr", "addr_", "addbmm", "addbmm_",
                                                "chain_matmul"),
    "test_trapezoid_rules_match_numpy": ("trapezoid", "trapz", "cumulative_trapezoid"),
    "test_renorm_index_reduce_fill_diagonal_inplace_scans": ("renorm", "renorm_", "index_reduce", "index_reduce_",
                                                             "fill_diagonal_", "cumsum_", "cumprod_"),
}
TESTS = {
    **{op: (EW + "test_unary_against_float64", EW + "test_unary_gradcheck") for op in UNARY},
    **{op + "_": (EW + "test_inplace_forms_match_out_of_place", EW + "test_inplace_unary_gradcheck_every_op")
       for op in UNARY},
    **{op: (EW + "test_unary_against_float64", EW + "test_piecewise_constant_ops_have_zero_gradient")
       for op in PIECEWISE},
    **{op + "_": (EW + "test_inplace_forms_match_out_of_place", EW + "test_piecewise_constant_forms_have_zero_gradient")
       for op in PIECEWISE},
    **{op: (EW + "test_binary_broadcast_and_strides", EW + "test_binary_gradcheck_with_broadcasting") for op in BINARY},
    **{op + "_": (EW + "test_inplace_forms_match_out_of_place", EW + "test_inplace_binary_gradcheck_every_op")
       for op in BINARY},
    "floor_divide": (EW + "test_binary_broadcast_and_strides", EW + "test_piecewise_constant_forms_have_zero_gradient"),
    "fmod": (EW + "test_binary_broadcast_and_strides", EW + "test_atan2_hypot_fmod_gradcheck"),
    "fmod_": (EW + "test_inplace_forms_match_out_of_place", EW + "test_atan2_hypot_fmod_gradcheck"),
    "polygamma": (EW + "test_polygamma_against_float64", EW + "test_polygamma_gradcheck"),
    "polygamma_": (EW + "test_new_ops_integer_inputs_and_aliases", EW + "test_polygamma_gradcheck"),
    **{op: (EW + "test_lerp_addcmul_addcdiv_broadcast_and_strides", EW + "test_lerp_addcmul_addcdiv_gradcheck")
       for op in ("lerp", "lerp_", "addcmul", "addcmul_", "addcdiv", "addcdiv_")},
    "floor_divide_": (EW + "test_inplace_forms_match_out_of_place",
                      EW + "test_piecewise_constant_forms_have_zero_gradient"),
    **{op: (EW + "test_comparisons_return_bool", None) for op in COMPARISONS},
    **{op + "_": (EW + "test_inplace_forms_match_out_of_place", None) for op in COMPARISONS},
    **{op: (EW + "test_logical_ops_and_their_operators", None)
       for op in ("logical_not", "logical_not_", "logical_and", "logical_and_", "logical_or", "logical_or_", "invert")},
    **{op: (EW + "test_clamp_forms_match_numpy", EW + "test_clamp_forms_gradcheck")
       for op in ("clamp_", "clamp_min", "clamp_max")},
    "clamp": (EW + "test_clamp_forms_match_numpy", EW + "test_where_and_clamp"),
    "where": (EW + "test_where_broadcasts_and_promotes", EW + "test_where_and_clamp"),
    "matmul": ("test_matmul.py::test_matmul_broadcast_and_vectors", "test_matmul.py::test_matmul_gradcheck"),
    **{op: ("test_matmul.py::test_mm_bmm_and_methods",
            "test_matmul.py::test_matmul_noncontiguous_mm_bmm_and_second_derivative") for op in ("mm", "bmm")},
    "linear": ("test_matmul.py::test_linear_fused_epilogue", "test_matmul.py::test_linear_gradcheck"),
    **{op: ("test_matmul.py::test_mv_addmv_addmm_baddbmm_match_numpy",
            "test_matmul.py::test_mv_addmv_addmm_baddbmm_gradcheck")
       for op in ("mv", "addmv", "addmm", "baddbmm", "addmv_", "addmm_", "baddbmm_")},
    "scaled_dot_product_attention": ("test_attention.py::test_forward_against_float64",
                                     "test_attention.py::test_gradcheck_float64"),
    **{op: (RED + "test_sumlike_against_float64", RED + "test_reduction_gradcheck")
       for op in ("sum", "mean", "prod", "var", "std")},
    **{op: (RED + "test_extremes_exact_with_ties", RED + "test_reduction_gradcheck") for op in ("amax", "amin")},
    **{op: (RED + "test_max_min_with_dim_return_values_and_indices", RED + "test_reduction_gradcheck")
       for op in ("max", "min")},
    **{op: (RED + "test_extremes_exact_with_ties", None) for op in ("argmax", "argmin")},
    **{op: (RED + "test_all_any_on_floats", None) for op in ("all", "any")},
    "hash_tensor": ("test_reduce_hash_tensor.py::test_hash_tensor_matches_numpy_over_dtypes_and_dims", None),
    **{op: (RED + "test_composite_reductions_match_numpy", RED + "test_composite_reductions_gradcheck")
       for op in ("std_mean", "var_mean", "aminmax", "nansum", "nanmean")},
    "count_nonzero": (RED + "test_composite_reductions_match_numpy", None),
    **{op: ("test_scan.py::test_cummax_cummin_match_numpy", "test_scan.py::test_cummax_cummin_gradcheck")
       for op in ("cummax", "cummin")},
    **{op: ("test_sort.py::test_median_nanmedian_mode_match_numpy", "test_sort.py::test_median_and_mode_gradcheck")
       for op in ("median", "nanmedian", "mode")},
    "cumsum": ("test_scan.py::test_cumsum_matches_numpy", "test_scan.py::test_cumsum_gradcheck"),
    "softmax": (SM + "test_against_float64", SM + "test_softmax_gradcheck"),
    "log_softmax": (SM + "test_against_float64", SM + "test_softmax_gradcheck"),
    "layer_norm": (LN + "test_against_float64", LN + "test_layer_norm_gradcheck"),
    "native_layer_norm": (LN + "test_native_layer_norm_statistics", LN + "test_layer_norm_gradcheck"),
    "conv2d": ("test_conv.py::test_conv2d_forward_and_backward", "test_conv.py::test_conv2d_gradcheck"),
    "conv_transpose2d": ("test_conv.py::test_conv_transpose2d_forward", "test_conv.py::test_conv_transpose2d_gradcheck"),
    "max_pool2d": ("test_pool.py::test_max_pool2d", "test_pool.py::test_max_pool2d_gradcheck"),
    "max_pool2d_with_indices": ("test_pool.py::test_max_pool2d", "test_pool.py::test_max_pool2d_gradcheck"),
    "avg_pool2d": ("test_pool.py::test_avg_pool2d", "test_pool.py::test_avg_pool2d_gradcheck"),
    "cross_entropy": (LOSS + "test_cross_entropy_kernel_vs_numpy", LOSS + "test_cross_entropy_and_friends_gradcheck"),
    "nll_loss": (LOSS + "test_nll_loss_weight_vs_numpy", LOSS + "test_cross_entropy_and_friends_gradcheck"),
    "mse_loss": (LOSS + "test_mse_loss_vs_numpy", LOSS + "test_cross_entropy_and_friends_gradcheck"),
    "index_select": (IX + "test_index_select_and_gather", IX + "test_gradcheck"),
    "gather": (IX + "test_index_select_and_gather", IX + "test_gradcheck"),
    **{op: (IX + "test_scatter_add_and_index_add_accumulate_duplicates",
            IX + "test_scatter_add_and_index_add_gradcheck")
       for op in ("scatter_add", "scatter_add_", "index_add", "index_add_")},
    # ----- scatters and puts -----
    **{op: (SC + "test_scatter_matches_numpy", SC + "test_scatter_gradcheck") for op in ("scatter", "scatter_")},
    **{op: (SC + "test_scatter_reduce_matches_numpy", SC + "test_scatter_reduce_gradcheck")
       for op in ("scatter_reduce", "scatter_reduce_")},
    **{op: (SC + "test_index_put_fill_copy_masked_scatter_take_along_dim_match_numpy",
            SC + "test_index_put_and_composites_gradcheck")
       for op in ("index_put", "index_put_", "index_fill", "index_fill_", "index_copy", "index_copy_",
                  "masked_scatter", "masked_scatter_", "take_along_dim")},
    # ----- the fused recurrent cells -----
    **{op: ("test_rnn.py::test_fused_cells_against_float64", "test_rnn.py::test_fused_cells_gradcheck")
       for op in ("_thnn_fused_lstm_cell", "_thnn_fused_gru_cell")},
    "getitem": (IX + "test_getitem_matches_numpy", IX + "test_gradcheck"),
    "setitem": (IX + "test_setitem_matches_numpy", IX + "test_setitem_gradcheck"),
    **{op: ("test_views.py::test_view_semantics_match_numpy", "test_views.py::test_view_gradcheck") for op in VIEWS},
    "clone": ("test_copies.py::test_strided_copy_layouts", "test_copies.py::test_casts_and_copies"),
    "to": ("test_copies.py::test_float_to_float_bit_exact", "test_copies.py::test_casts_and_copies"),
    "copy_": ("test_copies.py::test_copy_into_strided_destination_and_broadcast",
              "test_copies.py::test_casts_and_copies"),
    "fill_": ("test_copies.py::test_fill_float64_keeps_double_precision", "test_copies.py::test_fill_gradcheck"),
    # ----- nn layers' ops: losses, embedding, batch_norm -----
    "embedding": ("test_embedding.py::test_embedding_forward_and_backward_vs_numpy",
                  "test_embedding.py::test_embedding_gradcheck"),
    "batch_norm": ("test_batch_norm.py::test_training_forward_backward_and_running_stats_vs_numpy",
                   "test_batch_norm.py::test_batch_norm_gradcheck"),
    **{op: (LOSS + "test_pointwise_losses_vs_numpy", LOSS + "test_loss_gradchecks")
       for op in ("l1_loss", "smooth_l1_loss")},
    **{op: (LOSS + "test_bce_probabilities_kl_div_and_nll_module", LOSS + "test_loss_gradchecks")
       for op in ("binary_cross_entropy", "kl_div")},
    "binary_cross_entropy_with_logits": (LOSS + "test_pointwise_losses_vs_numpy",
                                         LOSS + "test_loss_gradchecks"),
    # ----- joining and reshaping -----
    **{op: ("test_join.py::test_cat_and_stack_match_numpy", "test_join.py::test_join_gradcheck")
       for op in ("cat", "stack")},
    **{op: ("test_join.py::test_hstack_vstack", "test_join.py::test_join_gradcheck") for op in ("hstack", "vstack")},
    **{op: ("test_join.py::test_flip_roll_repeat_tile_match_numpy", "test_join.py::test_join_gradcheck")
       for op in ("flip", "roll", "repeat", "tile")},
    **{op: ("test_join.py::test_tril_triu_diag_match_numpy", "test_join.py::test_join_gradcheck")
       for op in ("tril", "triu", "diag", "diagonal")},
    "movedim": ("test_join.py::test_movedim_is_a_view_and_free_squeeze_unsqueeze_flatten",
                "test_join.py::test_join_gradcheck"),
    # ----- math and comparison -----
    **{op: ("test_math_ops.py::test_round_and_classification_match_numpy", None)
       for op in ("isnan", "isinf", "isfinite")},
    **{op: ("test_math_ops.py::test_round_and_classification_match_numpy", "test_math_ops.py::test_math_gradcheck")
       for op in ("round", "nan_to_num")},
    **{op: ("test_math_ops.py::test_inplace_forms_integers_and_empty", "test_math_ops.py::test_math_gradcheck")
       for op in ("round_", "nan_to_num_")},
    **{op: ("test_math_ops.py::test_isclose_allclose_equal", None) for op in ("isclose", "allclose", "equal")},
    "einsum": ("test_einsum.py::test_einsum_matches_numpy", "test_einsum.py::test_einsum_gradcheck"),
    "cdist": ("test_cdist.py::test_cdist_matches_numpy", "test_cdist.py::test_cdist_gradcheck"),
    "ctc_loss": ("test_ctc.py::test_ctc_loss_matches_numpy", "test_ctc.py::test_ctc_loss_gradcheck"),
    "histc": ("test_histc.py::test_histc_matches_numpy", None),
    "grouped_mm": ("test_grouped_mm.py::test_grouped_mm_matches_numpy", None),
    "scaled_mm": ("test_scaled_mm.py::test_scaled_mm_matches_numpy", None),
    "unfold": ("test_views.py::test_unfold_is_a_view_matching_numpy", "test_views.py::test_unfold_gradcheck"),
    "unbind": ("test_views.py::test_unbind_is_views_matching_numpy", "test_views.py::test_unbind_gradcheck"),
    **{op: ("test_join.py::test_diag_embed_and_column_stack_match_numpy",
            "test_join.py::test_diag_embed_and_column_stack_gradcheck") for op in ("diag_embed", "column_stack")},
    "bucketize": ("test_sort.py::test_bucketize", None),
    "unique_consecutive": ("test_sort.py::test_unique_dim_and_unique_consecutive", None),
    **{op: ("test_math_ops.py::test_cross_tensordot_kron_match_numpy",
            "test_math_ops.py::test_cross_tensordot_kron_gradcheck")
       for op in ("cross", "linalg_cross", "tensordot", "kron")},
    "dot": ("test_math_ops.py::test_dot_outer_trace_logsumexp", "test_math_ops.py::test_math_gradcheck"),
    **{op: ("test_math_ops.py::test_dot_outer_trace_logsumexp", None) for op in ("outer", "trace", "logsumexp")},
    **{op: ("test_math_ops.py::test_norms_match_numpy", None) for op in ("norm", "linalg_vector_norm",
                                                                       "linalg_matrix_norm")},
    # ----- scans, sorting, selection -----
    **{op: ("test_scan.py::test_cumprod_and_logcumsumexp_match_numpy", "test_scan.py::test_scan_gradcheck")
       for op in ("cumprod", "logcumsumexp")},
    **{op: ("test_sort.py::test_sort_matches_numpy_stable_order", "test_sort.py::test_sort_family_gradcheck")
       for op in ("sort", "msort")},
    "argsort": ("test_sort.py::test_sort_matches_numpy_stable_order", None),
    **{op: ("test_sort.py::test_topk_and_kthvalue", "test_sort.py::test_sort_family_gradcheck")
       for op in ("topk", "kthvalue")},
    "unique": ("test_sort.py::test_unique", None),
    "searchsorted": ("test_sort.py::test_searchsorted", None),
    "bincount": ("test_select.py::test_bincount", None),
    **{op: ("test_select.py::test_nonzero_argwhere_masked_ops", None) for op in ("nonzero", "argwhere")},
    **{op: ("test_select.py::test_nonzero_argwhere_masked_ops", "test_select.py::test_select_gradcheck")
       for op in ("masked_select", "masked_fill", "masked_fill_")},  # masked_select: recorded as input[mask]
    # ----- random -----
    **{op: ("test_random.py::test_bernoulli_and_multinomial", None) for op in ("bernoulli", "multinomial")},
    **{op: ("test_random.py::test_inplace_fills", "test_random.py::test_inplace_fills_are_recorded_with_a_zero_gradient")
       for op in ("bernoulli_", "normal_", "uniform_", "random_")},
    "normal": ("test_random.py::test_normal_forms_and_gradient",  # recorded as z * std + mean
               "test_random.py::test_normal_forms_and_gradient"),
    # ----- PowerSGD's Gram-Schmidt, in place (no gradient) -----
    "orthogonalize_": ("test_orthogonalize.py::test_matches_qr_up_to_signs", None),
    # ----- the bitwise family (integers and bools: no gradient) -----
    **{op: ("test_bitwise.py::test_bitwise_ops_match_numpy_on_every_layout", None)
       for op in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")},
    **{op: ("test_bitwise.py::test_shifts_match_torch_for_every_count", None)
       for op in ("bitwise_left_shift", "bitwise_right_shift")},
    **{op + "_": ("test_bitwise.py::test_inplace_forms_and_operators", None)
       for op in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
                  "bitwise_right_shift")},
    **{op: ("test_bitwise.py::test_logical_xor", None) for op in ("logical_xor", "logical_xor_")},
    # ----- torch's further elementwise math -----
    **{op: (MORE + "test_new_unary_against_float64", MORE + "test_new_unary_gradcheck") for op in MORE_UNARY},
    **{op + "_": (MORE + "test_new_inplace_forms_match_out_of_place", MORE + "test_new_inplace_gradcheck")
       for op in MORE_UNARY + MORE_BINARY},
    **{op: (MORE + "test_bool_predicates_match_numpy", None) for op in ("signbit", "isposinf", "isneginf", "isreal")},
    **{op: (MORE + "test_new_binary_against_float64", MORE + "test_new_binary_gradcheck")
       for op in MORE_BINARY + MORE_BINARY_NO_INPLACE},
    **{op: (MORE + "test_heaviside_matches_numpy", MORE + "test_derivatives_torch_does_not_implement")
       for op in ("heaviside", "heaviside_")},
    **{op: (MORE + "test_gcd_lcm_match_numpy", None) for op in ("gcd", "gcd_", "lcm", "lcm_")},
    **{op: (MORE + "test_clamp_min_max_in_place_and_as_functions", MORE + "test_clamp_min_max_in_place_gradcheck")
       for op in ("clamp_min_", "clamp_max_")},
    **{op: (MORE + "test_positive_fill_zero_rsub", None) for op in ("positive", "zero_")},
    **{op: (MORE + "test_positive_fill_zero_rsub", MORE + "test_composites_gradcheck") for op in ("fill", "rsub")},
    "frexp": (MORE + "test_frexp_matches_numpy", MORE + "test_composites_gradcheck"),
    **{op: (MORE + "test_float_power_ldexp_mvlgamma", MORE + "test_composites_gradcheck")
       for op in ("float_power", "float_power_", "ldexp", "ldexp_", "mvlgamma", "mvlgamma_")},
    **{op: (MORE + "test_tensor_questions", None)
       for op in ("is_complex", "is_floating_point", "is_signed", "is_nonzero", "is_same_size", "numel")},
    # ----- added for real PyTorch code: shape functions, statistics, windows (composites, but the windows' kernel)
    **{op: (SHM + test, SHM + "test_shape_more_gradcheck") for test, ops in SHAPE_MORE.items() for op in ops},
    **{op: (STM + test, STM + "test_stats_more_gradcheck") for test, ops in STATS_MORE.items() for op in ops},
    **{op: (STM + "test_isin_and_histogram_match_numpy", None) for op in ("isin", "histogram")},
    **{op: (SHM + "test_inplace_layout_and_triangle_forms", None)
       for op in ("ndimension", "dim_order")},
    "unravel_index": (SHM + "test_block_diag_vander_combinations_unravel_match_numpy", None),
    "as_strided": (SHM + "test_as_strided_family_matches_numpy", SHM + "test_shape_more_gradcheck"),
    "new_empty_strided": (SHM + "test_as_strided_family_matches_numpy", None),
    **{op: (SHM + "test_resize_and_new_follow_torch", None) for op in ("resize_", "resize_as_", "new")},
    **{op: ("test_windows.py::test_windows_match_float64_formulas", None)
       for op in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window")},
    # batch-norm statistics (SyncBatchNorm's pieces): the batch-norm kernels (no derivative, as torch) or composites
    **{op: (BNS + test, BNS + ("test_kernel_ops_have_no_derivative_as_torch" if op in BN_STATS_KERNEL else
                               "test_composites_gradcheck")) for test, ops in BN_STATS.items() for op in ops},
}
# Ops that are differentiable without a derivative of their own: made of recorded ops.
COMPOSITES = {"nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy", "kl_div", "masked_select",
              "normal", "einsum", "mv", "addmv", "addmm", "baddbmm",  # mm/bmm/matmul and an add
              "addmv_", "addmm_", "baddbmm_",
              "cross", "linalg_cross", "tensordot", "kron",  # rolls, products, permutes, mm
              # recorded as the scatter, index_put or gather they are
              "index_fill", "index_fill_", "index_copy", "index_copy_", "masked_scatter", "masked_scatter_",
              "take_along_dim", "std_mean", "var_mean", "aminmax", "nansum", "nanmean", "median", "nanmedian", "mode",
              # clone and fill_, sub (or mul and sub), casts and pow, mul and pow, lgamma and sum
              "fill", "rsub", "float_power", "float_power_", "ldexp", "ldexp_", "mvlgamma", "mvlgamma_"}
# Families whose ops have no kernel of their own (a view is new strides on the same storage;
# einsum is planned into diagonals, sums, permutes and bmm, each dispatched as an op of its own).
NO_KERNEL = {"views", "einsum", "shape_more", "stats_more"}
# The surface added for real PyTorch code: composites of recorded ops (shape_more: views, copies, index
# ops; stats_more: sort, gather, mm ...)
COMPOSITES |= {op for ops in list(SHAPE_MORE.values()) + list(STATS_MORE.values()) for op in ops}
COMPOSITES |= {op for ops in BN_STATS.values() for op in ops if op not in BN_STATS_KERNEL}  # sums, elementwise
# Where a family's kernels are imported when not by its core module: the copy and fill that every
# op needs (contiguous(), .to(), ...) live in core/ops/__init__.py, beside the device moves.
KERNEL_IMPORTER = {"copies": "__init__"}
# Families whose kernels are another family's, launched through that family's core entries (their
# core module imports core/ops/<other>.py): embedding's forward is index_select's gather and its
# derivative index_add's scatter-add (triton_kernels/index.py); select's nonzero/argwhere are the
# index family's stream compaction and bincount its index_add (masked_fill is the elementwise where).
KERNEL_FAMILY = {"embedding": "index", "select": "index", "bitwise": "elementwise", "batch_norm_stats": "batch_norm"}
# The text a test must contain when it differs from the op's name (operators are used, not named).
MENTIONS = {"invert": ("~",), "getitem": ("[",), "setitem": ("] =",), "clone": ("clone", "contiguous"),
            "matmul": ("matmul", "@"), "max_pool2d_with_indices": ("max_pool2d",),
            "linalg_vector_norm": ("vector_norm",), "linalg_matrix_norm": ("matrix_norm",),
            "linalg_cross": ("linalg.cross",)}

# ----- linear algebra: forward test, gradcheck (None: no gradient), the ops they cover -----
_LF, _LE = "test_linalg_factor.py::", "test_linalg_eig_svd.py::"
_LINALG = [
    (_LF + "test_lu_factor_and_unpack", _LF + "test_linalg_factor_gradcheck",
     ("linalg_lu_factor_ex", "linalg_lu_factor", "linalg_lu", "lu_unpack", "lu")),
    (_LF + "test_solves_match_numpy", _LF + "test_linalg_factor_gradcheck",
     ("linalg_solve_triangular", "triangular_solve", "linalg_solve_ex", "linalg_solve", "linalg_lu_solve", "lu_solve",
      "cholesky_solve")),
    (_LF + "test_inverse_and_determinants", _LF + "test_linalg_factor_gradcheck",
     ("linalg_inv_ex", "inverse", "det", "slogdet", "logdet", "matrix_power", "matrix_exp", "cholesky_inverse")),
    (_LF + "test_cholesky", _LF + "test_linalg_factor_gradcheck",
     ("linalg_cholesky_ex", "linalg_cholesky", "cholesky")),
    (_LF + "test_qr_family", None, ("geqrf", "linalg_householder_product", "orgqr", "ormqr")),
    (_LF + "test_qr_family", _LF + "test_linalg_factor_gradcheck", ("linalg_qr", "qr")),
    (_LE + "test_eigh_matches_numpy", _LE + "test_linalg_eig_svd_gradcheck", ("linalg_eigh", "linalg_eigvalsh")),
    (_LE + "test_svd_matches_numpy", _LE + "test_linalg_eig_svd_gradcheck", ("linalg_svd", "linalg_svdvals", "svd")),
    (_LE + "test_spectral_composites", _LE + "test_linalg_eig_svd_gradcheck",
     ("linalg_pinv", "pinverse", "linalg_cond", "linalg_lstsq")),
    (_LE + "test_spectral_composites", None, ("linalg_matrix_rank",)),
    (_LF + "test_ldl_factor_and_solve", None, ("linalg_ldl_factor_ex", "linalg_ldl_factor", "linalg_ldl_solve")),
]
TESTS.update({op: (forward, grad) for forward, grad, ops in _LINALG for op in ops})
# recorded through the derivatives of lu_factor_ex, solve_triangular, solve_ex, inv_ex, slogdet, cholesky_ex, qr,
# eigh, svd
COMPOSITES |= {"linalg_lu_factor", "linalg_lu", "lu_unpack", "lu", "linalg_solve", "inverse", "logdet",
               "linalg_cholesky", "cholesky", "cholesky_solve", "cholesky_inverse", "qr", "linalg_lu_solve", "lu_solve",
               "triangular_solve", "matrix_power", "linalg_eigvalsh", "linalg_svdvals", "svd",
               "linalg_pinv", "pinverse", "linalg_cond", "linalg_lstsq"}
# ----- stft/istft (matmuls against a cached DFT basis) and the odd numerical functions and samplers: composites
_SP, _SG = "test_spectral.py::", "test_signal_more.py::"
TESTS.update({"stft": (_SP + "test_stft_matches_numpy_fft", _SP + "test_spectral_gradcheck"),
              "istft": (_SP + "test_stft_defaults_method_and_istft_round_trip", _SP + "test_spectral_gradcheck"),
              **{op: (_SG + "test_angle_and_adjoints", _SG + "test_signal_more_gradcheck") for op in ("angle", "adjoint")},
              "gradient": (_SG + "test_gradient_matches_numpy", _SG + "test_signal_more_gradcheck"),
              "cond": (_SG + "test_nonzero_static_slice_inverse_cond", _SG + "test_signal_more_gradcheck"),
              **{op: (_SG + "test_nonzero_static_slice_inverse_cond", None) for op in ("nonzero_static", "slice_inverse")},
              "histogramdd": (_SG + "test_histogramdd_matches_numpy", None),
              "lobpcg": (_SG + "test_lobpcg_matches_numpy_eigh", None),
              **{op: (_SG + "test_poisson_binomial_moments_and_checks", None) for op in ("poisson", "binomial")},
              **{op: (_SG + "test_in_place_samplers_moments_and_generator", None)
                 for op in ("cauchy_", "exponential_", "geometric_", "log_normal_")}})
NO_KERNEL |= {"spectral", "signal_more"}
COMPOSITES |= {"stft", "istft", "angle", "adjoint", "gradient", "cond"}
# tritensor.linalg's functions are named without the prefix: the tests call L.<name>(
MENTIONS.update({op: ("L." + op[len("linalg_"):] + "(",) for _, _, ops in _LINALG for op in ops
                 if op.startswith("linalg_")})



@functools.lru_cache(maxsize=None)
def _parsed(file: str):
    """(lines, module-level assignments by name, test functions by name) of a test file."""
    src = (TESTS_DIR / file).read_text()
    lines = src.splitlines()
    defs, funcs = {}, {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    defs[t.id] = ast.get_source_segment(src, node)
        elif isinstance(node, ast.FunctionDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            funcs[node.name] = "\n".join(lines[first - 1:node.end_lineno])
    return defs, funcs


def _test_text(ref: str):
    """The test function's source with its decorators (parametrizations), followed by the source
    of the module-level names it uses (the op tables it iterates), two levels deep; None if the
    file has no such function."""
    file, name = ref.split("::")
    defs, funcs = _parsed(file)
    if name not in funcs:
        return None
    text = funcs[name]
    for _ in range(2):
        used = set(re.findall(r"\b[A-Z_][A-Z0-9_]*\b", text))
        text += "".join("\n" + defs[u] for u in sorted(used & set(defs)) if defs[u] not in text)
    return text


def _mentions(text: str, op) -> bool:
    """Does ``text`` call ``op``: its name as a word (or its MENTIONS); an in-place form ``x_`` by
    name, or as ``x`` with the trailing underscore added in the test (``getattr(t, op + "_")``)."""
    if op.inplace_of:
        return _said(text, op.name) or (_said(text, op.inplace_of) and '+ "_"' in text)
    return _said(text, op.name)


def _said(text: str, name: str) -> bool:
    if name in MENTIONS:
        return any(m in text for m in MENTIONS[name])
    return re.search(rf"\b{re.escape(name)}(?!\w)", text) is not None


def _family(op) -> str:
    module = op.impl.__module__
    assert module.startswith("tritensor.core.ops."), f"{op.name}: core entry in {module}"
    return module.rsplit(".", 1)[1]


# ----- structure ---------------------------------------------------------------------------------
def test_tensor_attributes_are_all_defined_in_core():
    """No layer above core rebinds a Tensor attribute: every function or property on Tensor (and
    its bases) was defined by a module of tritensor.core."""
    variant = os.environ.get("TRITENSOR_TEST_DEVICE", "cpu").strip().lower()
    test_only = {"numpy"} if variant == "cuda" else set()  # the device-tensor variant's read-back (conftest.py)
    for cls in Tensor.__mro__[:-1]:  # Tensor and its mixins (op methods, composites) and base
        for name, attr in vars(cls).items():
            if cls is Tensor and name in test_only:
                continue
            fns = [attr.fget, attr.fset] if isinstance(attr, property) else [getattr(attr, "__func__", attr)]
            for fn in fns:
                if inspect.isfunction(fn):
                    assert fn.__module__.startswith("tritensor.core."), f"{cls.__name__}.{name} from {fn.__module__}"


def test_no_module_rebinds_tensor_or_installs_anything():
    pattern = re.compile(r"setattr\(\s*Tensor\b|^\s*Tensor\.\w+\s*=|\bdef install\(|\bRAW\s*=", re.M)
    offenders = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        # Only our package: not the tests, nor a virtual environment or build tree in the checkout
        # (CI creates .venv/ here, and site-packages may well contain `Tensor.x = ...`).
        if rel.parts[0] in ("tests", "benchmarks", "build") or any(p.startswith(".") for p in rel.parts):
            continue
        if pattern.search(path.read_text()):
            offenders.append(str(rel))
    assert offenders == []


def test_every_table_op_is_exposed_as_declared():
    import tritensor.nn.functional as F

    for op in OPS.values():
        names = (op.name,) + op.aliases
        for name in names:
            assert (name in vars(TensorOps)) == op.method, name
            assert hasattr(tt, name) or not op.function, name
        # hand-written in nn/functional.py with torch's extra arguments (inplace=, approximate=, implicit dim)
        hand_written = ("relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax")
        # F.unfold is im2col (nn.functional's own), a different op from Tensor.unfold's windows
        assert hasattr(F, op.name) == op.functional or op.name in hand_written + ("unfold",), op.name
        for d in op.dunders + op.rdunders:
            assert d in vars(TensorOps), d


def test_dispatch_layers_run_in_the_declared_order(monkeypatch):
    assert dispatch.ORDER == ("autocast", "autograd")
    assert dispatch.registered("autograd") is not None  # registered by `import tritensor.autograd`
    seen = []

    def autocast(op, args, kwargs, next):
        seen.append(("autocast", op.name))
        return next(op, args, kwargs)

    real_autograd = dispatch.registered("autograd")

    def autograd(op, args, kwargs, next):
        seen.append(("autograd", op.name))
        return real_autograd(op, args, kwargs, next)

    monkeypatch.setattr(dispatch, "_layers", {})
    monkeypatch.setattr(dispatch, "_needed", {})
    monkeypatch.setattr(dispatch, "_gates", ())
    monkeypatch.setattr(dispatch, "_flags", ())
    monkeypatch.setattr(dispatch, "_flags_by_name", {})
    monkeypatch.setattr(dispatch, "_entry", dispatch._chain(0))
    dispatch.register_layer("autograd", autograd)  # registered in the "wrong" order on purpose
    dispatch.register_layer("autocast", autocast)
    x = tt.ones(3, requires_grad=True)
    y = x.exp()
    assert seen == [("autocast", "exp"), ("autograd", "exp")]
    assert type(y.grad_fn).__name__ == "ExpBackward0"
    with pytest.raises(ValueError, match="must be one of"):
        dispatch.register_layer("cache", autocast)


def test_an_unregistered_layer_passes_through(monkeypatch):
    monkeypatch.setattr(dispatch, "_layers", {})
    monkeypatch.setattr(dispatch, "_needed", {})
    monkeypatch.setattr(dispatch, "_gates", ())
    monkeypatch.setattr(dispatch, "_flags", ())
    monkeypatch.setattr(dispatch, "_flags_by_name", {})
    monkeypatch.setattr(dispatch, "_entry", dispatch._chain(0))
    x = tt.ones(3, requires_grad=True)
    y = x * 2  # no autograd layer: the core entry alone, nothing recorded
    assert y.grad_fn is None and not y.requires_grad and y.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="served by tritensor.autograd"):
        y.backward()


def test_a_call_no_layer_needs_goes_straight_to_the_core_entry(monkeypatch):
    # No input requires grad and no autocast region: the layers are skipped (the fast path),
    # and the result is bit for bit the layered path's.
    rng = np.random.default_rng(5)
    a = tt.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    b = tt.tensor(rng.standard_normal((4,)).astype(np.float32))
    calls = []
    for name in dispatch.ORDER:
        real = dispatch.registered(name)
        monkeypatch.setitem(dispatch._layers, name, lambda op, args, kwargs, next, real=real, name=name:
                            calls.append((name, op.name)) or real(op, args, kwargs, next))
    monkeypatch.setattr(dispatch, "_entry", dispatch._chain(0))
    fast = [(a * b + 1.5).relu(), a.sum(dim=1), a @ b, (a > b).float()]
    assert calls == []
    with tt.autocast("cpu", dtype=tt.bfloat16, enabled=False):  # a region, but not an enabled one
        a + b
    assert calls == []
    leaf = tt.ones(4, requires_grad=True)
    (b * leaf).sum()
    assert ("autograd", "mul") in calls and ("autograd", "sum") in calls
    with tt.no_grad():
        calls.clear()
        b * leaf
        assert calls == []
    monkeypatch.setattr(dispatch, "_gates", tuple(dispatch._always for _ in dispatch.ORDER))  # every call layered
    layered = [(a * b + 1.5).relu(), a.sum(dim=1), a @ b, (a > b).float()]
    assert len(calls) > 0
    for f, l in zip(fast, layered):
        assert f.dtype is l.dtype and f.numpy().tobytes() == l.numpy().tobytes()


def test_derivatives_launch_kernels_only_through_core_entries():
    """A derivative's backward runs a core entry (argument checks, allocation, the launch), never a
    kernel launcher: autograd/ imports nothing from triton_kernels/ or the launch point."""
    bad = []
    for path in sorted((ROOT / "autograd").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module.split(".")[0] == "triton_kernels" or node.module.startswith("runtime.launch")
                    or any(a.name in ("triton_kernels", "launch") for a in node.names)):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bad == []


# ----- bookkeeping ---------------------------------------------------------------------------------
def test_every_op_has_an_autocast_category_from_the_maintained_lists():
    listed = [n for names in AUTOCAST.values() for n in names]
    assert len(listed) == len(set(listed)), "an op is in two autocast lists"
    assert set(listed) <= set(OPS), sorted(set(listed) - set(OPS))
    for op in OPS.values():
        assert op.autocast in CATEGORIES
        expected = next((c for c, names in AUTOCAST.items() if op.name in names), "none")
        assert op.autocast == expected, f"{op.name}: table says {op.autocast}, the maintained list {expected}"


def test_every_op_is_covered_in_its_family_files():
    """For every op of the table, in the files of its family X (its core entry's module):
    triton_kernels/X.py exists and core/ops/X.py imports it (or, for a family of KERNEL_FAMILY,
    the other family's kernel file exists and core/ops/X.py uses that family's core entries);
    its derivative, if any, is in autograd/functions/X.py; tests/test_X.py holds a forward test
    calling it and, if it is differentiable (a derivative, or made of recorded ops), a gradcheck
    of it."""
    kernel_ops = {name for name, op in OPS.items() if op.kernel}
    assert set(API) == set(OPS) - kernel_ops
    assert set(TESTS) == kernel_ops, (f"ops without tests: {sorted(kernel_ops - set(TESTS))}; "
                                      f"tests of no op: {sorted(set(TESTS) - kernel_ops)}")
    problems = []
    for name, (forward_ref, grad_ref) in TESTS.items():
        op = OPS[name]
        family = _family(op)
        core_src = (ROOT / "core" / "ops" / f"{KERNEL_IMPORTER.get(family, family)}.py").read_text()
        if family in KERNEL_FAMILY:
            other = KERNEL_FAMILY[family]
            if not (ROOT / "triton_kernels" / f"{other}.py").exists():
                problems.append(f"{name}: no triton_kernels/{other}.py")
            elif not re.search(rf"from \. import {other}\b", core_src):
                problems.append(f"{name}: core/ops/{family}.py does not use core/ops/{other}.py's entries")
        elif family not in NO_KERNEL:
            if not (ROOT / "triton_kernels" / f"{family}.py").exists():
                problems.append(f"{name}: no triton_kernels/{family}.py")
            elif not re.search(rf"from \.\.\.triton_kernels import {family}\b", core_src):
                problems.append(f"{name}: core/ops/{KERNEL_IMPORTER.get(family, family)}.py does not import "
                                f"triton_kernels/{family}.py")
        if name in DERIVATIVES and DERIVATIVES[name].__module__ != f"tritensor.autograd.functions.{family}":
            problems.append(f"{name}: derivative in {DERIVATIVES[name].__module__}, "
                            f"not autograd/functions/{family}.py")
        for ref in (forward_ref, grad_ref):
            if ref is not None and not re.match(rf"test_{family}(_\w+)?\.py::", ref):  # a family's file may be split
                problems.append(f"{name}: {ref} is not in tests/test_{family}.py (or test_{family}_*.py)")
        text = _test_text(forward_ref)
        if text is None or not _mentions(text, op):
            problems.append(f"{name}: {forward_ref} " + ("does not call it" if text else "does not exist"))
        differentiable = name in DERIVATIVES or name in COMPOSITES
        if differentiable != (grad_ref is not None):
            problems.append(f"{name}: " + ("differentiable, but no gradcheck is listed" if differentiable
                                          else f"has no derivative, yet {grad_ref} is listed"))
        elif grad_ref is not None:
            text = _test_text(grad_ref)
            if text is None:
                problems.append(f"{name}: {grad_ref} does not exist")
            elif "gradcheck" not in text and ".backward(" not in text:
                problems.append(f"{name}: {grad_ref} checks no gradient")
            elif not _mentions(text, op):
                problems.append(f"{name}: {grad_ref} does not call it")
    assert problems == [], "\n".join(problems)


def test_every_elementwise_record_has_its_derivative_row():
    """An elementwise op is one record (triton_kernels/elementwise.py: SPECS) and, above the kernels,
    one derivative row keyed by its name (autograd/functions/elementwise.py): every record of the
    elementwise family whose result is not bool has a row, and no row names anything else."""
    rows = {1: set(_ew_grad.UNARY_FORMULAS), 2: set(_ew_grad.BINARY_FORMULAS)}
    for arity, have in rows.items():
        want = {s.name for s in _ew_kernel.SPECS if s.arity == arity and s.family == "elementwise"
                and s.ints not in ("bool", "only")}  # integer-only ops (gcd, lcm) have no gradient
        assert have == want, (f"arity {arity}: records without a derivative row {sorted(want - have)}, "
                              f"rows without a record {sorted(have - want)}")
    no_grad = {s.name for s in _ew_kernel.SPECS if s.ints == "bool" or s.family == "bitwise"}
    assert not no_grad & set(DERIVATIVES), sorted(no_grad & set(DERIVATIVES))


def test_elementwise_records_are_consistent():
    """Each record's fields are among the values the layers read, and its category is the table's."""
    names = [s.name for s in _ew_kernel.SPECS]
    assert len(names) == len(set(names)) and set(names) == set(_ew_kernel.SPEC)
    for s in _ew_kernel.SPECS:
        assert s.arity in (1, 2) and s.ints in ("float", "keep", "bool", "refuse", "only"), s
        assert s.inplace in ("method", "function", ""), s
        assert (s.name + "_" in OPS) == bool(s.inplace) and (not s.inplace or OPS[s.name + "_"].function
                                                              == (s.inplace == "function")), s
        assert s.autocast in CATEGORIES and s.family in ("elementwise", "bitwise"), s
        assert not s.reflected or s.dunder, s
        assert OPS[s.name].autocast == s.autocast and OPS[s.name].aliases == s.aliases, s

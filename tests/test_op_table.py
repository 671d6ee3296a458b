"""The op table (core/ops/table.py) and the one dispatch path (core/dispatch.py).

Two kinds of checks:
- the structure: Tensor's methods are made once, in core, from the table; nothing above core
  rebinds them; every op call passes the dispatcher's layers in the declared order;
- the bookkeeping: :data:`TESTS` below is the maintained list of every op's kernel test and
  derivative test, and :data:`AUTOCAST` the maintained PyTorch autocast lists. Both are compared
  with the table, so an op added without tests, or without a category, fails here.
"""
import ast
import inspect
import pathlib
import re

import pytest

import tritensor as tt
from tritensor.autograd.functions import DERIVATIVES
from tritensor.core import dispatch
from tritensor.core.ops.table import API, CATEGORIES, OPS
from tritensor.core.tensor import Tensor, TensorOps
from tritensor.core.tensor_base import TensorBase

ROOT = pathlib.Path(tt.__file__).resolve().parent
TESTS_DIR = pathlib.Path(__file__).resolve().parent

# ----- the maintained lists ----------------------------------------------------------------------
# PyTorch's CUDA autocast lists, restricted to tritensor's ops; every other op is "none".
AUTOCAST = {
    "lower": ["matmul", "mm", "bmm", "linear", "conv2d"],
    "fp32": ["exp", "exp2", "expm1", "log", "log2", "log1p", "reciprocal", "rsqrt", "pow", "sum", "prod", "cumsum",
             "softmax", "log_softmax", "layer_norm", "native_layer_norm", "cross_entropy", "nll_loss", "mse_loss",
             # issue 15 (ops15)
             "logsumexp", "norm", "linalg_vector_norm", "linalg_matrix_norm", "cumprod"],
    "promote": ["add", "sub", "mul", "div", "maximum", "minimum", "floor_divide", "remainder", "where", "scatter_add",
                "index_add",
                # issue 15 (ops15): cat/stack promote; hstack/vstack are cat in PyTorch
                "cat", "stack", "hstack", "vstack", "dot"],
}

E, A, I, R = "test_elementwise.py", "test_autograd_ops.py", "test_index.py", "test_reduce.py"
UNARY = ["neg", "abs", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh",
         "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "erf", "reciprocal", "square"]
PIECEWISE = ["floor", "ceil", "trunc", "sign"]
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder"]
COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
VIEWS = ["view", "reshape", "transpose", "permute", "expand", "squeeze", "unsqueeze", "narrow", "select"]
# op -> (its kernel test, its derivative test or None when it has no derivative), as "file::function".
TESTS = {
    **{op: (f"{E}::test_unary_against_float64", f"{A}::test_unary_gradcheck") for op in UNARY},
    **{op + "_": (f"{E}::test_inplace_forms_match_out_of_place", f"{A}::test_inplace_unary_gradcheck_every_op")
       for op in UNARY},
    **{op: (f"{E}::test_unary_against_float64", f"{A}::test_piecewise_constant_ops_have_zero_gradient")
       for op in PIECEWISE},
    **{op + "_": (f"{E}::test_inplace_forms_match_out_of_place", f"{A}::test_piecewise_constant_forms_have_zero_gradient")
       for op in PIECEWISE},
    **{op: (f"{E}::test_binary_broadcast_and_strides", f"{A}::test_binary_gradcheck_with_broadcasting") for op in BINARY},
    **{op + "_": (f"{E}::test_inplace_forms_match_out_of_place", f"{A}::test_inplace_binary_gradcheck_every_op")
       for op in BINARY},
    "floor_divide": (f"{E}::test_binary_broadcast_and_strides", f"{A}::test_piecewise_constant_forms_have_zero_gradient"),
    "floor_divide_": (f"{E}::test_inplace_forms_match_out_of_place",
                      f"{A}::test_piecewise_constant_forms_have_zero_gradient"),
    **{op: (f"{E}::test_comparisons_return_bool", None) for op in COMPARISONS},
    **{op + "_": (f"{E}::test_inplace_forms_match_out_of_place", None) for op in COMPARISONS},
    **{op: (f"{E}::test_logical_ops_and_their_operators", None)
       for op in ("logical_not", "logical_not_", "logical_and", "logical_and_", "logical_or", "logical_or_", "invert")},
    **{op: (f"{E}::test_clamp_forms_match_numpy", f"{A}::test_clamp_forms_gradcheck")
       for op in ("clamp_", "clamp_min", "clamp_max")},
    "clamp": (f"{E}::test_clamp_forms_match_numpy", f"{A}::test_where_and_clamp"),
    "where": (f"{E}::test_where_broadcasts_and_promotes", f"{A}::test_where_and_clamp"),
    "matmul": ("test_matmul.py::test_matmul_broadcast_and_vectors", f"{A}::test_matmul_gradcheck"),
    "mm": ("test_matmul.py::test_mm_bmm_and_methods", f"{A}::test_matmul_noncontiguous_mm_bmm_and_second_derivative"),
    "bmm": ("test_matmul.py::test_mm_bmm_and_methods", f"{A}::test_matmul_noncontiguous_mm_bmm_and_second_derivative"),
    "linear": ("test_matmul.py::test_linear_fused_epilogue", f"{A}::test_linear_gradcheck"),
    **{op: (f"{R}::test_sumlike_against_float64", f"{A}::test_reduction_gradcheck")
       for op in ("sum", "mean", "prod", "amax", "amin", "max", "min", "var", "std")},
    **{op: (f"{R}::test_sumlike_against_float64", None) for op in ("argmax", "argmin")},
    **{op: (f"{R}::test_all_any_on_floats", None) for op in ("all", "any")},
    "cumsum": ("test_cumsum.py::test_cumsum_matches_numpy", "test_cumsum.py::test_cumsum_gradcheck"),
    "softmax": ("test_softmax.py::test_against_float64", f"{A}::test_reduction_gradcheck"),
    "log_softmax": ("test_softmax.py::test_against_float64", f"{A}::test_reduction_gradcheck"),
    "layer_norm": ("test_layer_norm.py::test_against_float64", f"{A}::test_layer_norm_gradcheck"),
    "native_layer_norm": ("test_layer_norm.py::test_native_layer_norm_statistics", f"{A}::test_layer_norm_gradcheck"),
    "conv2d": ("test_conv.py::test_conv2d_forward_and_backward", f"{A}::test_conv2d_gradcheck"),
    "max_pool2d": ("test_pool.py::test_max_pool2d", f"{A}::test_max_pool2d_gradcheck"),
    "max_pool2d_with_indices": ("test_pool.py::test_max_pool2d", f"{A}::test_max_pool2d_gradcheck"),
    "avg_pool2d": ("test_pool.py::test_avg_pool2d", f"{A}::test_avg_pool2d_gradcheck"),
    "cross_entropy": ("test_nn.py::test_cross_entropy_kernel_vs_numpy", f"{A}::test_cross_entropy_and_friends_gradcheck"),
    "nll_loss": ("test_nn.py::test_nll_loss_weight_vs_numpy", None),  # made of recorded ops (gradchecked as a friend)
    "mse_loss": ("test_nn.py::test_mse_loss_vs_numpy", None),  # likewise
    "index_select": (f"{I}::test_index_select_and_gather", f"{I}::test_gradcheck"),
    "gather": (f"{I}::test_index_select_and_gather", f"{I}::test_gradcheck"),
    **{op: (f"{I}::test_scatter_add_and_index_add_accumulate_duplicates", None)
       for op in ("scatter_add", "scatter_add_", "index_add", "index_add_")},
    "getitem": (f"{I}::test_getitem_matches_numpy", f"{A}::test_view_gradcheck"),
    "setitem": (f"{I}::test_setitem_matches_numpy", f"{A}::test_setitem_gradcheck"),
    **{op: ("test_tensor.py::test_view_semantics_match_numpy", f"{A}::test_view_gradcheck") for op in VIEWS},
    "clone": ("test_cast.py::test_strided_copy_layouts", f"{A}::test_casts_and_copies"),
    "to": ("test_cast.py::test_float_to_float_bit_exact", f"{A}::test_casts_and_copies"),
    "copy_": ("test_cast.py::test_copy_into_strided_destination_and_broadcast", f"{A}::test_casts_and_copies"),
    "fill_": ("test_cast.py::test_fill_float64_keeps_double_precision", f"{A}::test_fill_gradcheck"),
    # ----- issue 15 (ops15): joining and reshaping -----
    **{op: ("test_join.py::test_cat_and_stack_match_numpy", "test_join.py::test_join_gradcheck")
       for op in ("cat", "stack")},
    **{op: ("test_join.py::test_hstack_vstack", "test_join.py::test_join_gradcheck") for op in ("hstack", "vstack")},
    **{op: ("test_join.py::test_flip_roll_repeat_tile_match_numpy", "test_join.py::test_join_gradcheck")
       for op in ("flip", "roll", "repeat", "tile")},
    **{op: ("test_join.py::test_tril_triu_diag_match_numpy", "test_join.py::test_join_gradcheck")
       for op in ("tril", "triu", "diag", "diagonal")},
    "movedim": ("test_join.py::test_movedim_is_a_view_and_free_squeeze_unsqueeze_flatten",
                "test_join.py::test_join_gradcheck"),
    # ----- issue 15 (ops15): math and comparison -----
    **{op: ("test_math_ops.py::test_round_and_classification_match_numpy", None)
       for op in ("isnan", "isinf", "isfinite")},
    **{op: ("test_math_ops.py::test_round_and_classification_match_numpy", "test_math_ops.py::test_math_gradcheck")
       for op in ("round", "nan_to_num")},
    **{op: ("test_math_ops.py::test_inplace_forms_integers_and_empty", "test_math_ops.py::test_math_gradcheck")
       for op in ("round_", "nan_to_num_")},
    **{op: ("test_math_ops.py::test_isclose_allclose_equal", None) for op in ("isclose", "allclose", "equal")},
    "einsum": ("test_math_ops.py::test_einsum_matches_numpy", None),  # recorded as its pieces (gradchecked too)
    "dot": ("test_math_ops.py::test_dot_outer_trace_logsumexp", "test_math_ops.py::test_math_gradcheck"),
    **{op: ("test_math_ops.py::test_dot_outer_trace_logsumexp", None) for op in ("outer", "trace", "logsumexp")},
    **{op: ("test_math_ops.py::test_norms_match_numpy", None) for op in ("norm", "linalg_vector_norm",
                                                                       "linalg_matrix_norm")},
    # ----- issue 15 (ops15): scans, sorting, selection -----
    **{op: ("test_scan.py::test_cumprod_and_logcumsumexp_match_numpy", "test_scan.py::test_scan_gradcheck")
       for op in ("cumprod", "logcumsumexp")},
    **{op: ("test_sort.py::test_sort_matches_numpy_stable_order", "test_sort.py::test_sort_family_gradcheck")
       for op in ("sort", "msort")},
    "argsort": ("test_sort.py::test_sort_matches_numpy_stable_order", None),
    **{op: ("test_sort.py::test_topk_and_kthvalue", "test_sort.py::test_sort_family_gradcheck")
       for op in ("topk", "kthvalue")},
    "unique": ("test_sort.py::test_unique", None),
    "searchsorted": ("test_sort.py::test_searchsorted", None),
    "bincount": ("test_sort.py::test_bincount", None),
    **{op: ("test_sort.py::test_nonzero_argwhere_masked_ops", None) for op in ("nonzero", "argwhere", "masked_select")},
    **{op: ("test_sort.py::test_nonzero_argwhere_masked_ops", "test_sort.py::test_sort_family_gradcheck")
       for op in ("masked_fill", "masked_fill_")},
    # ----- issue 15 (ops15): random -----
    **{op: ("test_random.py::test_bernoulli_and_multinomial", None) for op in ("bernoulli", "multinomial")},
    **{op: ("test_random.py::test_inplace_fills", "test_random.py::test_inplace_fills_are_recorded_with_a_zero_gradient")
       for op in ("bernoulli_", "normal_", "uniform_", "random_")},
    "normal": ("test_random.py::test_normal_forms_and_gradient", None),  # recorded as z * std + mean
}
# The name a test must mention when it differs from the op's (operators are used, not named).
MENTIONS = {"invert": "~", "getitem": "[", "setitem": "] =", "clone": "copy", "copy_": "copy", "native_layer_norm":
            "native_layer_norm", "max_pool2d_with_indices": "max_pool2d",
            "linalg_vector_norm": "vector_norm", "linalg_matrix_norm": "matrix_norm"}


def _function_source(ref: str) -> str:
    file, name = ref.split("::")
    tree = ast.parse((TESTS_DIR / file).read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment((TESTS_DIR / file).read_text(), node)
    raise AssertionError(f"{ref}: no such test")


# ----- structure ---------------------------------------------------------------------------------
def test_tensor_attributes_are_all_defined_in_core():
    """No layer above core rebinds a Tensor attribute: every function or property on Tensor (and
    its bases) was defined by a module of tritensor.core."""
    for cls in (Tensor, TensorOps, TensorBase):
        for name, attr in vars(cls).items():
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
        assert hasattr(F, op.name) == op.functional or op.name in ("relu", "gelu", "silu", "sigmoid", "tanh"), op.name
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
    monkeypatch.setattr(dispatch, "_entry", dispatch._chain(0))
    x = tt.ones(3, requires_grad=True)
    y = x * 2  # no autograd layer: the core entry alone, nothing recorded
    assert y.grad_fn is None and not y.requires_grad and y.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="served by tritensor.autograd"):
        y.backward()


# ----- bookkeeping ---------------------------------------------------------------------------------
def test_every_op_has_an_autocast_category_from_the_maintained_lists():
    listed = [n for names in AUTOCAST.values() for n in names]
    assert len(listed) == len(set(listed)), "an op is in two autocast lists"
    assert set(listed) <= set(OPS), sorted(set(listed) - set(OPS))
    for op in OPS.values():
        assert op.autocast in CATEGORIES
        expected = next((c for c, names in AUTOCAST.items() if op.name in names), "none")
        assert op.autocast == expected, f"{op.name}: table says {op.autocast}, the maintained list {expected}"


def test_every_op_has_a_kernel_test_and_every_derivative_a_gradcheck():
    kernel_ops = {name for name, op in OPS.items() if op.kernel}
    assert set(API) == set(OPS) - kernel_ops
    assert set(TESTS) == kernel_ops, (f"ops without tests: {sorted(kernel_ops - set(TESTS))}; "
                                      f"tests of no op: {sorted(set(TESTS) - kernel_ops)}")
    for name, (kernel_ref, grad_ref) in TESTS.items():
        base = OPS[name].inplace_of or name
        mention = MENTIONS.get(name, base)
        src = _function_source(kernel_ref)
        file_text = (TESTS_DIR / kernel_ref.split("::")[0]).read_text()
        assert mention in file_text, f"{kernel_ref} does not mention {mention!r} ({name})"
        assert src  # the function exists
        if name in DERIVATIVES:
            assert grad_ref is not None, f"{name} has a derivative but no gradcheck listed"
            g = _function_source(grad_ref)
            assert "gradcheck" in g or ".backward(" in g, f"{grad_ref} checks no gradient"
        else:
            assert grad_ref is None, f"{name} has no derivative, yet {grad_ref} is listed"

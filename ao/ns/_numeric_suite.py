"""PyTorch's ``torch.ao.ns._numeric_suite``, re-targeted from int8 to float formats.

The "quantized" model here is a reduced-precision copy of a float32 model: the same module tree
with its floating point parameters cast to float16 or bfloat16 (``reduced_precision_copy``).
The names, signatures and dict layouts follow PyTorch's:

- ``compare_weights(float_dict, quantized_dict)`` -> ``{key: {'float': w, 'quantized': w_lowp}}``
  for every ``...weight`` entry of the two state dicts.
- ``compare_model_stub`` swaps each module whose type is in ``module_swap_list`` for a ``Shadow``
  that runs the low-precision module and its float32 twin on the same input and logs both
  outputs; -> ``{'<module>.stats': {'float': [...], 'quantized': [...]}}``.
- ``compare_model_outputs`` attaches an ``OutputLogger`` (through a forward hook) to every module
  of an ``allow_list`` type in both models, runs both, and pairs the logged activations;
  -> ``{'<module>.stats': {'float': [...], 'quantized': [...]}}`` (one entry per call).

- ``compare_model_outputs_autocast(float_model, *data, device_type=None, dtype=None)`` (no
  PyTorch counterpart): the same pairing, the "quantized" side being the *same* model (a copy of
  it, identical weights) run inside ``autocast(device_type, dtype)``: what mixed-precision
  inference does to each layer, with the weights left in float32.

Where int8 needs a QuantStub/DeQuantStub, the float formats need a cast: data entering a model,
a shadowed module or its float twin is cast to that module's parameter dtype (float32 for the
float side); a module without floating parameters takes its input as it comes.

Like PyTorch's, ``compare_model_stub`` and ``compare_model_outputs`` change the models they are
given in place (shadows, loggers); pass copies to keep the originals.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from ... import nn
from ...amp import autocast, is_autocast_enabled
from ...nn.parameter import Parameter
from ...autograd.grad_mode import no_grad
from ...core import functional as _F
from ...core.tensor import Tensor
from ...runtime.dtype import bfloat16, float16, float32

__all__ = ["compare_weights", "Logger", "ShadowLogger", "OutputLogger", "Shadow", "prepare_model_with_stubs",
           "compare_model_stub", "get_matching_activations", "prepare_model_outputs", "compare_model_outputs",
           "get_logger_dict", "compute_sqnr", "reduced_precision_copy", "DEFAULT_OUTPUT_LOGGER_ALLOW_LIST",
           "compare_model_outputs_autocast"]

# The modules whose outputs compare_model_outputs logs by default: the leaf layers of tritensor.nn.
DEFAULT_OUTPUT_LOGGER_ALLOW_LIST = {nn.Linear, nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d, nn.ReLU, nn.GELU, nn.MaxPool2d,
                                    nn.AvgPool2d, nn.Flatten, nn.LayerNorm, nn.Dropout}
_LOWP = (float16, bfloat16)


# ----- helpers -------------------------------------------------------------------------------
def reduced_precision_copy(model, dtype=float16):
    """A deep copy of ``model`` with every floating point parameter and buffer cast to ``dtype``
    (float16 or bfloat16); ``model`` is left unchanged."""
    if dtype not in _LOWP:
        raise TypeError(f"reduced_precision_copy: dtype must be tritensor.float16 or tritensor.bfloat16, got {dtype}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"reduced_precision_copy: expected an nn.Module, got {type(model).__name__}")
    return _copy_model(model, dtype)


def _copy_model(model, dtype=None):
    """A deep copy of the module tree whose parameters and buffers are fresh tensors made by the
    tensors' own ops (clone, or a cast to ``dtype`` for floating ones). ``copy.deepcopy`` is not
    used on the tensors: a deep-copied CPU tensor's ``data_ptr()`` still points at the source's
    memory (HostStorage has no ``__deepcopy__``), so kernels would read the wrong buffer."""
    memo = {}
    with no_grad():
        for m in model.modules():
            for table in (m._parameters, m._buffers):
                for t in table.values():
                    if t is None or id(t) in memo:
                        continue
                    d = t.detach()
                    new = d.to(dtype) if dtype is not None and d.dtype.is_floating_point else d.clone()
                    if new is d:
                        new = d.clone()
                    memo[id(t)] = Parameter(new, t.requires_grad) if isinstance(t, Parameter) else new
    return copy.deepcopy(model, memo)


def _param_dtype(module):
    """The dtype of the module's first floating point parameter or buffer, or None."""
    for t in list(module.parameters()) + list(module.buffers()):
        if t.dtype.is_floating_point:
            return t.dtype
    return None


def _cast(x, dtype):
    if dtype is not None and isinstance(x, Tensor) and x.dtype.is_floating_point and x.dtype != dtype:
        return x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    return x


def _detach(x):
    return x.detach() if isinstance(x, Tensor) else x


def _to_float64(x) -> np.ndarray:
    if isinstance(x, Tensor):
        x = x.detach()
        x = (x.float() if x.dtype != float32 else x).numpy()
    return np.asarray(x, dtype=np.float64)


def compute_sqnr(x, y) -> float:
    """Signal to quantization noise ratio in dB, 20*log10(||x|| / ||x - y||), computed in float64
    on the host (``x`` the reference, ``y`` the reduced-precision value; tensors of any floating
    dtype, NumPy arrays, or lists of either, which are concatenated). inf when x == y."""
    if isinstance(x, (list, tuple)) and x and isinstance(x[0], (Tensor, np.ndarray)):
        if not isinstance(y, (list, tuple)) or len(x) != len(y):
            raise ValueError("compute_sqnr: x and y must be lists of the same length")
        x = np.concatenate([_to_float64(v).ravel() for v in x])
        y = np.concatenate([_to_float64(v).ravel() for v in y])
    xs, ys = _to_float64(x), _to_float64(y)
    if xs.shape != ys.shape:
        raise ValueError(f"compute_sqnr: x and y must have the same shape, got {xs.shape} and {ys.shape}")
    ps, pn = np.linalg.norm(xs.ravel()), np.linalg.norm((xs - ys).ravel())
    if pn == 0:
        return math.inf
    if ps == 0:
        return -math.inf
    return float(20 * np.log10(ps / pn))


# ----- weights -------------------------------------------------------------------------------
def _find_match(str_list, key_str, postfix):
    """PyTorch's matcher: the key in ``str_list`` naming the same module's ``postfix`` entry."""
    split_str = key_str.split(".")
    if split_str[-1] == postfix:
        match_string = "".join(key_str.split(".")[0:-1])
        for s2 in str_list:
            pattern1 = "".join(s2.split(".")[0:-1])
            if match_string == pattern1:
                return s2
    return None


def compare_weights(float_dict, quantized_dict):
    """``{key: {'float': w, 'quantized': w_lowp}}`` for every ``weight`` entry of the two state
    dicts (``model.state_dict()`` of the float model and of its reduced-precision copy).

    Raises KeyError when the two dicts' weight keys differ and ValueError when a pair's shapes
    differ: the dicts must come from the same architecture."""
    fw = sorted(k for k in float_dict if k.split(".")[-1] == "weight")
    qw = sorted(k for k in quantized_dict if k.split(".")[-1] == "weight")
    if fw != qw:
        only_f, only_q = sorted(set(fw) - set(qw)), sorted(set(qw) - set(fw))
        raise KeyError(f"compare_weights: the state dicts' weight keys differ: only in float_dict {only_f}, "
                       f"only in quantized_dict {only_q}")
    weight_dict = {}
    for key in quantized_dict:
        if key.split(".")[-1] != "weight":
            continue
        f, q = float_dict[key], quantized_dict[key]
        if tuple(f.shape) != tuple(q.shape):
            raise ValueError(f"compare_weights: '{key}' has shape {tuple(f.shape)} in float_dict and "
                             f"{tuple(q.shape)} in quantized_dict")
        weight_dict[key] = {"float": f, "quantized": q}
    return weight_dict


# ----- loggers -------------------------------------------------------------------------------
def _get_logger_dict_helper(mod, target_dict, prefix=""):
    def get_prefix(prefix):
        return prefix if prefix == "" else prefix + "."

    for name, child in mod.named_children():
        if isinstance(child, Logger):
            target_dict[get_prefix(prefix) + "stats"] = child.stats
            break
    for name, child in mod.named_children():
        module_prefix = get_prefix(prefix) + name if prefix else name
        _get_logger_dict_helper(child, target_dict, module_prefix)


def get_logger_dict(mod, prefix=""):
    """The stats of every Logger in ``mod``, keyed ``'<module name>.stats'`` (PyTorch's layout)."""
    target_dict = {}
    _get_logger_dict_helper(mod, target_dict, prefix)
    return target_dict


class Logger(nn.Module):
    """Base class for stats logging: ``stats`` is the dict the suite collects."""

    def __init__(self):
        super().__init__()
        self.stats = {}
        self.dtype = None  # PyTorch's field (the quantized dtype); unused here

    def forward(self, x):
        pass


class ShadowLogger(Logger):
    """Used in ``Shadow``: records the outputs of the reduced-precision module and its float twin."""

    def __init__(self):
        super().__init__()
        self.stats["float"] = []
        self.stats["quantized"] = []

    def forward(self, x, y):
        if isinstance(x, (tuple, list)) and len(x) > 1:
            x = x[0]
        if isinstance(y, (tuple, list)) and len(y) > 1:
            y = y[0]
        self.stats["quantized"].append(_detach(x))
        self.stats["float"].append(_detach(y))


class OutputLogger(Logger):
    """Records a module's outputs, one entry per call; returns its input unchanged."""

    def __init__(self):
        super().__init__()
        self.stats["tensor_val"] = []

    def forward(self, x):
        self.stats["tensor_val"].append(_detach(x))
        return x


# ----- shadows -------------------------------------------------------------------------------
class Shadow(nn.Module):
    """Runs ``q_module`` (reduced precision) and, on the same input cast to float32, its float
    twin ``float_module``; the logger (an instance of ``logger_cls``) gets both outputs and the
    q_module's output flows on."""

    def __init__(self, q_module, float_module, logger_cls):
        super().__init__()
        self.orig_module = q_module
        self.shadow_module = float_module
        self.logger = logger_cls()

    def _q_dtype(self):
        return _param_dtype(self.orig_module)

    def _float_dtype(self):
        return _param_dtype(self.shadow_module) or float32

    def forward(self, *x):
        output = self.orig_module(*_cast(x, self._q_dtype()))
        shadow_output = self.shadow_module(*_cast(x, self._float_dtype()))
        self.logger(output, shadow_output)
        return output

    # The functional ops (PyTorch's FloatFunctional/QFunctional methods): the low-precision side
    # calls the orig module's method when it has one, else runs the op on its inputs as given.
    def _binary(self, name, fn, x, y):
        own = getattr(self.orig_module, name, None)
        output = own(x, y) if callable(own) else fn(x, y)
        fd = self._float_dtype()
        shadow_own = getattr(self.shadow_module, name, None)
        xf, yf = _cast(x, fd), _cast(y, fd)
        shadow_output = shadow_own(xf, yf) if callable(shadow_own) else fn(xf, yf)
        self.logger(output, shadow_output)
        return output

    def add(self, x, y):
        """torch's Shadow.add: ``x + y`` on the low-precision inputs and on their float32 copies, both logged; the
        low-precision result flows on."""
        return self._binary("add", lambda a, b: a + b, x, y)

    def add_scalar(self, x, y):
        """Shadow.add with a Python number ``y``, logged under 'add_scalar'."""
        return self._binary("add_scalar", lambda a, b: a + b, x, y)

    def mul(self, x, y):
        """torch's Shadow.mul: ``x * y`` in both precisions, both logged; the low-precision result flows on."""
        return self._binary("mul", lambda a, b: a * b, x, y)

    def mul_scalar(self, x, y):
        """Shadow.mul with a Python number ``y``, logged under 'mul_scalar'."""
        return self._binary("mul_scalar", lambda a, b: a * b, x, y)

    def add_relu(self, x, y):
        """torch's Shadow.add_relu: relu(x + y) in both precisions, both logged; the low-precision result flows on."""
        return self._binary("add_relu", lambda a, b: _F.relu(a + b), x, y)

    def cat(self, x, dim=0):
        """torch's ``Shadow.cat``: the orig module's ``cat`` (else ``tritensor.cat``) on ``x``, its
        float twin's on ``x`` cast to float32, both logged; the low-precision result flows on."""
        own = getattr(self.orig_module, "cat", None)
        output = own(x, dim) if callable(own) else _F.cat(x, dim=dim)
        xf = _cast(list(x), self._float_dtype())
        shadow_own = getattr(self.shadow_module, "cat", None)
        shadow_output = shadow_own(xf, dim) if callable(shadow_own) else _F.cat(xf, dim=dim)
        self.logger(output, shadow_output)
        return output


def _check_same_children(float_module, q_module, where):
    fc, qc = dict(float_module.named_children()), dict(q_module.named_children())
    if list(fc) != list(qc):
        raise ValueError(f"the float and quantized models differ at '{where or '<root>'}': children "
                         f"{list(fc)} vs {list(qc)}")
    for name in fc:
        if type(fc[name]) is not type(qc[name]) and not isinstance(qc[name], Shadow):
            path = f"{where}.{name}" if where else name
            raise ValueError(f"the float and quantized models differ at '{path}': "
                             f"{type(fc[name]).__name__} vs {type(qc[name]).__name__}")
    return fc, qc


def _prepare_with_stubs(float_module, q_module, module_swap_list, logger_cls, where):
    fc, qc = _check_same_children(float_module, q_module, where)
    reassign = {}
    for name, mod in qc.items():
        float_mod = fc[name]
        path = f"{where}.{name}" if where else name
        if type(float_mod) in module_swap_list:
            if not isinstance(mod, Shadow):
                reassign[name] = Shadow(mod, float_mod, logger_cls)
        else:
            _prepare_with_stubs(float_mod, mod, module_swap_list, logger_cls, path)
    for key, value in reassign.items():
        q_module._modules[key] = value


def prepare_model_with_stubs(float_module, q_module, module_swap_list, logger_cls):
    """Swap each submodule of ``q_module`` whose float counterpart's type is in
    ``module_swap_list`` for a ``Shadow(q_sub, float_sub, logger_cls)`` (in place). The two
    models must have the same module tree (ValueError otherwise)."""
    _check_models(float_module, q_module)
    _prepare_with_stubs(float_module, q_module, set(module_swap_list), logger_cls, "")


def _check_models(float_model, q_model):
    for m, what in ((float_model, "float_model"), (q_model, "q_model")):
        if not isinstance(m, nn.Module):
            raise TypeError(f"{what} must be an nn.Module, got {type(m).__name__}")
    if float_model is q_model:
        raise ValueError("float_model and q_model are the same object: pass a reduced-precision copy "
                         "(reduced_precision_copy(model, dtype))")
    if type(float_model) is not type(q_model):
        raise ValueError(f"the float and quantized models differ: {type(float_model).__name__} vs "
                         f"{type(q_model).__name__}")


def compare_model_stub(float_model, q_model, module_swap_list, *data, logger_cls=ShadowLogger):
    """Shadow every module of a ``module_swap_list`` type with its float32 twin, run ``q_model``
    on ``data`` (cast to its parameter dtype) and return ``get_logger_dict(q_model)``:
    ``{'<module>.stats': {'float': [...], 'quantized': [...]}}``."""
    prepare_model_with_stubs(float_model, q_model, module_swap_list, logger_cls)
    with no_grad():
        q_model(*_cast(data, _param_dtype(q_model)))
    return get_logger_dict(q_model)


# ----- outputs -------------------------------------------------------------------------------
def _output_logger_hook(module, args, output):
    return module.activation_post_process(output)


def _attach_output_loggers(model, logger_cls, allow_list):
    for _, mod in model.named_modules():
        if type(mod) in allow_list and not isinstance(mod, Logger):
            old = mod._modules.get("activation_post_process")
            if isinstance(old, Logger) and hasattr(old, "_ns_hook"):
                old._ns_hook.remove()
            logger = logger_cls()
            mod.add_module("activation_post_process", logger)
            object.__setattr__(logger, "_ns_hook", mod.register_forward_hook(_output_logger_hook))


def prepare_model_outputs(float_module, q_module, logger_cls=OutputLogger, allow_list=None):
    """Attach a ``logger_cls`` (through a forward hook, as the child ``activation_post_process``)
    to every module of an ``allow_list`` type in both models (in place; a second call replaces
    the loggers). The default allow_list is ``DEFAULT_OUTPUT_LOGGER_ALLOW_LIST``."""
    _check_models(float_module, q_module)
    allow_list = DEFAULT_OUTPUT_LOGGER_ALLOW_LIST if allow_list is None else set(allow_list)
    fnames = [(n, type(m)) for n, m in float_module.named_modules() if not isinstance(m, Logger)]
    qnames = [(n, type(m)) for n, m in q_module.named_modules() if not isinstance(m, Logger)]
    if fnames != qnames:
        diff = sorted(set(fnames) ^ set(qnames), key=str)
        raise ValueError(f"the float and quantized models have different module trees: {diff[:6]}")
    _attach_output_loggers(float_module, logger_cls, allow_list)
    _attach_output_loggers(q_module, logger_cls, allow_list)


def get_matching_activations(float_module, q_module):
    """``{'<module>.stats': {'float': [...], 'quantized': [...]}}`` pairing the OutputLogger
    values of the two models by module name."""
    float_dict = get_logger_dict(float_module)
    quantized_dict = get_logger_dict(q_module)
    act_dict = {}
    for key in quantized_dict:
        if len(quantized_dict[key].get("tensor_val", [])) == 0:
            continue
        match_key = _find_match(sorted(float_dict, reverse=True), key, "stats")
        if match_key is not None:
            act_dict[key] = {"float": float_dict[match_key]["tensor_val"],
                             "quantized": quantized_dict[key]["tensor_val"]}
    return act_dict


def compare_model_outputs(float_model, q_model, *data, logger_cls=OutputLogger, allow_list=None):
    """Log the outputs of every ``allow_list`` module in both models for the same ``data``
    (cast to each model's parameter dtype) and pair them: ``{'<module>.stats': {'float': [...],
    'quantized': [...]}}``."""
    prepare_model_outputs(float_model, q_model, logger_cls, allow_list)
    with no_grad():
        float_model(*_cast(data, _param_dtype(float_model) or float32))
        q_model(*_cast(data, _param_dtype(q_model)))
    return get_matching_activations(float_model, q_model)


def compare_model_outputs_autocast(float_model, *data, device_type=None, dtype=None, logger_cls=OutputLogger,
                                   allow_list=None):
    """Log the outputs of every ``allow_list`` module of ``float_model`` run in float32 and of a
    copy of it run inside ``autocast(device_type, dtype)`` on the same ``data``, and pair them:
    ``{'<module>.stats': {'float': [...], 'quantized': [...]}}`` ("quantized": under autocast).

    ``device_type`` defaults to the model's device type; ``dtype`` to autocast's default for it
    (float16 on "cuda", bfloat16 on "cpu"). Loggers are attached to ``float_model`` in place (as
    ``compare_model_outputs`` does); the autocast side is a copy, returned activations only.
    """
    if not isinstance(float_model, nn.Module):
        raise TypeError(f"float_model must be an nn.Module, got {type(float_model).__name__}")
    if _param_dtype(float_model) not in (None, float32):
        raise ValueError(f"compare_model_outputs_autocast: float_model must be float32, its parameters are "
                         f"{_param_dtype(float_model)}")
    if device_type is None:
        params = list(float_model.parameters())
        device_type = params[0].device.type if params else "cpu"
    region = autocast(device_type, dtype=dtype)  # checks device_type and dtype, as autocast does
    with region:
        enabled = is_autocast_enabled(device_type)
    if not enabled:
        raise RuntimeError(f"compare_model_outputs_autocast: autocast({device_type!r}, dtype={dtype}) is "
                           "disabled here (see the warning above): there would be nothing to compare")
    twin = _copy_model(float_model)
    prepare_model_outputs(float_model, twin, logger_cls, allow_list)
    data = _cast(data, float32)
    with no_grad():
        float_model(*data)
        with region:
            twin(*data)
    return get_matching_activations(float_model, twin)

"""``tritensor.autograd.functional``: torch's higher-order autograd helpers.

``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``vhp`` and ``hvp`` take a function and its inputs and
return derivatives of the function at that point, so users need not write the ``autograd.grad``
loops themselves. They follow PyTorch's ``torch/autograd/functional.py`` (BSD licence) line for
line in names, arguments, tuple handling and error messages, written over tritensor's own
``autograd.grad``.

tritensor has no forward-mode AD and no ``vmap``, so two of torch's switches differ in *how*
the answer is computed, never in the answer:

* ``jvp`` and ``hvp`` use the double-backward trick, as torch's own versions do;
* ``vectorize=True`` (and ``strategy="forward-mode"``, which torch only allows with
  ``vectorize=True``) is accepted and computes the Jacobian with one reverse pass per output
  element, as ``vectorize=False`` does: the same values, without torch's batching.
"""
from __future__ import annotations

from ..core.factories import zeros_like
from ..core.functional import stack
from ..core.tensor import Tensor
from .engine import grad as _grad
from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(inp, arg_name, fn_name):
    is_inp_tuple = True
    if not isinstance(inp, tuple):
        inp = (inp,)
        is_inp_tuple = False
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            if is_inp_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                                f"the value at index {i} has type {type(el)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the "
                            f"given {arg_name} has type {type(el)}.")
    return is_inp_tuple, inp


def _tuple_postprocess(res, to_unpack):
    """Unpack ``res`` to a single Tensor where the user gave (or got) one rather than a tuple."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    # With create_graph, an input that requires grad keeps its history through a view, so the
    # result can be differentiated with respect to the caller's tensors; otherwise a fresh leaf.
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs, create_graph):
    if isinstance(inputs[0], Tensor):
        return inputs if create_graph else tuple(inp.detach() for inp in inputs)
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {el_other.size()} but got {el_v.size()}.")


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}."
                               " This is not allowed in strict mode.")
        if not inp.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(f"The hessian of the user-provided function with respect to input {i}"
                                   " is independent of the input. This is not allowed in strict mode."
                                   " You should ensure that your function is thrice differentiable and that"
                                   " the hessian depends on the inputs.")
            if input_type == "jacobian":
                raise RuntimeError("While computing the hessian, found that the jacobian of the user-provided"
                                   f" function with respect to input {i} is independent of the input. This is not"
                                   " allowed in strict mode. You should ensure that your function is twice"
                                   " differentiable and that the jacobian depends on the inputs (this would be"
                                   " violated by a linear function for example).")
            if input_type == "grad_inputs":
                raise RuntimeError(f"The gradient with respect to input {i} is independent of the inputs of the"
                                   " user-provided function. This is not allowed in strict mode.")
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients."
                               " The outputs must be computed in a differentiable manner from the input"
                               " when running in strict mode.")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    # Outputs that do not require grad contribute nothing: they are dropped, not an error.
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs, new_grad_outputs = (), ()
    for out, grad_out in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs += (out,)
            new_grad_outputs += (grad_out,)
    if not new_outputs:
        return (None,) * len(inputs)
    return _grad(new_outputs, inputs, new_grad_outputs, allow_unused=True, create_graph=create_graph,
                 retain_graph=retain_graph)


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    res = ()
    for i, grads_i in enumerate(grads):
        if grads_i is None:
            if strict:
                if stage == "back":
                    raise RuntimeError("The output of the user-provided function is independent of "
                                       f"input {i}. This is not allowed in strict mode.")
                if stage == "back_trick":
                    raise RuntimeError(f"The gradient with respect to the input is independent of entry {i}"
                                       " in the grad_outputs when using the double backward trick to compute"
                                       " forward mode gradients. This is not allowed in strict mode.")
                if stage == "double_back":
                    raise RuntimeError("The jacobian of the user-provided function is independent of "
                                       f"input {i}. This is not allowed in strict mode.")
                raise RuntimeError("The hessian of the user-provided function is independent of "
                                   f"entry {i} in the grad_jacobian. This is not allowed in strict "
                                   "mode as it prevents from using the double backward trick to "
                                   "replace forward mode AD.")
            grads_i = zeros_like(refs[i])
        elif strict and create_graph and not grads_i.requires_grad:
            if "double" not in stage:
                raise RuntimeError("The jacobian of the user-provided function is independent of "
                                   f"input {i}. This is not allowed in strict mode when create_graph=True.")
            raise RuntimeError("The hessian of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when create_graph=True.")
        res += (grads_i,)
    return res


def _prepare_v(v, others, is_others_tuple, create_graph, fn_name, none_msg):
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, others, is_others_tuple)
    elif len(others) != 1 or others[0].nelement() != 1:
        raise RuntimeError(none_msg)
    return v


_V_NONE_INPUT = ("The vector v can only be None if the input to the user-provided function is a single Tensor "
                 "with a single element.")


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``v`` times the Jacobian of ``func`` at ``inputs``: returns ``(func_output, vjp)``."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        v = _prepare_v(v, outputs, is_outputs_tuple, create_graph, "vjp",
                       "The vector v can only be None if the user-provided function returns a single Tensor with "
                       "a single element.")
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """The Jacobian of ``func`` at ``inputs`` times ``v``: returns ``(func_output, jvp)``.

    Computed with the double-backward trick: ``u -> vjp(u)`` is linear in ``u``, and its
    vector-Jacobian product with ``v`` is ``J v``."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, create_graph, "jvp", _V_NONE_INPUT)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_outputs_tuple)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for output ``i`` and input ``j`` a tensor of shape
    ``output_i.shape + input_j.shape`` (nested tuples as torch, unpacked where a single Tensor was
    given or returned). ``vectorize`` and ``strategy="forward-mode"`` give the same values from
    one reverse pass per output element (the module docstring says why)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                             'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                             'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True` and "
                                      '`strategy="forward-mode"` are not supported together (yet). Please either '
                                      'set `create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are '
                               'not supported together (yet). Please either set `strict=False` or '
                               '`strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                                      "only implemented for `vectorize=True`.")
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
        jac = ()
        for i, out in enumerate(outputs):
            jac_i = tuple([] for _ in range(len(inputs)))
            flat = out.reshape(-1)
            for j in range(out.nelement()):
                vj = _autograd_grad((flat[j],), inputs, retain_graph=True, create_graph=create_graph)
                for el_idx, (jac_i_el, vj_el, inp_el) in enumerate(zip(jac_i, vj, inputs)):
                    if vj_el is not None:
                        if strict and create_graph and not vj_el.requires_grad:
                            raise RuntimeError("The jacobian of the user-provided function is independent of "
                                               f"input {i}. This is not allowed in strict mode when "
                                               "create_graph=True.")
                        jac_i_el.append(vj_el)
                    else:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of input "
                                               f"{el_idx}. This is not allowed in strict mode.")
                        jac_i_el.append(zeros_like(inp_el))
            jac += (tuple(_stack_rows(jac_i_el, out, inputs[el_idx]) for el_idx, jac_i_el in enumerate(jac_i)),)
        jac = _grad_postprocess(jac, create_graph)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def _stack_rows(rows, out, inp):
    shape = tuple(out.size()) + tuple(inp.size())
    if not rows:  # an empty output: no rows to stack
        return inp.new_zeros(shape)
    return stack(rows, 0).view(shape)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs`` (the Jacobian of its gradient); for inputs
    ``i`` and ``j`` a tensor of shape ``input_i.shape + input_j.shape``."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_output(outputs, is_outputs_tuple, fn_name):
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].nelement() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``v`` times the Hessian of a scalar ``func`` at ``inputs``: returns ``(func_output, vhp)``."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vhp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, create_graph, "vhp", _V_NONE_INPUT)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "vhp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        _scalar_output(outputs, is_outputs_tuple, "vhp")
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """The Hessian of a scalar ``func`` at ``inputs`` times ``v``: returns ``(func_output, hvp)``
    (the double-backward trick on ``vhp``, as torch)."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, create_graph, "hvp", _V_NONE_INPUT)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "hvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        _scalar_output(outputs, is_outputs_tuple, "hvp")
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        grad_jac = tuple(zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)

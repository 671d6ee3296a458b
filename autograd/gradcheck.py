"""``gradcheck``: compare the analytic Jacobian (backward) with central finite differences.

Analytic: one ``autograd.grad`` per output element, with a one-hot ``grad_outputs``.
Numerical: each input element is nudged by +-eps in place (through the host view of its
memory, so non-contiguous inputs are nudged where they live) and the outputs re-evaluated;
column = (f(x + eps) - f(x - eps)) / 2 eps. Use float64 inputs: in float32 the difference
quotient's rounding error swamps any useful tolerance.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..core.factories import from_numpy, randn, zeros_like
from ..core.tensor import Tensor
from .engine import grad as _grad
from .grad_mode import enable_grad, no_grad


class GradcheckError(RuntimeError):
    """torch.autograd.GradcheckError: raised by gradcheck and gradgradcheck when analytical and numerical
    gradients disagree (a RuntimeError, as torch's)."""
    pass


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(fn, inputs):
    return tuple(o for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor))


def _host(t: Tensor) -> np.ndarray:
    return np.array(t.detach().cpu().numpy(), dtype=np.float64)  # a copy: outputs may alias the inputs


def _perturbable(x: Tensor):
    """A host array to perturb ``x`` through, and the call that makes ``x`` see it.

    CPU tensors are perturbed in place through their shared NumPy view; a CUDA tensor's host
    copy has to be copied back after every change.
    """
    if x.device.type == "cpu":
        return x.detach().numpy(force=True), lambda: None
    host = x.detach().cpu().numpy()
    return host, lambda: x.detach().copy_(from_numpy(host))


def _numerical_jacobians(fn, inputs, diff_idx, eps):
    """jac[i][o] is (numel of input i, numel of output o)."""
    with no_grad():
        outs0 = _outputs(fn, inputs)
    jac = []
    for i in diff_idx:
        x = inputs[i]
        view, push = _perturbable(x)
        cols = [np.zeros((x.numel(), o.numel())) for o in outs0]
        for k, idx in enumerate(np.ndindex(*x.shape)):
            orig = view[idx].item()
            with no_grad():
                view[idx] = orig + eps
                push()
                plus = [_host(o).reshape(-1) for o in _outputs(fn, inputs)]
                view[idx] = orig - eps
                push()
                minus = [_host(o).reshape(-1) for o in _outputs(fn, inputs)]
                view[idx] = orig
                push()
            for o, (p, m) in enumerate(zip(plus, minus)):
                cols[o][k] = (p - m) / (2 * eps)
        jac.append(cols)
    return jac


def _analytical_jacobians(fn, inputs, diff_idx):
    outs = _outputs(fn, inputs)
    diff_inputs = [inputs[i] for i in diff_idx]
    jac = [[np.zeros((inputs[i].numel(), o.numel())) for o in outs] for i in diff_idx]
    for o, out in enumerate(outs):
        if not out.requires_grad:
            continue
        for j in range(out.numel()):
            g = zeros_like(out, device="cpu")
            g.numpy(force=True).reshape(-1)[j] = 1.0
            g = g.to(out.device)
            grads = _grad(out, diff_inputs, g, retain_graph=True, allow_unused=True)
            for n, gi in enumerate(grads):
                if gi is not None:
                    jac[n][o][:, j] = _host(gi).reshape(-1)
    return jac


def _fast_check(func, inputs, diff_idx, eps, atol, rtol):
    """PyTorch's fast mode: compare v^T J u per input for random u, v instead of all of J.
    One backward and two forwards per input; a wrong Jacobian is caught with probability 1."""
    rng = np.random.default_rng(0)
    outs = _outputs(func, inputs)
    vs = [rng.standard_normal(o.shape) for o in outs]
    grads = _grad([o for o in outs], [inputs[i] for i in diff_idx],
                  [from_numpy(v.astype(o.dtype.np)).to(o.device) for v, o in zip(vs, outs)], allow_unused=True)
    for n, i in enumerate(diff_idx):
        x = inputs[i]
        view, push = _perturbable(x)
        u = rng.standard_normal(x.shape)
        orig = view.copy()
        with no_grad():
            view[...] = orig + eps * u
            push()
            plus = [_host(o) for o in _outputs(func, inputs)]
            view[...] = orig - eps * u
            push()
            minus = [_host(o) for o in _outputs(func, inputs)]
            view[...] = orig
            push()
        numerical = sum(float(((p - m) / (2 * eps) * v).sum()) for p, m, v in zip(plus, minus, vs))
        analytical = 0.0 if grads[n] is None else float((_host(grads[n]) * u).sum())
        if not np.isclose(analytical, numerical, rtol=rtol, atol=atol):
            return f"Jacobian mismatch for input {i} (fast mode, v^T J u):\nnumerical:{numerical}\nanalytical:{analytical}\n"
    return None


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, fast_mode=False) -> bool:
    """True if ``func``'s backward matches finite differences at ``inputs`` (else raises
    :class:`GradcheckError`, or returns False with ``raise_exception=False``).
    ``fast_mode=True`` checks random projections v^T J u instead of the full Jacobian."""
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    for i in diff_idx:
        x = inputs[i]
        if x.dtype.name != "float64":
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. "
                          "This check will likely fail if all the inputs are not of double precision floating point.")
    if fast_mode:
        msg = _fast_check(func, inputs, diff_idx, eps, atol, rtol)
        if msg and raise_exception:
            raise GradcheckError(msg)
        return msg is None
    numerical = _numerical_jacobians(func, inputs, diff_idx, eps)
    analytical = _analytical_jacobians(func, inputs, diff_idx)
    for n, i in enumerate(diff_idx):
        for o, (num, ana) in enumerate(zip(numerical[n], analytical[n])):
            if not np.allclose(ana, num, rtol=rtol, atol=atol):
                msg = (f"Jacobian mismatch for output {o} with respect to input {i},\n"
                       f"numerical:{num}\nanalytical:{ana}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True, fast_mode=False) -> bool:
    """gradcheck of the gradient itself (backward with ``create_graph=True``)."""
    inputs = _as_tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = tuple(randn(o.shape, dtype=o.dtype, device=o.device).requires_grad_() for o in outs)
    grad_outputs = _as_tuple(grad_outputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    n_in = len(inputs)

    def first_grads(*args):
        xs, gos = args[:n_in], args[n_in:]
        with enable_grad():  # also while gradcheck evaluates finite differences under no_grad
            ys = _outputs(func, xs)
            return _grad(ys, [xs[i] for i in diff_idx], gos, create_graph=True, allow_unused=True)

    return gradcheck(first_grads, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, fast_mode=fast_mode)

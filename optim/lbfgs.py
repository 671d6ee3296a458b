"""``optim.LBFGS``: limited-memory BFGS with an optional strong-Wolfe line search, as PyTorch's.

L-BFGS keeps the last ``history_size`` pairs ``(s, y)`` (parameter step, gradient change) and
turns the gradient into a quasi-Newton direction with the two-loop recursion (Nocedal & Wright,
Algorithm 7.4), starting from the scaled identity ``H0 = (s.y / y.y) I``. One ``step(closure)``
runs up to ``max_iter`` such iterations, calling ``closure`` (which must zero the gradients,
recompute the loss, call ``backward`` and return the loss) to re-evaluate the model.

All parameters are handled as one flat vector (gathered from the ``.grad`` of each, in order),
so there is one parameter group and no per-parameter options, as in torch. The maths and the
state (``d``, ``t``, ``old_dirs``, ``old_stps``, ``ro``, ``H_diag``, ``prev_flat_grad``,
``prev_loss``, ``n_iter``, ``func_evals``, kept under the first parameter) follow torch's
``torch/optim/lbfgs.py`` step for step, so the trajectory, the number of closure calls and the
state's names are torch's.

How the recursion runs differs. torch's two loops take 4 kernel launches and 2 host syncs per
stored pair, per iteration: 400 launches and 200 syncs an iteration at the default history of
100. Here the pairs are rows of one buffer (:class:`_History`); every inner product the loops
need is a product with rows of that buffer, so each iteration asks the device for two small
matrix products (all rows against ``g``, and against the new pair), runs both loops on the host
in float64 over those numbers and the Gram matrices kept from earlier iterations, and forms the
direction with one more product: a handful of launches and one sync, whatever the history. The
algebra is the same; only the rounding order of the sums differs. The recursion's scalars
(``ro``, ``al``, ``H_diag``, ``t``) are Python floats, never rounded to the parameters' dtype.

``line_search_fn='strong_wolfe'`` is More-Thuente-style bracketing and zoom with cubic
interpolation (``_strong_wolfe``), ported from minFunc through torch's ``lswolfe.lua``.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd.grad_mode import enable_grad, no_grad
from ..core.factories import tensor, zeros
from ..core.functional import cat, mul, sub
from ..core.shape import contiguous_format
from .optimizer import Optimizer


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to ``bounds``
    (default: the interval between the points); the interval's middle when the cubic has none."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step ``t`` along ``d`` satisfying the strong Wolfe conditions (sufficient decrease with
    ``c1``, curvature with ``c2``), found by bracketing then zooming; ``evaluate(t)`` returns the
    loss and the flat gradient at ``x + t d``. Returns ``(f, g, t, evaluations)``."""
    d_norm = d.abs().max().item()
    g = g.clone(memory_format=contiguous_format)
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = g_new.dot(d).item()

    # Bracketing: grow t until an interval [t_prev, t] holds a Wolfe point (or t itself is one).
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone(memory_format=contiguous_format)], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone(memory_format=contiguous_format)], [gtd_prev, gtd_new]
            break
        # extrapolate: a cubic step between 1.01 t and 10 t
        t_next = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new.clone(memory_format=contiguous_format), gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    # Zoom: shrink the bracket around a point satisfying both conditions.
    insufficient = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break  # the bracket is too small to move the parameters
        t = _cubic_minimum(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # A trial within 10% of an end, twice running or past it, moves to 10% inside the end.
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            # not enough decrease, or above the low end: t becomes the high end
            bracket[high], bracket_f[high], bracket_gtd[high] = t, f_new, gtd_new
            bracket_g[high] = g_new.clone(memory_format=contiguous_format)
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_gtd[low] = t, f_new, gtd_new
            bracket_g[low] = g_new.clone(memory_format=contiguous_format)
    return bracket_f[low], bracket_g[low], bracket[low], evals


class _History:
    """The stored pairs ``(s, y)`` as rows ``2j`` and ``2j + 1`` of one buffer, slot ``j``, plus the
    Gram numbers ``s_i . y_j`` and ``y_i . y_j`` between stored pairs (host float64, by slot).

    ``order`` lists the live slots, oldest first. A new pair is written into a free slot before
    its curvature is known; kept, it becomes the newest (evicting the oldest once
    ``history_size`` are live), dropped, its rows are zeroed so that a NaN in them cannot reach a
    later product through a zero coefficient. The buffer starts small and doubles up to
    ``history_size + 1`` slots (the extra one is where the next pair is written).
    """

    def __init__(self, size: int, like, pairs=(), gram=None, layout=None):
        self.size = size
        self.order: list = []
        self.ro: list = []
        k = len(pairs)
        if layout is not None and (len(layout) != 2 or len(layout[1]) != k or len(set(layout[1])) != k
                                   or not all(0 <= j < layout[0] <= size + 1 for j in layout[1])):
            layout = None  # not this history's: lay it out afresh
        self.cap, slots = layout if layout is not None else (min(size + 1, max(8, 2 * k)), range(k))
        self.buf = zeros(2 * self.cap, like.numel(), dtype=like.dtype, device=like.device)
        self.sy = np.zeros((self.cap, self.cap))
        self.yy = np.zeros((self.cap, self.cap))
        for j, (s, y, ro) in zip(slots, pairs):  # a history loaded from a state_dict
            self.buf[2 * j].copy_(s)
            self.buf[2 * j + 1].copy_(y)
            self.order.append(j)
            self.ro.append(float(ro))
        live = np.ix_(self.order, self.order)
        if gram is not None and all(np.shape(a) == (k, k) for a in gram):
            self.sy[live], self.yy[live] = gram  # as they were, where they were: a resumed run is the same run
        elif pairs:  # a state from elsewhere: compute them (the last bits may differ)
            products = (self.buf @ self.buf.T).numpy().astype(np.float64)
            self.sy, self.yy = products[0::2, 1::2].copy(), products[1::2, 1::2].copy()

    def free_slot(self) -> int:
        if len(self.order) == self.cap:
            self._grow()
        live = set(self.order)
        return next(j for j in range(self.cap) if j not in live)

    def _grow(self) -> None:
        cap = min(self.size + 1, 2 * self.cap)
        buf = zeros(2 * cap, self.buf.shape[1], dtype=self.buf.dtype, device=self.buf.device)
        buf[:2 * self.cap].copy_(self.buf)
        sy, yy = np.zeros((cap, cap)), np.zeros((cap, cap))
        sy[:self.cap, :self.cap], yy[:self.cap, :self.cap] = self.sy, self.yy
        self.buf, self.sy, self.yy, self.cap = buf, sy, yy, cap

    def push(self, j: int, new_products) -> float | None:
        """Keep the pair written in slot ``j`` if its curvature ``y.s`` exceeds 1e-10 (torch's
        test); ``new_products[r]`` are buffer row ``r`` against ``(s_j, y_j)``. Returns the new
        ``H_diag`` (``y.s / y.y``) when kept, else None."""
        ys, yy = float(new_products[2 * j + 1, 0]), float(new_products[2 * j + 1, 1])
        if not ys > 1e-10:
            self.buf[2 * j:2 * j + 2].zero_()
            return None
        if len(self.order) == self.size:
            self.order.pop(0)
            self.ro.pop(0)
        self.order.append(j)
        self.ro.append(1.0 / ys)
        live = np.array(self.order)
        self.sy[live, j] = new_products[2 * live, 1]  # s_i . y_j
        self.sy[j, live] = new_products[2 * live + 1, 0]  # s_j . y_i
        self.yy[live, j] = self.yy[j, live] = new_products[2 * live + 1, 1]
        return ys / yy

    def direction(self, g, g_products, H_diag: float, al: list):
        """``-H g`` by the two-loop recursion, its inner products read from ``g_products`` (buffer
        rows against ``g``) and the Gram numbers; ``al`` gets the first loop's coefficients."""
        live = np.array(self.order, dtype=np.int64)
        k = len(live)
        ro = np.array(self.ro)
        sg, yg = g_products[2 * live], g_products[2 * live + 1]
        sy, yy = self.sy[np.ix_(live, live)], self.yy[np.ix_(live, live)]
        a = np.zeros(k)
        for i in range(k - 1, -1, -1):  # q = -g - sum_{m > i} a_m y_m;  a_i = ro_i s_i.q
            a[i] = ro[i] * (-sg[i] - sy[i, i + 1:] @ a[i + 1:])
        yq = -yg - yy @ a  # y_i . q for the final q
        b = np.zeros(k)
        for i in range(k):  # r = H q + sum_{m < i} (a_m - b_m) s_m;  b_i = ro_i y_i.r
            b[i] = ro[i] * (H_diag * yq[i] + (a[:i] - b[:i]) @ sy[:i, i])
        al[:k] = a.tolist()
        coef = np.zeros(2 * self.cap)  # d = -H g + sum_i (a_i - b_i) s_i - H sum_i a_i y_i
        coef[2 * live], coef[2 * live + 1] = a - b, -H_diag * a
        d = tensor(coef, dtype=self.buf.dtype, device=self.buf.device) @ self.buf
        return d.sub_(g * H_diag)

    def publish(self, state: dict) -> None:
        """torch's names for the history: ``old_stps``/``old_dirs`` (views of the buffer) and ``ro``;
        and what torch has no use for, kept so that a run resumed from a state_dict is the same run
        to the bit: the Gram numbers (``gram_sy``, ``gram_yy``, oldest first) and the buffer's
        ``history_layout`` (its capacity and each pair's slot: the sums run in slot order)."""
        state["old_stps"] = [self.buf[2 * j] for j in self.order]
        state["old_dirs"] = [self.buf[2 * j + 1] for j in self.order]
        state["ro"] = list(self.ro)
        live = np.ix_(self.order, self.order)
        state["gram_sy"], state["gram_yy"] = self.sy[live].copy(), self.yy[live].copy()
        state["history_layout"] = (self.cap, list(self.order))


class LBFGS(Optimizer):
    """L-BFGS (PyTorch's ``torch.optim.LBFGS``): ``step(closure)`` runs up to ``max_iter``
    iterations and at most ``max_eval`` closure calls (default ``max_iter * 5 // 4``), stopping
    early when the largest gradient entry is at most ``tolerance_grad`` or the step, the
    directional derivative or the loss change is below ``tolerance_change``. It needs
    ``param_bytes * (2 * history_size + 1)`` more memory."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if not isinstance(lr, (int, float)) or lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not isinstance(max_iter, int) or max_iter < 1:
            raise ValueError(f"LBFGS: max_iter must be a positive int, got {max_iter!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if not isinstance(history_size, int) or history_size < 1:
            raise ValueError(f"LBFGS: history_size must be a positive int, got {history_size!r}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError(f"LBFGS: line_search_fn: only 'strong_wolfe' is supported, got {line_search_fn!r}")
        super().__init__(params, {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                                  "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                                  "history_size": history_size, "line_search_fn": line_search_fn})
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._history: _History | None = None
        self._published = None  # the state's old_dirs list this optimizer's history last wrote
        for p in self._params:
            if not p.dtype.is_floating_point:
                raise TypeError(f"LBFGS: parameters must be floating point, got one of dtype {p.dtype}")
        if len({p.device for p in self._params}) > 1:
            raise RuntimeError("LBFGS: all parameters must be on one device (they are updated as one flat vector)")

    def add_param_group(self, group: dict) -> None:
        """LBFGS keeps a single parameter group: a second one is a ValueError, as torch."""
        if getattr(self, "_params", None) is not None:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(group)

    def _numel(self) -> int:
        return sum(p.numel() for p in self._params)

    def _gather_flat_grad(self):
        """Every parameter's gradient (zeros for none) flattened and concatenated, in order."""
        views = [zeros(p.numel(), dtype=p.dtype, device=p.device) if p.grad is None else p.grad.reshape(-1)
                 for p in self._params]
        return cat(views, 0)

    def _add_grad(self, step_size, update) -> None:
        """``params += step_size * update`` (``update`` flat, in the gather's order)."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(update[offset:offset + n].view_as(p) * step_size)
            offset += n

    def _clone_param(self):
        return [p.clone(memory_format=contiguous_format) for p in self._params]

    def _set_param(self, values) -> None:
        for p, v in zip(self._params, values):
            p.copy_(v)

    def _directional_evaluate(self, closure, x, t, d):
        """The loss and flat gradient at ``x + t d``; the parameters are put back to ``x``."""
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    @no_grad()
    def step(self, closure):
        """Run up to ``max_iter`` L-BFGS iterations; returns the loss ``closure`` gave first."""
        if not callable(closure):
            raise TypeError("LBFGS.step() needs a closure that reevaluates the model and returns the loss "
                            f"(L-BFGS evaluates it several times per step), got {type(closure).__name__}")

        def evaluate():
            with enable_grad():
                return closure()

        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        # L-BFGS's state is global; it lives under the first parameter, as torch keeps it.
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max().item() <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        history = self._history
        if "old_dirs" in state and (history is None or state["old_dirs"] is not self._published):
            # a state loaded from a state_dict: rebuild the buffer from torch's lists
            pairs = list(zip(state["old_stps"], state["old_dirs"], state["ro"]))
            gram = (state["gram_sy"], state["gram_yy"]) if "gram_sy" in state and "gram_yy" in state else None
            history = _History(history_size, flat_grad, pairs, gram, state.get("history_layout"))

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # ---- the descent direction ----
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                history, H_diag = _History(history_size, flat_grad), 1.0
            else:
                j = history.free_slot()
                s_row, y_row = history.buf[2 * j], history.buf[2 * j + 1]
                mul(d, t, out=s_row)
                sub(flat_grad, prev_flat_grad, out=y_row)
                new_products = (history.buf @ history.buf[2 * j:2 * j + 2].T).numpy().astype(np.float64)
                kept = history.push(j, new_products)
                if kept is not None:
                    H_diag = kept
                if "al" not in state:
                    state["al"] = [None] * history_size
                g_products = (history.buf @ flat_grad).numpy().astype(np.float64)
                d = history.direction(flat_grad, g_products, H_diag, state["al"])

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone(memory_format=contiguous_format)
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # ---- the step length ----
            t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d).item()
            if gtd > -tolerance_change:
                break  # not a descent direction any more

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda step, x=x_init, d=d: self._directional_evaluate(evaluate, x, step, d),
                    t, d, loss, flat_grad, gtd)
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max().item() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:  # the last iteration's loss is the next step's first evaluation
                    loss = float(evaluate())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = flat_grad.abs().max().item() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            # ---- stopping ----
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if d.mul(t).abs().max().item() <= tolerance_change:
                break  # the step no longer moves the parameters
            if abs(loss - prev_loss) < tolerance_change:
                break  # nor the loss

        state.update(d=d, t=t, H_diag=H_diag, prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        if history is not None:
            history.publish(state)
            self._history, self._published = history, state["old_dirs"]
        return orig_loss

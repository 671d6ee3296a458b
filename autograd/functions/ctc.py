"""Derivative of ``ctc_loss`` (kernels: ``triton_kernels/ctc.py``; checks: ``core/ops/ctc.py``).

:class:`CtcLoss` runs the alpha kernel (each sample's negative log-likelihood, keeping the
log-alpha table) and, backward, the beta kernel and the gradient kernel: torch's gradient for
``log_probs`` (exact for the logits under a log_softmax, which is what torch returns; see the
kernel file). The reduction after it (division by the target lengths, mean or sum) is dispatched
op by op and recorded. As torch's ``_ctc_loss_backward``, the backward has no derivative itself:
asking for one raises instead of answering zero.
"""
from __future__ import annotations

from ...core.ops import ctc as _ctc
from ..function import BuiltinFunction


class CtcLossBackward(BuiltinFunction):
    """ctc_loss's gradient as a recorded op (from the forward's alphas, by the betas); its own derivative is
    not implemented, as torch's _ctc_loss_backward."""
    @staticmethod
    def forward(ctx, grad_nll, log_probs, loss, log_alpha, prep, zero_infinity):
        return _ctc.nll_backward(prep, grad_nll, loss, log_alpha, zero_infinity)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("derivative for '_ctc_loss_backward' is not implemented.")


class CtcLoss(BuiltinFunction):
    """ctc_loss's derivative: forward keeps the log-probabilities, the losses and the alphas; backward is
    CtcLossBackward."""
    @staticmethod
    def forward(ctx, log_probs, prep, zero_infinity):
        loss, log_alpha = _ctc.nll(prep)
        ctx.prep, ctx.zero_infinity = prep, zero_infinity
        ctx.save_for_backward(log_probs, loss, log_alpha)
        return loss

    @staticmethod
    def backward(ctx, g):
        log_probs, loss, log_alpha = ctx.saved_tensors
        return CtcLossBackward.apply(g, log_probs, loss, log_alpha, ctx.prep, ctx.zero_infinity), None, None


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False):
    """The recorder of ctc_loss: runs it as CtcLoss, so autograd records it (torch's ctc_loss; the checks
    first, the reduction recorded op by op)."""
    lp, tg, in_lens, tgt_lens, offsets, ts, unbatched = _ctc.check(log_probs, targets, input_lengths,
                                                                   target_lengths, blank, reduction, zero_infinity)
    prep = _ctc.Prepared(lp, tg, in_lens, tgt_lens, offsets, ts, blank)
    loss = CtcLoss.apply(lp, prep, zero_infinity)
    return _ctc.reduce(loss, tgt_lens, reduction, zero_infinity, unbatched, log_probs.dtype)


RECORD = {"ctc_loss": ctc_loss}

"""``nn.AdaptiveLogSoftmaxWithLoss``, in torch's file: Grave et al.'s adaptive softmax for large
vocabularies. The frequent classes (below ``cutoffs[0]``) and one entry per tail cluster share a
``head`` Linear; each cluster has a two-layer ``tail`` projection shrunk by ``div_value``. The
parameters, their names and shapes are torch's, so its checkpoints load.

The forward is torch's, except that the per-cluster log-probabilities are added into the output
with ``index_add`` (recorded) instead of torch's in-place ``index_copy_`` into a zeros tensor: the
same values, and autograd needs no in-place write into the graph. The rows of each cluster are
found with ``nonzero`` (a host read, as torch's).
"""
from __future__ import annotations

from collections import namedtuple
from itertools import pairwise

from ...core.factories import zeros
from ...core.functional import cat, where
from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """The adaptive softmax (see the module docstring), as torch.nn.AdaptiveLogSoftmaxWithLoss: ``forward``
    returns (output, loss), the target's log-probability per sample and their negated mean; ``log_prob`` the
    full (N, n_classes) log-probabilities; ``predict`` the most likely class."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > (n_classes - 1)
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing order, "
                             "where each value is between 1 and n_classes-1")
        kw = dict(device=device, dtype=dtype)
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **kw), Linear(hsz, osz, bias=False, **kw)))

    def reset_parameters(self) -> None:
        """Re-draw the head's and every tail projection's parameters (Linear's initialisation)."""
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        if target_.ndim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.ndim != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{input_.shape}")
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{input_.shape}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        batch = target.shape[0]
        output = zeros(batch, dtype=input.dtype, device=input.device)
        gather_inds = target
        used = 0
        bounds = [0] + self.cutoffs
        for i, (low, high) in enumerate(pairwise(bounds)):
            mask = (target >= low) & (target < high)
            rows = mask.nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            used += rows.numel()
            if i == 0:
                continue
            relative = target.index_select(0, rows) - low
            cluster_logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
            output = output.index_add(0, rows, cluster_logprob.gather(1, relative.unsqueeze(1)).squeeze(1))
            gather_inds = where(mask, self.shortlist_size + i - 1, gather_inds)
        if used != batch:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, _ in enumerate(pairwise(self.cutoffs)):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, 1)  # at least one cluster: cutoffs is never empty

    def log_prob(self, input):
        """The log-probability of every class, (N, n_classes)."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most likely class of each row: the head's argmax when it is a shortlist class, else the argmax
        of the full log-probabilities (computed only for those rows)."""
        head_output = self.head(input)
        output = head_output.argmax(dim=1)
        not_in_shortlist = output >= self.shortlist_size
        if not bool(not_in_shortlist.any()):
            return output
        if bool(not_in_shortlist.all()):
            return self._get_full_log_prob(input, head_output).argmax(dim=1)
        rows = not_in_shortlist.nonzero().reshape(-1)
        best = self._get_full_log_prob(input.index_select(0, rows), head_output.index_select(0, rows)).argmax(dim=1)
        return output.index_copy(0, rows, best)

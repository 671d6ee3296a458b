"""``nn.utils.rnn``: batches of sequences of different lengths, as PyTorch's.

- :func:`pad_sequence` stacks sequences into one padded tensor (T, B, *) or (B, T, *);
- :func:`pack_padded_sequence` packs a padded batch into a :class:`PackedSequence`: the rows of
  every time step's still-running sequences one after another (``data``), how many there are at
  each step (``batch_sizes``, decreasing), and the permutation that sorted the batch by length;
- :func:`pad_packed_sequence` undoes it; :func:`pack_sequence`, :func:`unpack_sequence` and
  :func:`unpad_sequence` are the compositions PyTorch offers.

``nn.RNN``/``LSTM``/``GRU`` take a :class:`PackedSequence` and return one (``nn/modules/rnn.py``). The
lengths are host data, so every index is computed on the host and each transform is one recorded
``index_select`` (a gather) of the data, with one padding row appended where padding is written:
gradients flow back through all of them.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Optional

import numpy as np

from ...core import functional as _tf
from ...core.factories import full, tensor
from ...core.tensor import Tensor
from ...runtime import dtype as _dt

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]


class PackedSequence_(NamedTuple):
    """The four fields of a PackedSequence, as torch's namedtuple base of the same name."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Optional[Tensor]
    unsorted_indices: Optional[Tensor]


class PackedSequence(PackedSequence_):
    """A packed batch of sequences (PyTorch's): ``data`` (sum of lengths, *), ``batch_sizes`` (an
    int64 CPU tensor: the batch size at each time step), ``sorted_indices`` (the batch order the
    data is in, or None when the input was sorted already) and ``unsorted_indices`` (its inverse).
    Made by :func:`pack_padded_sequence` and :func:`pack_sequence`, not by hand."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PackedSequence((data, batch_sizes)), as torch allows
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        if not isinstance(batch_sizes, Tensor) or batch_sizes.device.type != "cpu":
            raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence should never be "
                             "created manually. They should be instantiated by functions like pack_sequence and "
                             "pack_padded_sequences in nn.utils.rnn.")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """``data.to(...)``; the indices follow the data's device, ``batch_sizes`` stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(data.device))
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cuda(self, device=None) -> PackedSequence:
        """``to('cuda')`` (or ``device``): data and indices move, ``batch_sizes`` stays on the CPU."""
        return self.to("cuda" if device is None else device)

    def cpu(self) -> PackedSequence:
        """``to('cpu')``."""
        return self.to("cpu")

    def double(self) -> PackedSequence:
        """The data as float64."""
        return self.to(dtype=_dt.float64)

    def float(self) -> PackedSequence:
        """The data as float32."""
        return self.to(dtype=_dt.float32)

    def half(self) -> PackedSequence:
        """The data as float16."""
        return self.to(dtype=_dt.float16)

    def long(self) -> PackedSequence:
        """The data as int64."""
        return self.to(dtype=_dt.int64)

    def int(self) -> PackedSequence:
        """The data as int32."""
        return self.to(dtype=_dt.int32)

    @property
    def is_cuda(self) -> bool:
        """Whether the data is on a CUDA device."""
        return self.data.is_cuda


def invert_permutation(permutation):
    """The inverse of a permutation tensor (None for None)."""
    if permutation is None:
        return None
    p = np.asarray(permutation.tolist(), dtype=np.int64)
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size)
    return tensor(inv, dtype=_dt.int64, device=permutation.device)


def _index(rows: np.ndarray, device) -> Tensor:
    return tensor(np.ascontiguousarray(rows, dtype=np.int64).reshape(-1), dtype=_dt.int64, device=device)


def _check_tensor(t, fn: str, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    return t


def _lengths(lengths) -> np.ndarray:
    """``lengths`` as int64 host values, as PyTorch converts them (``torch.as_tensor(lengths,
    dtype=torch.int64)``: floats truncate), and its check: one dim, on the CPU."""
    if isinstance(lengths, Tensor):
        ndim, device, values = lengths.ndim, lengths.device.type, lengths.tolist()
    else:
        try:
            values = np.asarray(lengths)
        except (TypeError, ValueError):
            values = None
        if values is None or values.dtype.kind not in "biuf":
            raise TypeError(f"pack_padded_sequence(): argument 'lengths' must be a list of ints or a 1-D tensor, "
                            f"not {type(lengths).__name__}")
        ndim, device = values.ndim, "cpu"
    if ndim != 1 or device != "cpu":
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {ndim}D {device} Long tensor")
    return np.asarray(values).astype(np.int64)


def pack_padded_sequence(input, lengths, batch_first: bool = False, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (``batch_first``: (B, T, *)) of sequences of ``lengths``.

    ``enforce_sorted=True`` requires the lengths in decreasing order; otherwise the batch is sorted
    here and the permutation kept (``sorted_indices``), so that padding restores the input order."""
    _check_tensor(input, "pack_padded_sequence", "input")
    if input.ndim < 2:
        raise ValueError(f"pack_padded_sequence(): expected 'input' of at least 2 dims (time and batch), got "
                         f"{input.ndim}-D")
    lens = _lengths(lengths)
    T, B = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    if lens.size != B:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {lens.size} (batch_size={B})")
    if (lens <= 0).any():
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    if lens.max() > T:
        raise RuntimeError(f"pack_padded_sequence(): a length of {int(lens.max())} is longer than the input's {T} "
                           "time steps")
    if enforce_sorted:
        if (np.diff(lens) > 0).any():
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                               "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
        order, sorted_indices = np.arange(B), None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_indices = _index(order, input.device)
    lens_sorted = lens[order]
    batch_sizes = (lens_sorted[None, :] > np.arange(lens_sorted[0])[:, None]).sum(1)
    # the packed rows: at step t the first batch_sizes[t] sequences of the sorted batch
    t_idx = np.concatenate([np.full(n, t) for t, n in enumerate(batch_sizes)])
    b_idx = np.concatenate([order[:n] for n in batch_sizes])
    rows = b_idx * T + t_idx if batch_first else t_idx * B + b_idx
    flat = input.reshape((T * B,) + tuple(input.shape[2:]))
    data = flat.index_select(0, _index(rows, input.device))
    # batch_sizes is host data on the CPU, whatever the default device (torch's too)
    return PackedSequence(data, tensor(batch_sizes, dtype=_dt.int64, device="cpu"), sorted_indices, None)


def _gather_padded(data: Tensor, rows: np.ndarray, shape: tuple, padding_value) -> Tensor:
    """``data`` rows (``rows``; -1 = padding) laid out as ``shape``: one gather from ``data`` with a
    padding row appended."""
    n = data.shape[0]
    pad = full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    rows = np.where(rows < 0, n, rows)
    return _tf.cat([data, pad], 0).index_select(0, _index(rows, data.device)).reshape(shape + tuple(data.shape[1:]))


def pad_packed_sequence(sequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: Optional[int] = None) -> tuple[Tensor, Tensor]:
    """``(padded, lengths)``: the inverse of :func:`pack_padded_sequence`, in the batch's original
    order; ``lengths`` is an int64 CPU tensor. ``total_length`` pads to that many steps."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence(): argument 'sequence' must be a PackedSequence, not "
                        f"{type(sequence).__name__}")
    batch_sizes = np.asarray(sequence.batch_sizes.tolist(), dtype=np.int64)
    max_seq_length = batch_sizes.size
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {max_seq_length}")
        max_seq_length = total_length
    B = int(batch_sizes[0]) if batch_sizes.size else 0
    lens_sorted = (batch_sizes[None, :] > np.arange(B)[:, None]).sum(1)  # sorted sequence k runs while k < bs[t]
    unsorted = (np.arange(B) if sequence.unsorted_indices is None
                else np.asarray(sequence.unsorted_indices.tolist(), dtype=np.int64))
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]])
    t = np.arange(max_seq_length)[:, None]
    k = unsorted[None, :]  # output column b holds sorted sequence unsorted[b]
    running = t < lens_sorted[k]
    rows = np.where(running, offsets[np.minimum(t, batch_sizes.size - 1)] + k, -1)  # (T, B)
    if batch_first:
        rows = rows.T
    padded = _gather_padded(sequence.data, rows, rows.shape, padding_value)
    return padded, tensor(lens_sorted[unsorted], dtype=_dt.int64, device="cpu")  # on the CPU, as torch's


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences (L_i, *) into one tensor (max L, B, *) (``batch_first``: (B, max L, *)),
    padded with ``padding_value`` on the ``padding_side`` ("right" or "left"), in the first
    sequence's dtype."""
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    if not isinstance(sequences, Iterable):
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}")
    seqs = tuple(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    for i, s in enumerate(seqs):
        _check_tensor(s, "pad_sequence", f"sequences[{i}]")
        if s.ndim < 1:
            raise RuntimeError(f"pad_sequence: sequences[{i}] is 0-D; every sequence needs a length (dim 0)")
        if tuple(s.shape[1:]) != tuple(seqs[0].shape[1:]):
            raise RuntimeError(f"pad_sequence: sequences[{i}] has trailing dims {list(s.shape[1:])}, but "
                               f"sequences[0] has {list(seqs[0].shape[1:])}")
        if s.device != seqs[0].device:
            raise RuntimeError(f"pad_sequence: sequences[{i}] is on {s.device}, sequences[0] on {seqs[0].device}")
    dtype = seqs[0].dtype
    lens = np.asarray([s.shape[0] for s in seqs], dtype=np.int64)
    L, B = int(lens.max()), len(seqs)
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
    t = np.arange(L)[:, None]
    start = (L - lens)[None, :] if padding_side == "left" else np.zeros((1, B), np.int64)
    pos = t - start
    rows = np.where((pos >= 0) & (pos < lens[None, :]), offsets[None, :] + pos, -1)  # (L, B)
    if batch_first:
        rows = rows.T
    data = _tf.cat([s if s.dtype == dtype else s.to(dtype) for s in seqs], 0)
    return _gather_padded(data, rows, rows.shape, padding_value)


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False) -> list:
    """The sequences of a padded batch, each cut to its length (new tensors)."""
    _check_tensor(padded_sequences, "unpad_sequence", "padded_sequences")
    lens = _lengths(lengths)
    batch_dim = 0 if batch_first else 1
    if lens.size != padded_sequences.shape[batch_dim]:
        raise ValueError(f"unpad_sequence(): got {lens.size} lengths for a batch of "
                           f"{padded_sequences.shape[batch_dim]}")
    return [padded_sequences.select(batch_dim, b).narrow(0, 0, int(n)).clone() for b, n in enumerate(lens)]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """:func:`pack_padded_sequence` of :func:`pad_sequence` of the sequences."""
    seqs = list(sequences)
    return pack_padded_sequence(pad_sequence(seqs), [s.shape[0] if s.ndim else 0 for s in seqs],
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences) -> list:
    """The sequences of a :class:`PackedSequence`, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)

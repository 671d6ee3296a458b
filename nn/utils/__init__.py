"""``nn.utils``: gradient clipping (``clip_grad_norm_``, ``clip_grad_value_``), flattening
parameters to one vector and back (``parameters_to_vector``, ``vector_to_parameters``), and
``rnn``: padding and packing batches of sequences (``pad_sequence``, ``pack_padded_sequence`` ...)."""
from . import rnn
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, get_total_norm, clip_grads_with_norm_
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters", "rnn"]

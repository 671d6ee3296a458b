"""``tritensor.cuda.graphs`` (torch.cuda.graphs): CUDA graph capture and replay.

The graphs themselves are ``runtime/graphs.py`` (capture, private pools, replay); the graphed
callables, autograd Functions, are ``autograd/graphed.py``. This module gathers them under
torch's path.
"""
from ..autograd.graphed import make_graphed_callables
from ..runtime.graphs import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing

__all__ = ["is_current_stream_capturing", "graph_pool_handle", "CUDAGraph", "graph", "make_graphed_callables"]

"""tritensor.nn: ``Module``, ``Parameter``, the layers and losses, ``functional``, ``init`` and
``parallel`` (DistributedDataParallel).

``nn.parallel`` sits on ``tritensor.comm`` (a layer above nn), so this package does not import
it; ``import tritensor`` does, after comm, and ``from tritensor.nn.parallel import ...`` always
works."""
from . import functional, init
from .attention import MultiheadAttention
from .layers import (AvgPool2d, Conv2d, CrossEntropyLoss, Dropout, Flatten, GELU, LayerNorm, Linear, MaxPool2d,
                     MSELoss, ReLU, Sequential)
from .module import Module
from .parameter import Parameter
from .transformer import TransformerEncoder, TransformerEncoderLayer

__all__ = ["Module", "Parameter", "Linear", "Conv2d", "ReLU", "GELU", "MaxPool2d", "AvgPool2d", "Flatten", "Dropout",
           "LayerNorm", "Sequential", "MSELoss", "CrossEntropyLoss", "functional", "init", "MultiheadAttention",
           "TransformerEncoderLayer", "TransformerEncoder"]

"""tritensor.nn: ``Module``, ``Parameter``, the layers and losses, ``functional``, ``init`` and
``parallel`` (DistributedDataParallel).

``nn.parallel`` sits on ``tritensor.comm`` (a layer above nn), so this package does not import
it; ``import tritensor`` does, after comm, and ``from tritensor.nn.parallel import ...`` always
works."""
from . import functional, init
from . import attention, utils
from .activation import ELU, Hardswish, LeakyReLU, LogSoftmax, Mish, Sigmoid, SiLU, Softmax, Softplus, Tanh
from .multihead_attention import MultiheadAttention
from .batchnorm import BatchNorm1d, BatchNorm2d
from .composite_layers import (AvgPool1d, Bilinear, Conv1d, CosineSimilarity, MaxPool1d, PairwiseDistance,
                               PixelShuffle, PixelUnshuffle, Unfold)
from .conv_transpose import ConvTranspose1d, ConvTranspose2d
from .containers import Identity, ModuleDict, ModuleList, ParameterList
from .embedding import Embedding
from .layers import (AvgPool2d, Conv2d, CrossEntropyLoss, Dropout, Flatten, GELU, LayerNorm, Linear, MaxPool2d,
                     MSELoss, ReLU, Sequential)
from .module import Module
from .parameter import Parameter
from .loss import BCELoss, BCEWithLogitsLoss, KLDivLoss, L1Loss, NLLLoss, SmoothL1Loss
from .normalization import GroupNorm, RMSNorm
from .resizing import AdaptiveAvgPool2d, Upsample
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from .transformer import TransformerEncoder, TransformerEncoderLayer
from .transformer_decoder import Transformer, TransformerDecoder, TransformerDecoderLayer

__all__ = ["Module", "Parameter", "Linear", "Conv2d", "ReLU", "GELU", "MaxPool2d", "AvgPool2d", "Flatten", "Dropout",
           "LayerNorm", "Sequential", "MSELoss", "CrossEntropyLoss", "functional", "init", "utils", "attention",
           "ModuleList", "ModuleDict", "ParameterList", "Identity", "Softmax", "LogSoftmax", "Tanh", "Sigmoid",
           "SiLU", "LeakyReLU", "ELU", "Softplus", "Mish", "Hardswish", "Embedding", "BatchNorm1d", "BatchNorm2d",
           "L1Loss", "SmoothL1Loss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "GroupNorm", "RMSNorm",
           "AdaptiveAvgPool2d", "Upsample", "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "Conv1d", "MaxPool1d", "AvgPool1d", "PixelShuffle", "PixelUnshuffle", "Unfold", "CosineSimilarity",
           "PairwiseDistance", "Bilinear", "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
           "ConvTranspose1d", "ConvTranspose2d", "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell",
           "LSTMCell", "GRUCell"]

"""tritensor.nn.modules: every layer class in the file torch keeps it in (``nn.modules.linear.Linear``,
``nn.modules.conv.Conv2d``, ``nn.modules.activation.MultiheadAttention`` ...), so code and pickles
naming torch's module paths find the same classes; ``tritensor.nn`` exports them from here."""
from .module import Module
from .activation import (ELU, GELU, Hardswish, LeakyReLU, LogSoftmax, Mish, MultiheadAttention, ReLU, Sigmoid, SiLU,
                         Softmax, Softplus, Tanh)
from .batchnorm import BatchNorm1d, BatchNorm2d
from .container import ModuleDict, ModuleList, ParameterList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import Dropout
from .flatten import Flatten
from .fold import Unfold
from .linear import Bilinear, Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
                   SmoothL1Loss)
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .pooling import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from .sparse import Embedding
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                          TransformerEncoderLayer)
from .upsampling import Upsample

__all__ = ["Module", "Identity", "Linear", "Bilinear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
           "ReLU", "GELU", "Softmax", "LogSoftmax", "Tanh", "Sigmoid", "SiLU", "LeakyReLU", "ELU", "Softplus", "Mish",
           "Hardswish", "MultiheadAttention", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "RMSNorm",
           "Dropout", "Embedding", "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
           "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder",
           "Transformer", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "MaxPool1d", "MaxPool2d",
           "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "MSELoss", "CrossEntropyLoss", "L1Loss", "SmoothL1Loss",
           "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "Flatten", "PixelShuffle", "PixelUnshuffle",
           "Upsample", "CosineSimilarity", "PairwiseDistance", "Unfold"]

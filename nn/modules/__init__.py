"""tritensor.nn.modules: every layer class in the file torch keeps it in (``nn.modules.linear.Linear``,
``nn.modules.conv.Conv2d``, ``nn.modules.activation.MultiheadAttention`` ...), so code and pickles
naming torch's module paths find the same classes; ``tritensor.nn`` exports them from here."""
from .module import Module
from .activation import (CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid,
                         LogSoftmax, Mish, MultiheadAttention, PReLU, ReLU, ReLU6, SELU, Sigmoid, SiLU, Softmax,
                         Softplus, Softshrink, Softsign, Tanh, Tanhshrink, Threshold)
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d
from .flatten import Flatten, Unflatten
from .fold import Fold, Unfold
from .instancenorm import InstanceNorm1d, InstanceNorm2d
from .linear import Bilinear, Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, GaussianNLLLoss, HuberLoss,
                   KLDivLoss, L1Loss, MarginRankingLoss, MSELoss, MultiLabelSoftMarginLoss, NLLLoss, PoissonNLLLoss,
                   SmoothL1Loss, SoftMarginLoss, TripletMarginLoss)
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .padding import (ConstantPad1d, ConstantPad2d, ReflectionPad1d, ReflectionPad2d, ReplicationPad1d,
                      ReplicationPad2d, ZeroPad1d, ZeroPad2d)
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d,
                      AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d)
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from .sparse import Embedding, EmbeddingBag
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                          TransformerEncoderLayer)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
# torch's remaining layers, each in its torch file
from .adaptive import AdaptiveLogSoftmaxWithLoss
from .batchnorm import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d
from .conv import LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d
from .instancenorm import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d
from .lazy import LazyModuleMixin
from .linear import LazyLinear
from .activation import RReLU, Softmin, Softmax2d
from .channelshuffle import ChannelShuffle
from .container import Container
from .conv import ConvTranspose3d
from .dropout import Dropout3d, FeatureAlphaDropout
from .instancenorm import InstanceNorm3d
from .loss import (CTCLoss, HingeEmbeddingLoss, MultiLabelMarginLoss, MultiMarginLoss, NLLLoss2d,
                   TripletMarginWithDistanceLoss)
from .normalization import CrossMapLRN2d, LocalResponseNorm
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad3d, ReflectionPad3d,
                      ReplicationPad3d, ZeroPad3d)
from .pooling import (AdaptiveAvgPool3d, AdaptiveMaxPool3d, FractionalMaxPool2d, FractionalMaxPool3d, LPPool1d,
                      LPPool2d, LPPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)

__all__ = ["Module", "Identity", "Linear", "Bilinear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
           "ReLU", "GELU", "Softmax", "LogSoftmax", "Tanh", "Sigmoid", "SiLU", "LeakyReLU", "ELU", "Softplus", "Mish",
           "Hardswish", "MultiheadAttention", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "RMSNorm",
           "Dropout", "Embedding", "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
           "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder",
           "Transformer", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "MaxPool1d", "MaxPool2d",
           "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "MSELoss", "CrossEntropyLoss", "L1Loss", "SmoothL1Loss",
           "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "Flatten", "PixelShuffle", "PixelUnshuffle",
           "Upsample", "CosineSimilarity", "PairwiseDistance", "Unfold"]
__all__ += ["ReLU6", "PReLU", "Hardtanh", "SELU", "CELU", "Hardsigmoid", "Hardshrink", "Softshrink", "Tanhshrink",
            "Softsign", "LogSigmoid", "Threshold", "GLU", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
            "Dropout1d", "Dropout2d", "AlphaDropout", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveAvgPool1d",
            "ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
            "ReplicationPad1d", "ReplicationPad2d", "HuberLoss", "MarginRankingLoss", "TripletMarginLoss",
            "CosineEmbeddingLoss", "PoissonNLLLoss", "GaussianNLLLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
            "Fold", "Unflatten", "ParameterDict", "EmbeddingBag", "UpsamplingNearest2d", "UpsamplingBilinear2d",
            "Conv3d", "MaxPool3d", "AvgPool3d"]
__all__ += ["AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
            "ConstantPad3d", "ReflectionPad3d", "ReplicationPad3d", "ZeroPad3d", "ConvTranspose3d", "Dropout3d",
            "FeatureAlphaDropout", "InstanceNorm3d", "LPPool1d", "LPPool2d", "LPPool3d", "LocalResponseNorm",
            "CrossMapLRN2d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "RReLU", "Softmin", "Softmax2d",
            "ChannelShuffle", "HingeEmbeddingLoss", "MultiMarginLoss", "MultiLabelMarginLoss",
            "TripletMarginWithDistanceLoss", "NLLLoss2d", "FractionalMaxPool2d", "FractionalMaxPool3d", "Container"]
__all__ += ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
            "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyInstanceNorm1d",
            "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyModuleMixin", "LazyLinear"]
__all__ += ["CTCLoss"]
__all__ += ["AdaptiveLogSoftmaxWithLoss"]
from .batchnorm import SyncBatchNorm  # noqa: E402
__all__ += ["SyncBatchNorm"]
from .loss import LinearCrossEntropyLoss  # noqa: E402
__all__ += ["LinearCrossEntropyLoss"]

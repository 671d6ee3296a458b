"""tritensor.nn: ``Module``, ``Parameter``, the layers and losses, ``functional``, ``init`` and
``parallel`` (DistributedDataParallel).

``nn.parallel`` sits on ``tritensor.comm`` (a layer above nn), so this package does not import
it; ``import tritensor`` does, after comm, and ``from tritensor.nn.parallel import ...`` always
works. For the same reason ``nn.DataParallel`` (nn/parallel/data_parallel.py, torch's file) is
given to this package by the package root."""
from . import functional, init
from . import grad  # torch.nn.grad: a convolution's input and weight gradients
from . import attention, utils
# every layer's home is the file torch keeps it in, under nn/modules/
from .modules import (GRU, LSTM, RNN, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss,
                      BCEWithLogitsLoss, Bilinear, Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d, CosineSimilarity,
                      CrossEntropyLoss, Dropout, ELU, Embedding, Flatten, GELU, GroupNorm, GRUCell, Hardswish,
                      Identity, KLDivLoss, L1Loss, LayerNorm, LeakyReLU, Linear, LogSoftmax, LSTMCell, MaxPool1d,
                      MaxPool2d, Mish, Module, ModuleDict, ModuleList, MSELoss, MultiheadAttention, NLLLoss,
                      PairwiseDistance, ParameterList, PixelShuffle, PixelUnshuffle, ReLU, RMSNorm, RNNBase, RNNCell,
                      RNNCellBase, Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax, Softplus, Tanh, Transformer,
                      TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, Unfold,
                      Upsample)
from .parameter import Buffer, Parameter
from .functional_linear_ce import LinearCrossEntropyOptions
from .modules import LinearCrossEntropyLoss
from .modules import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d, LazyConv3d,
                      LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d,
                      LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear)
from .parameter import UninitializedBuffer, UninitializedParameter
from .modules import AvgPool3d, Conv3d, MaxPool3d
from .modules import (AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AlphaDropout, BatchNorm3d, CELU,
                      ConstantPad1d, ConstantPad2d, CosineEmbeddingLoss, Dropout1d, Dropout2d, EmbeddingBag, Fold,
                      GaussianNLLLoss, GLU, Hardshrink, Hardsigmoid, Hardtanh, HuberLoss, InstanceNorm1d,
                      InstanceNorm2d, LogSigmoid, MarginRankingLoss, MultiLabelSoftMarginLoss, ParameterDict,
                      PoissonNLLLoss, PReLU, ReflectionPad1d, ReflectionPad2d, ReLU6, ReplicationPad1d,
                      ReplicationPad2d, SELU, Softshrink, Softsign, SoftMarginLoss, Tanhshrink, Threshold,
                      TripletMarginLoss, Unflatten, UpsamplingBilinear2d, UpsamplingNearest2d, ZeroPad1d, ZeroPad2d)
from .modules import (CTCLoss, AdaptiveLogSoftmaxWithLoss, AdaptiveAvgPool3d, AdaptiveMaxPool3d, ChannelShuffle,
                      CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad3d, Container, ConvTranspose3d,
                      CrossMapLRN2d, Dropout3d, FeatureAlphaDropout, FractionalMaxPool2d, FractionalMaxPool3d,
                      HingeEmbeddingLoss, InstanceNorm3d, LPPool1d, LPPool2d, LPPool3d, LocalResponseNorm,
                      MaxUnpool1d, MaxUnpool2d, MaxUnpool3d, MultiLabelMarginLoss, MultiMarginLoss, NLLLoss2d,
                      RReLU, ReflectionPad3d, ReplicationPad3d, Softmax2d, Softmin, TripletMarginWithDistanceLoss,
                      ZeroPad3d)

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
__all__ += ["Buffer"]
__all__ += ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]
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
            "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyLinear", "UninitializedParameter",
            "UninitializedBuffer"]
__all__ += ["CTCLoss"]
__all__ += ["AdaptiveLogSoftmaxWithLoss"]
from .modules import SyncBatchNorm  # noqa: E402
__all__ += ["SyncBatchNorm"]

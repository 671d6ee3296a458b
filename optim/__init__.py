"""tritensor.optim: ``Optimizer``, ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``LBFGS``,
``NAdam``, ``RAdam``, ``Adamax``, ``Adadelta``, ``ASGD``, ``Rprop`` and ``lr_scheduler``.

``SGD``, ``RMSprop`` and ``Adagrad`` run one fused Triton kernel per parameter per ``step()``
(``triton_kernels/optim.py``); ``Adam``/``AdamW`` one for all of a group's parameters that share
a device, dtype and step count (torch's multi-tensor ``foreach`` path; ``foreach=False`` is one
per parameter).
Parameters and states must be contiguous (``nn.Module`` parameters are). ``fused=True`` is
PyTorch's fused path: the kernels take ``GradScaler``'s found-inf flag and scale on the device.
``LBFGS`` is a sequence of tensor ops over all parameters as one flat vector (``lbfgs.py``).
``NAdam``, ``RAdam``, ``Adamax``, ``Adadelta``, ``ASGD``, ``Rprop``, ``Adafactor`` and ``Muon`` are torch's
single-tensor rules written with tensor ops, a few launches per parameter (``_tensor_ops.py``).
``swa_utils`` averages a model's weights (SWA, EMA).
"""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .rmsprop import RMSprop
from .adagrad import Adagrad
from .lbfgs import LBFGS
from .nadam import NAdam
from .radam import RAdam
from .adamax import Adamax
from .adadelta import Adadelta
from .asgd import ASGD
from .rprop import Rprop
from .adafactor import Adafactor
from .muon import Muon
from ._stateless import swap_in_optimizer_params_and_state
from . import lr_scheduler  # torch.optim.lr_scheduler: a submodule, as in torch
from . import swa_utils  # torch.optim.swa_utils: AveragedModel, SWALR, update_bn and the averaging rules

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS", "NAdam", "RAdam", "Adamax", "Adadelta",
           "ASGD", "Rprop", "Adafactor", "Muon", "lr_scheduler", "swa_utils",
           "swap_in_optimizer_params_and_state"]

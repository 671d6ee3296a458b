"""tritensor.optim: ``Optimizer``, ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``LBFGS``
and ``lr_scheduler``.

Each ``step()`` runs one fused Triton kernel per parameter (``triton_kernels/optim.py``).
Parameters and states must be contiguous (``nn.Module`` parameters are). ``fused=True`` is
PyTorch's fused path: the kernels take ``GradScaler``'s found-inf flag and scale on the device.
``LBFGS`` is a sequence of tensor ops over all parameters as one flat vector (``lbfgs.py``).
"""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .rmsprop import RMSprop  # issue 15 (nn15)
from .adagrad import Adagrad  # issue 15 (nn15)
from .lbfgs import LBFGS  # issue 24
from . import lr_scheduler  # issue 15 (nn15)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS", "lr_scheduler"]

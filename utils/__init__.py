"""``tritensor.utils``: PyTorch's ``torch.utils`` namespace (``utils.data``, ``utils.dlpack``)."""
from . import data, dlpack  # noqa: F401

"""``tritensor.utils``: PyTorch's ``torch.utils`` namespace (for now ``utils.data``)."""
from . import data  # noqa: F401

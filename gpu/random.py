"""``tritensor.cuda.random`` (torch.cuda.random): the device random number state and seeding.

tritensor draws every device's random numbers from one (seed, offset) stream, the default
generator's (``core/generator.py``): a device's state is that generator's, seeding "the GPU" seeds
it, and the device argument is checked as torch checks it. Without a CUDA device torch ignores the
seeding calls; so does tritensor.
"""
from __future__ import annotations

from ..core.generator import default_generator
from ..runtime import cuda as _cuda
from ..runtime import mode as _mode

__all__ = ["get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed"]


def get_rng_state(device="cuda"):
    """The random number generator state of ``device``, a ByteTensor (the default generator's)."""
    _cuda._require("get_rng_state")
    _cuda._index(device)
    return default_generator.get_state()


def set_rng_state(new_state, device="cuda") -> None:
    """Restore ``device``'s random number generator state (the default generator's, shared by all)."""
    _cuda._require("set_rng_state")
    _cuda._index(device)
    default_generator.set_state(new_state)


def get_rng_state_all() -> list:
    """One state per device (the same stream: see above)."""
    return [get_rng_state(i) for i in range(_cuda.device_count())]


def set_rng_state_all(new_states) -> None:
    """Restore each device's state from ``new_states`` (one per device, in order)."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed) -> None:
    """Seed the current device's random numbers (the default generator's; ignored without CUDA)."""
    seed = int(seed)
    if _mode.GPU:
        default_generator.manual_seed(seed)


def manual_seed_all(seed) -> None:
    """Seed every device's random numbers (one stream: the same as ``manual_seed``)."""
    manual_seed(seed)


def seed() -> None:
    """Seed the current device's random numbers from the operating system (ignored without CUDA)."""
    if _mode.GPU:
        default_generator.seed()


def seed_all() -> None:
    """Seed every device's random numbers from the operating system (one stream: the same as ``seed``)."""
    seed()


def initial_seed() -> int:
    """The seed the current device's random numbers started from (the default generator's)."""
    return default_generator.initial_seed()

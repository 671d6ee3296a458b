"""tt.accelerator answers as torch.accelerator: CUDA with a GPU (the simulated device counts),
none without one."""
import pytest

import tritensor as tt
from tritensor.runtime import mode


def test_answers_match_the_mode():
    acc = tt.accelerator
    if mode.GPU:
        assert acc.current_accelerator() == tt.device("cuda")
        assert acc.is_available() and acc.device_count() == tt.cuda.device_count() >= 1
        assert acc.current_device_index() == tt.cuda.current_device() == acc.current_device_idx()
        acc.set_device_index(0)
        acc.set_device_idx("cuda:0")
        x = tt.ones(4, device="cuda") * 2
        acc.synchronize()
        acc.synchronize(0)
        assert x.cpu().tolist() == [2.0] * 4
        with pytest.raises(ValueError, match="cpu doesn't match the current accelerator cuda."):
            acc.set_device_index("cpu")
    else:
        assert acc.current_accelerator() is None and acc.current_accelerator(check_available=True) is None
        assert acc.is_available() is False and acc.device_count() == 0
        for call in (acc.current_device_index, lambda: acc.set_device_index(0), acc.synchronize):
            with pytest.raises(RuntimeError, match="^Cannot access accelerator device when none is available.$"):
                call()

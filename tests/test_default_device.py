"""tritensor.set_default_device / get_default_device (torch.set_default_device): what factories use when given no device."""
import os

import numpy as np
import pytest

import tritensor as tt
from tritensor.runtime import mode


@pytest.fixture
def restore_default():
    before = tt.get_default_device()
    yield
    tt.set_default_device(before)


# What the suite starts with: the cpu, or cuda in the device-tensor variant (conftest.py sets it).
SUITE_DEFAULT = tt.device("cuda" if os.environ.get("TRITENSOR_TEST_DEVICE", "cpu").strip().lower() == "cuda" else "cpu")


def test_factories_follow_the_default_device(restore_default):
    assert tt.get_default_device() == SUITE_DEFAULT
    tt.set_default_device("cpu")
    made = [tt.zeros(2), tt.ones(2), tt.empty(2), tt.full((2,), 3.0), tt.tensor([1.0]), tt.arange(3), tt.rand(2),
            tt.randn(2), tt.eye(2), tt.linspace(0, 1, 3), tt.randint(0, 5, (2,)), tt.randperm(3)]
    assert all(t.device == tt.device("cpu") for t in made)
    arr = np.ones(3, np.float32)
    assert tt.from_numpy(arr).device == tt.device("cpu")  # shares the array's memory: always the cpu
    if mode.GPU:
        tt.set_default_device("cuda")
        assert tt.zeros(2).device.type == "cuda" and tt.tensor([1.0, 2.0]).device.type == "cuda"
        assert tt.zeros(2, device="cpu").device == tt.device("cpu")
        assert tt.from_numpy(arr).device == tt.device("cpu")
    tt.set_default_device(None)
    assert tt.get_default_device() == tt.device("cpu")


def test_bad_devices_are_refused(restore_default):
    with pytest.raises(ValueError, match="unknown device type"):
        tt.set_default_device("tpu")
    assert tt.get_default_device() == SUITE_DEFAULT  # unchanged by the refused call

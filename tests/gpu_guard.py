"""GPU mode: a test that leaves the CUDA context dead ends its process, naming itself.

A CUDA error such as an illegal address is *sticky*: every later call in that process fails
with it, so on the first H100 run one bad kernel failed 2,500 later tests in the same xdist
worker. After each test (its fixtures torn down) :func:`pytest_runtest_teardown` synchronises
the context; on an error it writes which test left it and exits the process. xdist reports that
test as crashed and starts a fresh worker for the rest: one bug costs one test. CPU mode, or a
process that never made a context: nothing to check.

``tests/conftest.py`` imports the hook; ``tests/test_gpu_guard.py`` checks it without a GPU.
"""
from __future__ import annotations

import os
import sys

import pytest

from tritensor.runtime import driver as drv
from tritensor.runtime import mode

EXIT_CODE = 70  # EX_SOFTWARE: the process's CUDA context is unusable


def sticky_cuda_error():
    """The CUDA driver's error when this process's current context is dead, else None."""
    if not mode.GPU:
        return None
    driver = drv.driver  # the real driver, or the simulated device's

    ok = driver.CUresult.CUDA_SUCCESS
    err, ctx = driver.cuCtxGetCurrent()
    if err != ok or not int(ctx):  # no context in this thread: nothing ran here
        return None
    (err,) = driver.cuCtxSynchronize()
    return None if err == ok else err


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    err = sticky_cuda_error()
    if err is not None:
        name = getattr(err, "name", str(err))
        sys.stderr.write(f"\n{item.nodeid} left a sticky CUDA error ({name}): this process's CUDA context is dead. "
                         "Ending the process; xdist starts a fresh worker for the tests after it.\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)

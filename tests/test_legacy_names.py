"""torch's remaining names in autograd, amp and utils.data: autograd.Variable (the legacy constructor) and the
deprecated autograd.variable(), set_multithreading_enabled, amp.is_autocast_available, and utils.data's
_DatasetKind with its fetchers; behaviour and messages as torch 2.13's."""
import threading

import numpy as np
import pytest

import tritensor as tt
from tolerances import assert_close
from tritensor.autograd import Variable, set_multithreading_enabled, variable
from tritensor.autograd.multithreading import is_multithreading_enabled
from tritensor.utils.data import TensorDataset, _DatasetKind, default_collate


def test_variable_is_a_detached_leaf_sharing_the_data():
    x = tt.ones(3, requires_grad=True) * 2  # not a leaf: Variable cuts the history
    v = Variable(x)
    assert isinstance(v, tt.Tensor) and v is not x and v.data_ptr() == x.data_ptr()
    assert not v.requires_grad and v.is_leaf and v.grad_fn is None
    w = Variable(tt.tensor([1.0, 2.0]), requires_grad=True)
    (w * w).sum().backward()
    assert_close(w.grad, np.array([2.0, 4.0]), tt.float32)
    assert isinstance(tt.zeros(1), Variable) and not isinstance([1.0], Variable)
    empty = Variable()
    assert list(empty.shape) == [0] and empty.dtype is tt.float32
    with pytest.warns(UserWarning, match="volatile was removed and now has no effect"):
        Variable(tt.ones(1), volatile=True)
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1.0])
    with pytest.raises(RuntimeError, match=r"autograd.variable\(...\) is deprecated, use tritensor.tensor\(...\)"):
        variable(tt.ones(1))
    assert variable.Variable is Variable
    import tritensor.autograd.variable as module  # the module behind the name, as torch's

    assert module.Variable is Variable


def test_set_multithreading_enabled_is_a_thread_local_switch():
    assert is_multithreading_enabled()
    set_multithreading_enabled(False)
    assert not is_multithreading_enabled()
    seen = []
    t = threading.Thread(target=lambda: seen.append(is_multithreading_enabled()))
    t.start()
    t.join()
    assert seen == [True]
    set_multithreading_enabled(True)
    with set_multithreading_enabled(False):
        assert not is_multithreading_enabled()
        x = tt.ones(2, requires_grad=True)
        (x * 3).sum().backward()  # backward runs on this thread either way
        assert x.grad.tolist() == [3.0, 3.0]
    assert is_multithreading_enabled()

    @set_multithreading_enabled(False)
    def inside():
        return is_multithreading_enabled()

    assert is_multithreading_enabled() and inside() is False and is_multithreading_enabled()
    with pytest.raises(TypeError, match="argument 'mode' must be bool"):
        set_multithreading_enabled(1)


def test_is_autocast_available():
    assert tt.amp.is_autocast_available("cuda") and tt.amp.is_autocast_available("cpu")
    assert not tt.amp.is_autocast_available("meta") and not tt.amp.is_autocast_available("xpu")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda, ipu, xpu, mkldnn, .* privateuseone device "
                                           "type at start of device string: foo"):
        tt.amp.is_autocast_available("foo")
    with pytest.raises(TypeError, match="device_type"):
        tt.amp.is_autocast_available(None)


def test_dataset_kind_fetchers():
    ds = TensorDataset(tt.arange(6), tt.arange(6) * 10)
    f = _DatasetKind.create_fetcher(_DatasetKind.Map, ds, True, default_collate, False)
    x, y = f.fetch([1, 4])
    assert x.tolist() == [1, 4] and y.tolist() == [10, 40]
    one = _DatasetKind.create_fetcher(_DatasetKind.Map, ds, False, lambda s: s, False)
    assert [t.item() for t in one.fetch(2)] == [2, 20]
    it = _DatasetKind.create_fetcher(_DatasetKind.Iterable, range(5), True, list, True)
    assert it.fetch([None] * 2) == [0, 1] and it.fetch([None] * 2) == [2, 3]
    with pytest.raises(StopIteration):
        it.fetch([None] * 2)  # one item left, drop_last
    assert (_DatasetKind.Map, _DatasetKind.Iterable) == (0, 1)
    with pytest.raises(ValueError, match="kind"):
        _DatasetKind.create_fetcher(2, ds, True, default_collate, False)

"""WeightedRandomSampler and StackDataset (torch.utils.data's), checked against torch's own draws.

The expected index lists are what torch 2.13 gave for the same weights and a
``torch.Generator().manual_seed(s)``: the sampler reproduces torch's CPU multinomial bit for bit
(``utils/data/_random.py``), so a script moved from PyTorch sees the same sample order.
"""
import numpy as np
import pytest

import tritensor as tt
from tritensor.utils.data import DataLoader, StackDataset, TensorDataset, WeightedRandomSampler


def test_weighted_with_replacement_is_torchs_draw():
    g = tt.Generator().manual_seed(2024)
    s = WeightedRandomSampler([0.1, 2.0, 0.5, 3.0, 1.0], 12, generator=g)
    assert len(s) == 12
    assert list(s) == [1, 3, 2, 3, 4, 1, 2, 3, 3, 1, 1, 2]
    assert list(s) == [3, 3, 3, 2, 4, 3, 3, 4, 2, 3, 4, 3]  # the generator's stream moved on
    assert s.weights.dtype is tt.float64 and s.weights.tolist() == [0.1, 2.0, 0.5, 3.0, 1.0]


def test_weighted_without_replacement_is_torchs_draw():
    g = tt.Generator().manual_seed(7)
    s = WeightedRandomSampler(tt.tensor([0.1, 2.0, 0.5, 3.0, 1.0, 0.0, 4.0]), 4, replacement=False, generator=g)
    first, second = list(s), list(s)
    assert first == [6, 1, 3, 4] and second == [6, 3, 4, 1]
    assert len(set(first)) == 4


def test_weighted_frequencies_follow_the_weights():
    w = np.array([1.0, 3.0, 6.0])
    g = tt.Generator().manual_seed(0)
    n = 6000
    draws = np.array(list(WeightedRandomSampler(w.tolist(), n, generator=g)))
    p = w / w.sum()
    freq = np.bincount(draws, minlength=3) / n
    z = (freq - p) / np.sqrt(p * (1 - p) / n)  # a frequency of n draws: standard error sqrt(p(1-p)/n)
    assert np.all(np.abs(z) < 5), z
    tt.manual_seed(3)
    a = list(WeightedRandomSampler(w.tolist(), 20))  # no generator: seeded from tritensor's global RNG
    tt.manual_seed(3)
    assert list(WeightedRandomSampler(w.tolist(), 20)) == a


def test_weighted_errors():
    with pytest.raises(ValueError, match="^num_samples should be a positive integer value, but got num_samples=0$"):
        WeightedRandomSampler([1.0], 0)
    with pytest.raises(ValueError, match="^replacement should be a boolean value, but got replacement=1$"):
        WeightedRandomSampler([1.0], 2, replacement=1)
    with pytest.raises(ValueError, match=r"^weights should be a 1d sequence but given weights have shape \(1, 1\)$"):
        WeightedRandomSampler([[1.0]], 3)
    for weights, msg in (([1.0, -2.0], "encountering probability entry < 0"),
                         ([1.0, float("nan")], "encountering probability entry < 0"),
                         ([1.0, float("inf")], "encountering probability entry = infinity or NaN"),
                         ([0.0, 0.0], "sum of probabilities <= 0")):
        with pytest.raises(RuntimeError, match=f"^invalid multinomial distribution \\({msg}\\)$"):
            list(WeightedRandomSampler(weights, 3))
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        list(WeightedRandomSampler([1.0, 2.0], 3, replacement=False))


def test_stack_dataset_tuple_and_dict():
    a = TensorDataset(tt.arange(4))
    b = [10, 11, 12, 13]
    t = StackDataset(a, b)
    assert len(t) == 4
    item = t[2]
    assert item[0][0].item() == 2 and item[1] == 12
    d = StackDataset(x=b, y=["a", "b", "c", "d"])
    assert d[1] == {"x": 11, "y": "b"}
    assert d.__getitems__([0, 3]) == [{"x": 10, "y": "a"}, {"x": 13, "y": "d"}]
    assert StackDataset(b, b).__getitems__([1, 2]) == [(11, 11), (12, 12)]
    batches = list(DataLoader(StackDataset(x=tt.arange(6).reshape(3, 2), y=[0, 1, 2]), batch_size=2))
    assert batches[0]["x"].tolist() == [[0, 1], [2, 3]] and batches[0]["y"].tolist() == [0, 1]


def test_stack_dataset_errors():
    with pytest.raises(ValueError, match="^At least one dataset should be passed$"):
        StackDataset()
    with pytest.raises(ValueError, match="^Size mismatch between datasets$"):
        StackDataset([1, 2], [1])
    with pytest.raises(ValueError, match="^Size mismatch between datasets$"):
        StackDataset(a=[1, 2], b=[1])
    with pytest.raises(ValueError, match="but both types are given"):
        StackDataset([1], a=[1])

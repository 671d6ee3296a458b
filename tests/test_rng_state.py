"""get_rng_state/set_rng_state (tt and tt.cuda) and Generator.get_state/set_state: a restored
state draws the same numbers again, for every random op."""
import struct

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from tritensor.runtime import mode
from tolerances import assert_close


def _draws(generator=None):
    kw = {} if generator is None else {"generator": generator}
    out = [tt.rand(5, **kw), tt.randn(2, 3, **kw), tt.randint(0, 1000, (7,), **kw)]
    if generator is None:  # the ops without a generator= argument draw from the default stream
        out.append(F.dropout(tt.ones(64), p=0.5, training=True))
        out.append(tt.bernoulli(tt.full((9,), 0.5)))
    return [t.cpu().numpy().astype(np.float64) for t in out]


def _same(a, b):
    for x, y in zip(a, b):
        assert_close(x, y, tt.float64, "exact")


def test_state_is_a_byte_tensor_of_seed_and_offset():
    tt.manual_seed(1234)
    state = tt.get_rng_state()
    assert state.dtype is tt.uint8 and state.shape == (16,) and state.device.type == "cpu"
    assert struct.unpack("<QQ", bytes(state.tolist())) == (1234, 0)
    tt.rand(10)
    assert struct.unpack("<QQ", bytes(tt.get_rng_state().tolist()))[1] > 0  # the offset moved on


def test_restoring_the_default_state_repeats_the_numbers():
    tt.manual_seed(0)
    _draws()
    state = tt.get_rng_state()
    first = _draws()
    tt.set_rng_state(state)
    _same(_draws(), first)
    tt.set_rng_state(state)
    assert not np.array_equal(_draws()[0], _draws()[0])  # and the stream still moves on after it


def test_generator_state():
    g = tt.Generator().manual_seed(99)
    tt.rand(3, generator=g)
    state = g.get_state()
    first = _draws(g)
    g2 = tt.Generator().set_state(state)  # another generator resumes the same stream
    _same(_draws(g2), first)
    assert g2.initial_seed() == 99
    g.set_state(state)
    _same(_draws(g), first)


def test_bad_states():
    with pytest.raises(TypeError, match="^RNG state must be a tritensor.ByteTensor$"):
        tt.set_rng_state(tt.zeros(16, dtype=tt.int64))
    with pytest.raises(RuntimeError, match="^RNG state is wrong size$"):
        tt.set_rng_state(tt.zeros(3, dtype=tt.uint8))
    with pytest.raises(TypeError, match="expected a tritensor.ByteTensor, but got list"):
        tt.Generator().set_state([1, 2])


def test_cuda_rng_state():
    if not mode.GPU:
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            tt.cuda.get_rng_state()
        assert tt.cuda.get_rng_state_all() == []
        return
    tt.manual_seed(5)
    state = tt.cuda.get_rng_state()
    assert state.dtype is tt.uint8 and state.shape == (16,)
    first = _draws()
    tt.cuda.set_rng_state(state, "cuda:0")
    _same(_draws(), first)
    states = tt.cuda.get_rng_state_all()
    assert len(states) == tt.cuda.device_count()
    again = _draws()
    tt.cuda.set_rng_state_all(states)
    _same(_draws(), again)

"""Random numbers (core/generator.py, core/ops/random.py, core/creation.py,
triton_kernels/random.py, autograd/functions/random.py): Generator objects, randint, randperm,
normal, bernoulli, multinomial and the in-place fills normal_/uniform_/random_/bernoulli_.

Random output has no NumPy twin, so the checks are: reproducibility (same seed, same numbers;
separate generators independent; get_state/set_state), the counter property that makes CPU and
GPU agree (element i of a draw depends on (seed, offset + i) only, so a longer draw starts with
a shorter one's numbers whatever the block size), ranges and dtypes, and moments/frequencies of
large samples within bounds of many standard errors (a false failure is below 1e-9).
"""
import math

import numpy as np
import pytest

import tritensor as tt

N = 20000  # one interpreter block: a large sample at the cost of one launch


def test_generator_objects():
    g = tt.manual_seed(123)
    assert g is tt.default_generator and tt.initial_seed() == 123 and isinstance(g, tt.Generator)
    a = tt.rand(5)
    tt.manual_seed(123)
    assert tt.rand(5).tolist() == a.tolist()
    g1, g2 = tt.Generator().manual_seed(7), tt.Generator().manual_seed(7)
    x = tt.randn(6, generator=g1)
    tt.rand(10)  # the default generator's draws do not move g2
    assert tt.randn(6, generator=g2).tolist() == x.tolist()
    assert tt.randn(6, generator=g1).tolist() != x.tolist()  # the offset moved on
    state = g1.get_state()
    y = tt.randint(0, 100, (8,), generator=g1)
    g1.set_state(state)
    assert tt.randint(0, 100, (8,), generator=g1).tolist() == y.tolist()
    s = tt.Generator().seed()
    assert isinstance(s, int) and s >= 0
    assert g1.initial_seed() == 7 and "Generator" in repr(g1)


@pytest.mark.parametrize("draw", ["rand", "randn", "randint", "bernoulli", "normal"])
def test_element_i_depends_only_on_seed_offset_and_i(draw):
    def make(n):
        g = tt.Generator().manual_seed(99)
        if draw == "randint":
            return tt.randint(-50, 50, (n,), generator=g)
        if draw == "bernoulli":
            return tt.bernoulli(tt.full((n,), 0.5), generator=g)
        if draw == "normal":
            return tt.normal(1.0, 2.0, (n,), generator=g)
        return getattr(tt, draw)(n, generator=g)

    short, long = make(7).tolist(), make(300).tolist()
    assert long[:7] == short  # so no block size or execution mode can change a number


def test_randint_and_randperm():
    tt.manual_seed(1)
    r = tt.randint(-3, 4, (N,))
    assert r.dtype is tt.int64
    a = r.numpy()
    assert a.min() == -3 and a.max() == 3
    counts = np.bincount(a + 3, minlength=7)
    assert np.all(np.abs(counts - N / 7) < 7 * math.sqrt(N / 7))
    assert tt.randint(5, (2, 3), dtype=tt.int32).dtype is tt.int32
    big = tt.randint(0, 2**40, (1000,)).numpy()
    assert big.max() > 2**32  # all 64 bits are used
    like = tt.randint_like(tt.zeros(2, 2, dtype=tt.int32), 10)
    assert like.shape == (2, 2) and like.dtype is tt.int32 and like.numpy().max() < 10
    p = tt.randperm(1000)
    assert sorted(p.tolist()) == list(range(1000)) and p.tolist() != list(range(1000))
    assert tt.randperm(0).shape == (0,) and tt.randperm(5, dtype=tt.int32).dtype is tt.int32


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16], ids=str)
def test_inplace_fills(dtype):
    tt.manual_seed(2)
    x = tt.empty(N // 100, 100, dtype=dtype).T  # non-contiguous
    v = x._version
    assert x.normal_(3.0, 0.5) is x and x._version == v + 1
    a = x.float().numpy()
    assert abs(a.mean() - 3.0) < 7 * 0.5 / math.sqrt(N) + 0.01 and abs(a.std() - 0.5) < 0.02
    x.uniform_(-2.0, 4.0)
    a = x.float().numpy()
    assert a.min() >= -2.0 and a.max() <= 4.0 and abs(a.mean() - 1.0) < 0.1
    x.random_(10)
    a = x.float().numpy()
    assert set(np.unique(a)) == set(range(10))
    x.random_(-5, -2)
    assert set(np.unique(x.float().numpy())) == {-5.0, -4.0, -3.0}
    x.bernoulli_(0.25)
    assert abs(x.float().numpy().mean() - 0.25) < 7 * math.sqrt(0.25 * 0.75 / N)
    top = {tt.float16: 2**11, tt.bfloat16: 2**8, tt.float32: 2**24}[dtype]
    a = tt.empty(N, dtype=dtype).random_().float().numpy()
    assert a.min() >= 0 and a.max() <= top and np.all(a == np.floor(a))


def test_integer_and_bool_random_():
    i = tt.empty(N, dtype=tt.int32).random_()
    assert i.numpy().min() >= 0 and i.numpy().max() > 2**30
    b = tt.empty(1000, dtype=tt.bool).random_()
    assert 300 < b.numpy().sum() < 700
    assert set(tt.empty(100, dtype=tt.int64).random_(7, None).numpy() >= 7) == {True}


def test_normal_forms_and_gradient():
    tt.manual_seed(3)
    z = tt.normal(tt.full((N,), 5.0), 2.0)
    assert abs(z.numpy().mean() - 5.0) < 7 * 2 / math.sqrt(N) and abs(z.numpy().std() - 2.0) < 0.05
    mean, std = tt.zeros(3, 1), tt.tensor([1.0, 0.0])
    out = tt.normal(mean, std)
    assert out.shape == (3, 2) and np.all(out.numpy()[:, 1] == 0.0)
    assert tt.normal(2.0, tt.zeros(4)).tolist() == [2.0] * 4
    assert tt.normal(0.0, 1.0, (2, 2), dtype=tt.float64).dtype is tt.float64
    m = tt.tensor([1.0, -1.0], dtype=tt.float64, requires_grad=True)
    s = tt.tensor([0.5, 2.0], dtype=tt.float64, requires_grad=True)
    assert tt.autograd.gradcheck(lambda a, b: tt.normal(a, b, generator=tt.Generator().manual_seed(4)), (m, s))


def test_bernoulli_and_multinomial():
    tt.manual_seed(4)
    p = tt.tensor([0.0, 1.0, 0.3]).expand(N // 4, 3)
    draws = tt.bernoulli(p).numpy()
    assert draws.dtype == np.float32 and np.all(draws[:, 0] == 0) and np.all(draws[:, 1] == 1)
    n = draws.shape[0]
    assert abs(draws[:, 2].mean() - 0.3) < 7 * math.sqrt(0.21 / n)
    assert set(np.unique(tt.bernoulli(tt.zeros(50, dtype=tt.float64), 0.5).numpy())) == {0.0, 1.0}
    x = tt.zeros(3, 4)
    x.bernoulli_(tt.tensor([0.0, 1.0, 0.0, 1.0]))
    assert x.tolist() == [[0.0, 1.0, 0.0, 1.0]] * 3
    w = tt.tensor([1.0, 0.0, 3.0, 6.0])
    s = tt.multinomial(w, N, replacement=True).numpy()
    freq = np.bincount(s, minlength=4) / N
    assert freq[1] == 0 and np.all(np.abs(freq - np.array([0.1, 0.0, 0.3, 0.6])) < 7 * math.sqrt(0.25 / N))
    rows = tt.multinomial(tt.tensor([[1.0, 1.0, 0.0, 1.0], [0.0, 5.0, 1.0, 1.0]]), 3)
    assert rows.shape == (2, 3)
    assert sorted(rows[0].tolist()) == [0, 1, 3] and sorted(rows[1].tolist()) == [1, 2, 3]
    first = [tt.multinomial(tt.tensor([1.0, 9.0]), 1).item() for _ in range(40)]
    assert 24 < sum(first) <= 40  # the heavy category is drawn first most of the time (p=0.9: 36 +- 1.9)


def test_errors_name_the_argument(no_launch):
    x = tt.zeros(3)
    with pytest.raises(TypeError, match="'generator'"):
        tt.rand(2, generator=5)
    with pytest.raises(TypeError, match="seed must be an int"):
        tt.manual_seed(1.5)
    with pytest.raises(RuntimeError, match="from=3 >= to=3"):
        tt.randint(3, 3, (2,))
    with pytest.raises(TypeError, match="'high'"):
        tt.randint(0, 2.5, (2,))
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        x.normal_(0, -1)
    with pytest.raises(RuntimeError, match="from=2.0 > to=1.0"):
        x.uniform_(2, 1)
    with pytest.raises(RuntimeError, match="less than 'to'"):
        x.random_(5, 5)
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        x.bernoulli_(1.5)
    with pytest.raises(TypeError, match="'size' is required"):
        tt.normal(0.0, 1.0)
    with pytest.raises(RuntimeError, match="prob_dist must be 1 or 2 dim"):
        tt.multinomial(tt.ones(1, 1, 1), 1)
    with pytest.raises(RuntimeError, match="n_sample <= 0"):
        tt.multinomial(x, 0)
    with pytest.raises(RuntimeError, match="without replacement"):
        tt.multinomial(x, 4)
    with pytest.raises(RuntimeError, match="randperm: n must be non-negative"):
        tt.randperm(-1)


def test_no_launch_allows_the_factories_but_not_the_sampling_kernels(no_launch):
    """randint and bernoulli share triton_kernels/random.py with rand/randn and arange: the errors
    above are only checked before a launch if no_launch still refuses those two kernels."""
    assert tt.rand(3).shape == (3,) and tt.randn(2).shape == (2,) and tt.arange(4).tolist() == [0, 1, 2, 3]
    with pytest.raises(AssertionError, match="a kernel was launched"):
        tt.randint(0, 3, (2,))
    with pytest.raises(AssertionError, match="a kernel was launched"):
        tt.zeros(3).bernoulli_(0.5)


def test_multinomial_rejects_bad_weights():
    with pytest.raises(RuntimeError, match="`inf`, `nan` or element < 0"):
        tt.multinomial(tt.tensor([1.0, -1.0]), 1)
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        tt.multinomial(tt.zeros(3), 1)
    with pytest.raises(RuntimeError, match="not enough non-negative category"):
        tt.multinomial(tt.tensor([1.0, 0.0, 0.0]), 2)
    with pytest.raises(RuntimeError, match=r"p_in >= 0 && p_in <= 1"):
        tt.bernoulli(tt.tensor([0.5, 2.0]))


def test_inplace_fills_are_recorded_with_a_zero_gradient():
    x = tt.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.normal_()
    for fill in (lambda t: t.normal_(), lambda t: t.uniform_(), lambda t: t.random_(3), lambda t: t.bernoulli_(0.5)):
        y = x * 2
        fill(y)
        (y * 3).sum().backward()
        assert x.grad.tolist() == [0.0] * 4  # the old values of y no longer matter
        x.grad = None
    with tt.no_grad():
        assert x.uniform_() is x  # allowed without grad mode (how nn.init fills parameters)

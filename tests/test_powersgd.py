"""PowerSGD hooks (powerSGD_hook, batched_powerSGD_hook, PowerSGDState) with 2 ranks.

The hooks are called directly on float64 GradBuckets (ddp_helpers.powersgd_steps), which
makes the algebra checkable: before start_powerSGD_iter the result is the exact mean (two
float64 halves added: bitwise); at full rank P Q^T reproduces the mean up to Gram-Schmidt's
rounding (1e-10 relative in float64); the error-feedback invariant holds to 1e-12 relative."""
import pickle

import numpy as np
import pytest

import ddp_helpers as H
from comm_helpers import assert_all_ok, run_world
from tritensor.comm.algorithms.ddp_comm_hooks.powerSGD_hook import PowerSGDState


def _mean_input(res, step):
    return (res[0][0][step][0] / 2 + res[1][0][step][0] / 2)


@pytest.mark.parametrize("batched", [False, True])
def test_allreduce_before_start_then_exact_at_full_rank(batched):
    res = assert_all_ok(run_world(2, H.powersgd_steps, batched, 10, 3, 0.01))
    for step in (0, 1):  # vanilla allreduce
        for r in (0, 1):
            assert np.array_equal(res[r][0][step][1], _mean_input(res, step))
    want = _mean_input(res, 2)  # first compressed step: no old error yet
    for r in (0, 1):
        got = res[r][0][2][1]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())
        assert res[r][1] == 3


@pytest.mark.parametrize("batched", [False, True])
def test_error_feedback_invariant_rank1(batched):
    res = assert_all_ok(run_world(2, H.powersgd_steps, batched, 1, 5))
    for r in (0, 1):
        steps = res[r][0]
        assert steps[0][3] is None and steps[1][3] is None  # no error kept before PowerSGD starts
        for step in (2, 3, 4):
            flat_in, out, old_err, new_err = steps[step]
            n = flat_in.size
            assert np.array_equal(out, res[1 - r][0][step][1])  # every rank gets the same result
            # sent approximation + new error == gradient + old error (flat_in already holds the gradient only)
            lhs = out + new_err[:n]
            rhs = flat_in + (0 if old_err is None else old_err[:n])
            np.testing.assert_allclose(lhs, rhs, rtol=0, atol=1e-12 * np.abs(rhs).max())
            assert not np.allclose(out, _mean_input(res, step))  # rank 1: really compressed
        if step == 4:
            assert old_err is not None and np.abs(old_err).max() > 0


def test_compression_stats_follow_the_formula():
    res = assert_all_ok(run_world(2, H.powersgd_steps, False, 1, 4))
    # per compressed step: (6,5) and (4,3,2)->(4,6) compressed to (n+m)*1 = 11 and 10 elements;
    # (5,) is 1-D and (7,1) would grow ((7+1)*2 > 7): sent as they are. Steps 2 and 3 compress.
    before, after = 2 * (30 + 5 + 30 + 24 + 7), 2 * (11 + 5 + 11 + 10 + 7)
    for r in (0, 1):
        assert res[r][2] == (before / after, before, after)


@pytest.mark.parametrize("batched", [False, True])
def test_state_pickle_round_trip_resumes_identically(batched):
    res = assert_all_ok(run_world(2, H.powersgd_pickle, batched))
    for a, b in res.values():
        assert np.array_equal(a, b)


def test_min_compression_rate_zero_compresses_every_tensor():
    """torch accepts min_compression_rate=0 and then compresses every tensor, the 1-D (5,) and the
    (7, 1) that the default rate sends as they are: (n + m) * r = 6 and 8 elements."""
    res = assert_all_ok(run_world(2, H.powersgd_steps, False, 1, 4, 0))
    before, after = 2 * (30 + 5 + 30 + 24 + 7), 2 * (11 + 6 + 11 + 10 + 8)
    for r in (0, 1):
        assert res[r][2] == (before / after, before, after)
        for step in (2, 3):  # compressed, and the error-feedback invariant still holds
            flat_in, out, old_err, new_err = res[r][0][step]
            assert np.array_equal(out, res[1 - r][0][step][1])
            np.testing.assert_allclose(out + new_err, flat_in + (0 if old_err is None else old_err),
                                       rtol=0, atol=1e-12 * np.abs(flat_in).max())


def test_state_validation_follows_torch():
    with pytest.raises(ValueError, match="start_powerSGD_iter"):
        PowerSGDState(None, start_powerSGD_iter=1)
    with pytest.raises(ValueError, match="matrix_approximation_rank"):
        PowerSGDState(None, matrix_approximation_rank=0)
    for rate in (0, 0.5, -1):  # torch takes any number (0 or less: compress everything)
        assert PowerSGDState(None, min_compression_rate=rate).min_compression_rate == rate
    with pytest.raises(TypeError, match="min_compression_rate"):
        PowerSGDState(None, min_compression_rate="2")


def test_pickled_state_restores_onto_the_default_group_or_raises_without_one():
    s = PowerSGDState(object(), start_powerSGD_iter=5, random_seed=3)
    data = pickle.dumps(s)
    with pytest.raises(ValueError, match="init_process_group"):  # torch: _get_default_group() raises
        pickle.loads(data)
    res = assert_all_ok(run_world(1, H.powersgd_unpickle, data))
    assert res[0] == (True, 5, 0, PowerSGDState(None, random_seed=3).rng.randint(1000))


@pytest.mark.slow
def test_rank1_powersgd_training_reduces_loss():
    res = assert_all_ok(run_world(2, H.powersgd_training, timeout=300))
    for losses, it, stats in res.values():
        assert it == 8 and stats[0] > 1
        # compressed steps (from the third on) keep lowering the full-batch loss
        assert losses[-1] < 0.9 * losses[0], losses
        assert all(b < a for a, b in zip(losses[2:], losses[3:])), losses
    assert res[0][0] == res[1][0]

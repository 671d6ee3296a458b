"""DDP communication hooks (default_hooks, a user hook, a failing hook) with 2 ranks.

Tolerances: allreduce_hook is DDP's own reduction, so it is compared bitwise with the
hook-less result. fp16/bf16 round each rank's (gradient / world) once (relative error <= 2^-11
resp. 2^-8) and the fp32-accumulated sum once more, so the result is within
2 * u * max(|rank gradients|) of the exact mean, u = 2^-11 (fp16) or 2^-8 (bf16); gradients
here are far above fp16's subnormal range."""
import numpy as np
import pytest

import ddp_helpers as H
import tritensor as tt
from comm_helpers import assert_all_ok, run_world

UNIT = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8, "fp16_wrap": 2.0 ** -11, "bf16_wrap": 2.0 ** -8}


def test_allreduce_hook_is_exact():
    plain = assert_all_ok(run_world(2, H.ddp_grads, "mlp"))
    hooked = assert_all_ok(run_world(2, H.ddp_grads, "mlp", 25, "allreduce"))
    for r in (0, 1):
        for n, g in plain[r][0].items():
            assert np.array_equal(hooked[r][0][n], g), n


@pytest.mark.parametrize("hook", ["fp16", "bf16", "fp16_wrap", "bf16_wrap"])
def test_compression_hooks_within_rounding(hook):
    res = assert_all_ok(run_world(2, H.ddp_grads, "mlp", 0.00001, hook))
    for n in res[0][0]:
        local = [res[r][4][n].astype(np.float64) for r in (0, 1)]
        exact = (local[0] + local[1]) / 2
        bound = 2 * UNIT[hook] * max(np.abs(a).max() for a in local) + 1e-30
        for r in (0, 1):
            err = np.abs(res[r][0][n] - exact).max()
            assert err <= bound, (hook, n, err, bound)
        assert np.array_equal(res[0][0][n], res[1][0][n])
    # and the hook did compress: fp16/bf16 rounding is visible somewhere
    assert any(not np.allclose(res[0][0][n], (res[0][4][n] + res[1][4][n]) / 2, rtol=1e-7, atol=0)
               for n in res[0][0])


def test_custom_hook_returning_a_future():
    assert tt.futures.Future is tt.comm.Future
    res = assert_all_ok(run_world(2, H.ddp_custom_hook))
    ref = H.reference_grads("mlp")
    for g, seen in res.values():
        for n in ref:
            np.testing.assert_allclose(g[n], ref[n], rtol=1e-5, atol=1e-6, err_msg=n)
        # one parameter per bucket, in reverse registration order, the last bucket flagged
        assert seen == [(i, 1, i == 5) for i in range(6)]


def test_failing_hook_raises_on_its_rank_and_others_name_it():
    res = assert_all_ok(run_world(2, H.ddp_failing_hook, pg_timeout=10.0, timeout=60.0))
    msg1, _ = res[1]
    assert "ValueError" in msg1 and "this hook fails on purpose" in msg1 and "bucket 0" in msg1
    msg0, took0 = res[0]
    assert msg0 != "no error" and "rank 1" in msg0, msg0
    assert took0 < 10.0 + 5.0  # within the group timeout (plus DDP's margin)

"""``optim.swap_in_optimizer_params_and_state``: a step inside the block updates the swapped-in
parameters and state tensors (SGD with momentum, checked against its rule in float64 NumPy) and
leaves the live ones untouched; the live groups, state and settings come back on exit, also after
an exception; torch's checks of the state_dict's shape."""
import numpy as np
import pytest

import tritensor as tt
from tolerances import assert_close


def _setup():
    p = tt.nn.Parameter(tt.tensor(np.array([1.0, -2.0, 3.0])))
    q = tt.nn.Parameter(tt.tensor(np.array([[0.5, 0.25]])))
    opt = tt.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.01}], lr=0.1, momentum=0.9)
    p.grad, q.grad = tt.ones(3, dtype=tt.float64), tt.ones(1, 2, dtype=tt.float64)
    opt.step()
    return p, q, opt


def test_a_step_inside_updates_the_swapped_in_tensors_only():
    p, q, opt = _setup()
    live_p, live_buf = p.detach().numpy().copy(), opt.state[p]["momentum_buffer"].numpy().copy()
    sd = opt.state_dict()
    sd = {"state": {k: {n: (v.clone() if isinstance(v, tt.Tensor) else v) for n, v in s.items()}
                    for k, s in sd["state"].items()},
          "param_groups": [dict(g) for g in sd["param_groups"]]}
    sd["param_groups"][0]["lr"] = 0.5
    fp = tt.tensor(np.array([10.0, 20.0, 30.0]), requires_grad=True)
    fq = tt.tensor(np.array([[1.0, 1.0]]), requires_grad=True)
    fp.grad = tt.tensor(np.array([1.0, 2.0, 3.0]))
    fq.grad = tt.zeros(1, 2, dtype=tt.float64)
    groups_before = opt.param_groups[0]["params"]
    with tt.optim.swap_in_optimizer_params_and_state(opt, {"p": fp, "q": fq}, sd):
        assert opt.param_groups[0]["params"] == [fp] and opt.param_groups[0]["lr"] == 0.5
        opt.step()
    buf = 0.9 * live_buf + np.array([1.0, 2.0, 3.0])
    assert_close(sd["state"][0]["momentum_buffer"], buf, tt.float64)  # the caller's state, in place
    assert_close(fp.detach(), np.array([10.0, 20.0, 30.0]) - 0.5 * buf, tt.float64)
    assert_close(p.detach(), live_p, tt.float64)
    assert_close(opt.state[p]["momentum_buffer"], live_buf, tt.float64)
    assert opt.param_groups[0]["params"] is groups_before and opt.param_groups[0]["lr"] == 0.1
    assert list(opt.state) == [p, q]


def test_live_optimizer_comes_back_after_an_exception():
    p, q, opt = _setup()
    sd = opt.state_dict()
    with pytest.raises(KeyError):
        with tt.optim.swap_in_optimizer_params_and_state(opt, {"p": tt.zeros(3), "q": tt.zeros(1, 2)}, sd):
            raise KeyError("inside")
    assert opt.param_groups[0]["params"] == [p] and opt.param_groups[1]["params"] == [q]
    assert p in opt.state


def test_checks_as_torch():
    p = tt.nn.Parameter(tt.zeros(3))
    fresh = tt.optim.SGD([p], lr=0.1, momentum=0.9)
    with pytest.raises(RuntimeError, match="requires initialized optimizer state"):
        with tt.optim.swap_in_optimizer_params_and_state(fresh, {"p": p}, fresh.state_dict()):
            pass
    p, q, opt = _setup()
    params = {"p": tt.zeros(3), "q": tt.zeros(1, 2)}
    sd = opt.state_dict()
    bad = [({"state": [], "param_groups": sd["param_groups"]}, "to be a dict mapping packed parameter ids"),
           ({"state": sd["state"], "param_groups": sd["param_groups"][:1]}, "different number of parameter groups"),
           ({"state": {**sd["state"], 7: {}}, "param_groups": sd["param_groups"]}, r"got extra keys \[7\]"),
           ({"state": sd["state"], "param_groups": [{**sd["param_groups"][0], "extra": 1}, sd["param_groups"][1]]},
            r"Keys only in swap-in: \['extra'\]"),
           ("not a dict", "requires a DCP-style optimizer state_dict")]
    for swapin, message in bad:
        with pytest.raises(RuntimeError, match=message):
            with tt.optim.swap_in_optimizer_params_and_state(opt, params, swapin):
                pass
    with pytest.raises(RuntimeError, match="match optimizer.param_groups ordering"):
        with tt.optim.swap_in_optimizer_params_and_state(opt, {"p": tt.zeros(3)}, sd):
            pass
    assert opt.param_groups[0]["params"] == [p]

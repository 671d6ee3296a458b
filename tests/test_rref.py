"""The seed's RRef sharing flows with 3 workers: A = worker0, B = worker1 (owner), C = worker2.

Each flow asserts the control-message sequence the seed draws (recorded by every agent) and
that the owner's value (observed by a weakref finaliser on B) is deleted when the last user
drops it, and not before. The same flows run again with control messages dropped,
duplicated, delayed and reordered by the FaultInjector."""

import pytest

import rpc_helpers

CONTROL = ("REMOTE", "REMOTE_RET", "RREF_FORK_REQUEST", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE")


def _seq(log):
    """(event, src, dst, type) of the protocol messages, first copy of each only."""
    out = []
    for e in log:
        k = (e[0], e[1], e[2], e[3])
        if e[3] in CONTROL and k not in out:
            out.append(k)
    return out


def _flows(opts=None):
    res = rpc_helpers.run_rpc(3, "sharing_flows", opts=opts)
    assert all(r[0] == "ok" for r in res.values()), res
    assert all(r[1][1] == [] for r in res.values()), [r[1][1] for r in res.values()]
    return res[0][1][0]


@pytest.fixture(scope="module")
def flows():
    return _flows()


def test_user_shares_with_owner_as_return_value(flows):
    a, b, c = (_seq(x) for x in flows["flow1"])
    assert a == [("send", 0, 1, "REMOTE"), ("recv", 1, 0, "REMOTE_RET"), ("send", 0, 1, "RREF_USER_DELETE")]
    assert b == [("recv", 0, 1, "REMOTE"), ("send", 1, 0, "REMOTE_RET"), ("recv", 0, 1, "RREF_USER_DELETE")]
    assert c == []


def test_user_shares_with_owner_as_argument(flows):
    assert flows["flow2_result"] == (True, True, "f2")  # B got its own OwnerRRef back
    a, b, c = (_seq(x) for x in flows["flow2"])
    assert a == [("recv", 1, 0, "RREF_CHILD_ACCEPT"), ("send", 0, 1, "RREF_USER_DELETE")]
    assert b == [("send", 1, 0, "RREF_CHILD_ACCEPT"), ("recv", 0, 1, "RREF_USER_DELETE")]
    assert c == []


def test_owner_shares_with_user(flows):
    assert flows["flow3_result"] == ("f3", True, "f3")
    assert flows["flow3_held"] and flows["flow3_deleted"]
    a, b, c = (_seq(x) for x in flows["flow3"])
    assert a == [] and b == [("recv", 2, 1, "RREF_USER_DELETE")] and c == [("send", 2, 1, "RREF_USER_DELETE")]


def test_user_shares_with_user(flows):
    assert flows["flow4_result"] == "f4"
    assert flows["flow4_alive_while_held"] and flows["flow4_deleted"]
    a, b, c = (_seq(x) for x in flows["flow4"])
    assert c[:2] == [("send", 2, 1, "RREF_FORK_REQUEST"), ("send", 2, 0, "RREF_CHILD_ACCEPT")]
    assert a == [("recv", 2, 0, "RREF_CHILD_ACCEPT"), ("send", 0, 1, "RREF_USER_DELETE")]
    assert b[0] == ("recv", 2, 1, "RREF_FORK_REQUEST")
    assert sorted(b[1:]) == [("recv", 0, 1, "RREF_USER_DELETE"), ("recv", 2, 1, "RREF_USER_DELETE")]


def test_flows_under_injected_faults():
    out = _flows({"chaos": 3})
    assert out["flow2_result"] == (True, True, "f2") and out["flow3_result"] == ("f3", True, "f3")
    assert out["flow3_held"] and out["flow3_deleted"]
    assert out["flow4_alive_while_held"] and out["flow4_deleted"]
    a = _seq(out["flow4"][0])
    assert a.index(("recv", 2, 0, "RREF_CHILD_ACCEPT")) < a.index(("send", 0, 1, "RREF_USER_DELETE"))

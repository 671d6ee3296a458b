"""The remote() + to_here() path with 2 workers (issue 25), as torch's behaves: the owner confirms
a remote()'s user (REMOTE_RET) once the function has finished, so the answer to a to_here()
comes after it; a tensor sent twice in one message arrives as one; the RREF_USER_DELETEs of
handles dropped in a loop go out in batches (at most one per owner and RELEASE_INTERVAL), not
one per handle. Its speed against torch.distributed.rpc: ``python -m tritensor.bench rpc``."""

import pytest

import rpc_helpers

OPS = 40


@pytest.fixture(scope="module")
def path():
    res = rpc_helpers.run_rpc(2, "fetch_path", OPS)
    assert all(r[0] == "ok" for r in res.values()), res
    value, leaks = res[0][1]
    assert leaks == [] and res[1][1][1] == []
    return value


def test_remote_user_is_confirmed_when_its_function_has_finished(path):
    # torch: confirmed_by_owner() is False while the function runs, True once to_here() returned
    assert path["confirmed_while_running"] is False
    assert path["value"] == "through" and path["confirmed_after_to_here"] is True


def test_a_tensor_sent_twice_arrives_as_one_object(path):
    assert path["aliasing_kept"] is True  # torch.rpc keeps it too


def test_deletes_of_a_loop_are_batched(path):
    from tritensor.comm.rpc.agent import RELEASE_INTERVAL

    # one batch per interval at most (+1 for the interval the loop began in, +1 for the last);
    # before, the ACK of every REMOTE_RET woke the housekeeping thread, which sent the previous
    # handle's delete alone: OPS deletes
    assert 1 <= path["deletes"] <= path["elapsed"] / RELEASE_INTERVAL + 2, path


def test_channel_defers_only_the_frames_nothing_waits_for():
    """REMOTE_RET, CHILD_ACCEPT, USER_DELETE and their ACKs may wait for a ride (transmit_later);
    a FORK_REQUEST, its ACK (the call carrying the fork waits for it) and every retry may not."""
    from tritensor.comm.rpc.channel import ControlChannel

    now, sent, later = [0.0], [], []
    ch = ControlChannel(0, lambda dst, f: sent.append(f), lambda: now[0], handler=lambda *a: None,
                        transmit_later=lambda dst, f: later.append(f))
    for mtype in ("REMOTE_RET", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE", "RREF_FORK_REQUEST"):
        ch.send(1, mtype, ("payload",))
    assert [f[2] for f in later] == ["REMOTE_RET", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE"]
    assert [f[2] for f in sent] == ["RREF_FORK_REQUEST"]
    sent.clear(), later.clear()
    ch.on_frame(1, ("ctl", (1, 1), "RREF_USER_DELETE", []))
    ch.on_frame(1, ("ctl", (1, 2), "RREF_FORK_REQUEST", ((1, 9), (1, 10))))
    assert later == [("ack", (1, 1))] and sent == [("ack", (1, 2))]
    sent.clear(), later.clear()
    now[0] += 1.0  # past every retry time: the four unacknowledged messages go again, at once
    ch.tick()
    assert sorted(f[2] for f in sent) == ["REMOTE_RET", "RREF_CHILD_ACCEPT", "RREF_FORK_REQUEST",
                                          "RREF_USER_DELETE"] and later == []

"""The remote() + to_here() path with 2 workers, as torch's behaves: the owner confirms
a remote()'s user (REMOTE_RET) once the function has finished, so the answer to a to_here()
comes after it; a tensor sent twice in one message arrives as one; the RREF_USER_DELETEs of
handles dropped in a loop go out in batches (at most one per owner and RELEASE_INTERVAL), not
one per handle. Below them, the transport's parts of that path: which control frames may wait
for a ride, the reader's read-ahead of a small frame that has arrived, and the non-blocking send
of a fetch's answer from a reader thread. Its speed against torch.distributed.rpc:
``python -m tritensor.bench rpc``."""

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


def _pair(sndbuf=None):
    import socket

    a, b = socket.socketpair()
    if sndbuf:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    return a, b


def test_a_small_frame_that_has_arrived_is_read_ahead_and_no_other():
    """The reader acts on a remote() and the to_here() right behind it back to back only when the
    second has arrived whole: a frame with tensor buffers, a partial one or none is left alone."""
    import numpy as np

    import tritensor as tt
    from tritensor.comm.rpc import wire

    a, b = _pair()  # blocking sockets, as the agent's
    assert wire.read_buffered_frame(b) is None  # nothing there
    head_env, bufs = wire.pack(wire.REQUEST, 7, ("fetch", (0, 1)))
    wire.send_frame(a, head_env, bufs)
    kind, msg_id, env, got = wire.read_buffered_frame(b)
    assert (kind, msg_id, got) == (wire.REQUEST, 7, []) and wire.unpickle(env, got) == ("fetch", (0, 1))
    a.sendall(head_env[:-1])  # all but one byte
    assert wire.read_buffered_frame(b) is None
    a.sendall(head_env[-1:])
    assert wire.read_buffered_frame(b)[1] == 7
    t = tt.from_numpy(np.arange(3, dtype=np.float32))
    wire.send_frame(a, *wire.pack(wire.REQUEST, 8, ("call", len, (t,), {})))
    assert wire.read_buffered_frame(b) is None  # it carries a tensor: read by the blocking path
    assert wire.read_frame(b)[1] == 8
    a.close(), b.close()


def test_try_send_never_blocks_and_hands_the_rest_to_a_worker_thread():
    import threading

    import numpy as np

    from tritensor.comm.rpc import wire
    from tritensor.comm.rpc.links import Links

    import tritensor as tt

    a, b = _pair(sndbuf=4096)
    links = Links(0, [None, None], [None, ("127.0.0.1", 1)], [None, None], b"s", 5.0, 1)
    lock = threading.Lock()
    links.out[1] = (a, lock)
    small = wire.pack(wire.RESPONSE, 1, ("ok", 3))
    handed = []
    assert links.try_send(1, *small, [], handed.append) and handed == []  # it left at once
    assert wire.read_frame(b)[1] == 1
    with lock:  # another thread is sending: nothing is sent, the caller sends it later
        assert links.try_send(1, *small, [], handed.append) is False
    big = wire.pack(wire.RESPONSE, 2, ("ok", tt.from_numpy(np.ones(1 << 18, np.float32))))
    assert links.try_send(1, *big, [], handed.append) and len(handed) == 1  # the socket filled up
    assert lock.locked()  # the connection stays this frame's until its rest is sent
    reader = threading.Thread(target=lambda: handed.append(wire.read_frame(b)))
    reader.start()
    handed[0]()  # the worker thread's part
    reader.join(10)
    assert not lock.locked() and handed[1][1] == 2 and handed[1][3][0].nbytes == 1 << 20
    assert links.try_send(0, *small, [], handed.append) is False  # no connection to worker 0: not here
    a.close(), b.close()

"""Model check of the RRef protocol: seeded random schedules over 3 simulated workers.

The workers run the agent's own RRefContext and ControlChannel (see tests/rref_sim.py);
control messages are dropped (then retried), duplicated, delayed and reordered by the
FaultInjector, user messages are delivered in any order. Every schedule must show zero
premature deletions and zero leaks once everything is dropped and the protocol has settled.
"""

import sys

import pytest

import rref_sim
from tritensor.comm.rpc import rref_context as rc

FAST = 300


def _run(seeds):
    for seed in seeds:
        rref_sim.run_schedule(seed)  # raises AssertionError naming the seed


def test_model_check_fast():
    _run(range(FAST))


@pytest.mark.slow
def test_model_check_thousand():
    _run(range(FAST, FAST + 1000))


def test_schedules_are_reproducible():
    a, b = rref_sim.run_schedule(11), rref_sim.run_schedule(11)
    assert a.log == b.log and a.deleted == b.deleted and a.injector.stats == b.injector.stats
    assert sum(v for (t, k), v in a.injector.stats.items() if k == "drop") > 0
    assert sum(v for (t, k), v in a.injector.stats.items() if k == "dup") > 0


def _failures(seeds):
    bad = 0
    for seed in seeds:
        try:
            rref_sim.run_schedule(seed)
        except AssertionError:
            bad += 1
    return bad


def test_model_check_catches_a_g2_violation(monkeypatch):
    """A mutant that deletes a parent before its child is accepted must be caught."""
    def no_g2(self, rec):
        if rec.alive or not rec.confirmed or rec.delete_sent:
            return
        rec.delete_sent = True
        self._pending_deletes.setdefault(rec.owner, []).append((rec.rref_id, rec.fork_id))

    monkeypatch.setattr(rc.RRefContext, "_maybe_delete_user", no_g2)
    assert _failures(range(60)) > 0


def test_model_check_catches_non_idempotent_fork_requests(monkeypatch):
    """Without tombstones a late duplicate fork request resurrects a deleted fork: a leak."""
    real = rc.RRefContext.on_control

    def forgetful(self, src, mtype, payload):
        self.tombstones.clear()
        return real(self, src, mtype, payload)

    monkeypatch.setattr(rc.RRefContext, "on_control", forgetful)
    assert _failures(range(60)) > 0


def test_duplicate_control_messages_change_nothing():
    """Fork request, child accept, delete and REMOTE_RET applied twice leave the same state."""
    sent = []

    class Chan:
        handler = None
        failures = []

        def send(self, dst, mtype, payload, on_ack=None):
            sent.append((dst, mtype, payload))

        def pending(self):
            return 0

    owner = rc.RRefContext(0, Chan())
    rid = owner.create_owner("v")
    f = (1, 1)
    for _ in range(2):
        owner.on_control(1, "RREF_FORK_REQUEST", (rid, f))
    assert owner.forks[rid] == {f}
    owner.release(("owner", rid))
    owner.process()
    assert rid in owner.owners  # the fork holds it
    for _ in range(2):
        owner.on_control(1, "RREF_USER_DELETE", [(rid, f)])
    assert rid not in owner.owners
    owner.on_control(1, "RREF_FORK_REQUEST", (rid, f))  # a late duplicate
    assert not owner.forks.get(rid)
    user = rc.RRefContext(1, Chan())
    r2, f2 = user.create_remote_user(0)
    user.on_control(0, "REMOTE_RET", (r2, f2))
    user.on_control(0, "REMOTE_RET", (r2, f2))
    assert user.users[f2].confirmed
    data = user.fork(r2, 0, f2, 2)
    user.on_control(2, "RREF_CHILD_ACCEPT", data[2])
    user.on_control(2, "RREF_CHILD_ACCEPT", data[2])
    assert not user.users[f2].children and not user.child_parent

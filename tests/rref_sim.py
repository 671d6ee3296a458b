"""A deterministic in-process simulation of the RRef protocol over 3 (or n) workers.

Each simulated worker runs the agent's own :class:`RRefContext` and :class:`ControlChannel`
on a virtual clock; the network is a bag of in-flight frames from which a seeded scheduler
picks the next one to deliver (so any two messages can be reordered), and the channel's
:class:`FaultInjector` drops, duplicates, delays and reorders control messages. User messages
(``remote()`` calls, calls carrying an RRef, ``to_here`` fetches) are delivered exactly once
(user functions are never retried), in any order.

``run_schedule(seed)`` plays one random schedule of creating, sharing, fetching and dropping
RRefs, then drops every handle and lets the protocol settle; it raises ``AssertionError`` on a
premature deletion (an owner deleting a value that a live handle or an in-flight message still
refers to, or a fetch of a deleted value), a wrong value, or anything left over at the end.
"""

from __future__ import annotations

import random

from tritensor.comm.rpc.channel import ControlChannel
from tritensor.comm.rpc.faults import FaultInjector
from tritensor.comm.rpc.rref_context import RRefContext


class Sim:
    def __init__(self, seed: int, n: int = 3, p: float = 0.3):
        self.rng = random.Random(seed)
        self.now = 0.0
        self.inflight: list = []  # (src, dst, frame)
        self.injector = FaultInjector.chaos(seed, p=p, max_delay=0.02, max_drops=3)
        self.handles = [[] for _ in range(n)]  # per worker: (kind, key, rref_id, owner, fork_id)
        self.values: dict = {}  # rref_id -> value
        self.deleted: list = []
        self.fetches: list = []  # (future, expected, worker, handle key)
        self.pinned: dict = {}  # (worker, handle key) -> to_here calls holding it (to_here blocks)
        self.settling = False
        self.udfs: list = []  # (owner, rref_id) remote() functions still running
        self.log: list = []
        self.ctx = []
        for w in range(n):
            ch = ControlChannel(w, self._transmit(w), lambda: self.now, injector=self.injector,
                                base_delay=0.05, max_delay=0.4, max_attempts=40,
                                recorder=lambda *e: self.log.append(e))
            self.ctx.append(RRefContext(w, ch, on_owner_deleted=lambda r, w=w: self._deleted(w, r)))

    def _transmit(self, src):
        return lambda dst, frame: self.inflight.append((src, dst, frame))

    # -- the invariant ---------------------------------------------------------------
    def _deleted(self, w, rref_id):
        assert rref_id[0] is not None
        for q, hs in enumerate(self.handles):
            for h in hs:
                assert h[2] != rref_id, f"premature deletion of {rref_id} on {w}: live handle {h} on worker {q}"
        for src, dst, frame in self.inflight:
            if frame[0] == "call":
                assert frame[1][0] != rref_id, f"premature deletion of {rref_id}: in-flight {frame}"
            if frame[0] == "remote":
                assert frame[1] != rref_id, f"premature deletion of {rref_id}: remote() in flight"
        assert all(u[1] != rref_id for u in self.udfs), f"deletion of {rref_id} while its remote() runs"
        self.deleted.append(rref_id)

    # -- actions ---------------------------------------------------------------------
    def act(self):
        r = self.rng
        n = len(self.ctx)
        live = [(w, i) for w in range(n) for i in range(len(self.handles[w]))]
        choice = r.random()
        if choice < 0.08:
            w = r.randrange(n)
            rid = self.ctx[w].create_owner(None, site="sim")
            self.values[rid] = f"value-{rid}"
            self.ctx[w].owners[rid].future._result = self.values[rid]
            self.handles[w].append(("owner", rid, rid, w, None))
        elif choice < 0.18:
            w, o = r.randrange(n), r.randrange(n)
            if w == o:
                return
            rid, fid = self.ctx[w].create_remote_user(o, site="sim")
            self.values[rid] = f"value-{rid}"
            self.handles[w].append(("user", fid, rid, o, fid))
            self.inflight.append((w, o, ("remote", rid, fid, w)))
        elif choice < 0.38 and live:
            w, i = r.choice(live)
            kind, key, rid, owner, fid = self.handles[w][i]
            data = self.ctx[w].fork(rid, owner, fid, dst := r.randrange(n))
            self.inflight.append((w, dst, ("call", data)))
        elif choice < 0.48 and live:
            w, i = r.choice(live)
            kind, key, rid, owner, fid = self.handles[w][i]
            if kind == "user":
                self.pinned[(w, key)] = self.pinned.get((w, key), 0) + 1
                self.inflight.append((w, owner, ("fetch", rid, w, key)))
        elif choice < 0.62 and live:
            w, i = r.choice(live)
            if self.pinned.get((w, self.handles[w][i][1])):
                return
            kind, key, *_ = self.handles[w].pop(i)
            self.ctx[w].release((kind, key))
            self.ctx[w].process()
        elif choice < 0.68 and self.udfs:
            o, rid = self.udfs.pop(r.randrange(len(self.udfs)))
            self.ctx[o].set_value(rid, self.values[rid])
            self._unpin()
        elif choice < 0.75:
            self.now += r.uniform(0.0, 0.1)
            for c in self.ctx:
                c.channel.tick()
        elif self.inflight:
            self.deliver(self.inflight.pop(r.randrange(len(self.inflight))))

    def deliver(self, msg):
        src, dst, frame = msg
        c = self.ctx[dst]
        if frame[0] in ("ctl", "ack"):
            c.channel.on_frame(src, frame)
        elif frame[0] == "remote":
            _, rid, fid, creator = frame
            self.log.append(("recv", src, dst, "REMOTE_CALL", (rid, fid)))
            c.on_remote_call(rid, fid, creator)
            self.udfs.append((dst, rid))
            if self.settling:
                self.udfs.remove((dst, rid))
                c.set_value(rid, self.values[rid])
        elif frame[0] == "call":
            kind, rid, rec = c.unfork(frame[1], site="sim")
            self.handles[dst].append((kind, rid if kind == "owner" else rec.fork_id, rid, frame[1][1],
                                      None if kind == "owner" else rec.fork_id))
        elif frame[0] == "fetch":
            self.fetches.append([c.owner_future(frame[1]), self.values[frame[1]], frame[2], frame[3]])
        self._unpin()
        if self.settling:
            self._drop_all()

    def _unpin(self):
        for f in self.fetches:
            if f[0].done() and f[2] is not None:
                self.pinned[(f[2], f[3])] -= 1
                f[2] = None

    def _drop_all(self):
        for w, hs in enumerate(self.handles):
            for h in list(hs):
                if not self.pinned.get((w, h[1])):
                    hs.remove(h)
                    self.ctx[w].release((h[0], h[1]))
            self.ctx[w].process()

    # -- the whole schedule ----------------------------------------------------------
    def settle(self, max_steps=200000):
        self.settling = True
        while self.udfs:
            o, rid = self.udfs.pop()
            self.ctx[o].set_value(rid, self.values[rid])
        self._unpin()
        self._drop_all()
        for _ in range(max_steps):
            if self.inflight:
                self.deliver(self.inflight.pop(self.rng.randrange(len(self.inflight))))
                continue
            due = [d for d in (c.channel.next_due() for c in self.ctx) if d is not None]
            if not due:
                return
            self.now = max(self.now, min(due))
            for c in self.ctx:
                c.channel.tick()
        raise AssertionError("the protocol did not settle")


def run_schedule(seed: int, steps: int = 120, n: int = 3, p: float = 0.3) -> Sim:
    sim = Sim(seed, n, p)
    for _ in range(steps):
        sim.act()
    sim.settle()
    for fut, expected, *_ in sim.fetches:
        assert fut.done() and fut.value() == expected, f"seed {seed}: a fetch got {fut!r}, expected {expected!r}"
    for c in sim.ctx:
        leaks = c.leaks()
        assert not leaks, f"seed {seed}: worker {c.me} leaks {leaks}"
        assert not c.forks and not c.child_parent and c.settled(), f"seed {seed}: worker {c.me} not settled"
    created = {rid for rid in sim.values}
    assert sorted(sim.deleted) == sorted(created), f"seed {seed}: deleted {len(sim.deleted)} of {len(created)}"
    return sim

"""The RRef protocol's state on one worker: owner and user records, forks, G1 and G2.

This is the seed's protocol (``shared/seeds/rref_protocol.txt``) as a state machine with no
sockets and no threads of its own, so that the agent and the in-process model check
(``tests/test_rref_model.py``) run the very same code. Everything it sends goes through a
:class:`~.channel.ControlChannel` (retried until acknowledged); everything it receives comes
from :meth:`RRefContext.on_control`; every handler is idempotent.

Ids: an RRefId and a ForkId are ``(worker id, counter)`` pairs, so they are globally unique.

Owner side (the worker that holds the value):

* ``owners[rref_id]``: the one OwnerRecord per id (its value's Future, the number of live
  Python ``RRef`` handles on this worker, the creation site);
* ``forks[rref_id]``: the ForkIds of the UserRRefs the owner knows about;
* ``tombstones``: (rref_id, fork_id) pairs already deleted, so that a late duplicate
  ``RREF_FORK_REQUEST`` cannot resurrect a deleted fork.

The OwnerRRef and its value are deleted when its value is set, no fork is known and no local
handle holds it (a placeholder created by an early ``to_here`` waits for its ``remote()``).

User side: ``users[fork_id]``: a UserRecord per UserRRef (confirmed by the owner or not, its
Python handle alive or not, its not-yet-accepted children: G2). A user sends
``RREF_USER_DELETE`` (G1) exactly when its handle is dead, it is confirmed and it has no
pending child; deletions are collected by :meth:`process` and batched per owner.

Messages (all retried until ``RREF_ACK``):

* ``REMOTE_RET(rref, fork)`` owner -> creator of a ``remote()``: the owner knows the fork
  (sent, as by torch's owner, once the function has finished: :meth:`RRefContext.set_value`);
* ``RREF_FORK_REQUEST(rref, fork)`` child -> owner; its ACK confirms the child, which then
  sends ``RREF_CHILD_ACCEPT(fork)`` to its parent, which may then let its own reference go;
* ``RREF_CHILD_ACCEPT(fork)`` owner -> parent too, when a user passes an RRef to its owner;
* ``RREF_USER_DELETE([(rref, fork), ...])`` user -> owner.

Handle deaths are reported by :meth:`release` (a lock-free ``deque.append``, safe from
``__del__`` whatever locks its caller holds); they take effect in :meth:`process`.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from collections import deque

from .. import Future

__all__ = ["RRefContext", "OwnerRecord", "UserRecord", "RRefDeletedError"]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class RRefDeletedError(RuntimeError):
    """The owner already deleted this RRef's value (a protocol violation if it happens)."""


_IN_PKG: dict = {}  # co_filename -> whether it is a file of this package (abspath costs a few us)


def _in_pkg(filename: str) -> bool:
    ours = _IN_PKG.get(filename)
    if ours is None:
        ours = _IN_PKG[filename] = os.path.dirname(os.path.abspath(filename)) == _PKG_DIR
    return ours


def creation_site() -> str:
    """``file:line in function`` of the nearest caller outside this package."""
    f = sys._getframe(1)
    while f is not None and _in_pkg(f.f_code.co_filename):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}" if f is not None else "<unknown>"


class OwnerRecord:
    """An owner's bookkeeping for one RRef: the Future of its value, how many local references it has, and
    where it was made (for leak reports)."""
    __slots__ = ("rref_id", "future", "local_refs", "site")

    def __init__(self, rref_id, site):
        self.rref_id = rref_id
        self.future = Future(name=f"OwnerRRef{rref_id}")
        self.local_refs = 0
        self.site = site


class UserRecord:
    """A user's bookkeeping for one RRef fork: its owner, whether the owner has confirmed it, the forks made
    from it, and whether its delete has been sent."""
    __slots__ = ("rref_id", "fork_id", "owner", "confirmed", "alive", "children", "delete_sent", "site",
                 "confirmation")

    def __init__(self, rref_id, fork_id, owner, confirmed, site):
        self.rref_id = rref_id
        self.fork_id = fork_id
        self.owner = owner
        self.confirmed = confirmed
        self.alive = True
        self.children: set = set()
        self.delete_sent = False
        self.site = site
        self.confirmation = Future(name=f"confirm{fork_id}")
        if confirmed:
            self.confirmation.set_result(True)


class RRefContext:
    """A worker's RRef reference counting, torch's protocol: owners keep a value while confirmed users hold
    forks; forks, confirmations and deletes travel as control messages."""
    def __init__(self, me: int, channel, on_owner_deleted=None):
        self.me = me
        self.channel = channel
        channel.handler = self.on_control
        self.on_owner_deleted = on_owner_deleted  # callback(rref_id), for tests and the model check
        self.owners: dict = {}
        self.forks: dict = {}
        self.tombstones: set = set()
        self.deleted_owner_ids: set = set()
        self.users: dict = {}
        self.child_parent: dict = {}  # child fork id -> parent fork id (pending CHILD_ACCEPT)
        self.remote_rets: dict = {}  # rref id -> (creator, fork id): REMOTE_RET owed once the value is set
        self._released: deque = deque()
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._out: list = []  # (dst, mtype, payload, on_ack) queued under the lock, sent after
        self._pending_deletes: dict = {}  # owner -> [(rref_id, fork_id)]: the next batch

    # -- helpers ---------------------------------------------------------------------
    def new_id(self):
        """A new (worker id, local counter) id, unique in the group."""
        return (self.me, next(self._ids))

    def _send(self, dst, mtype, payload, on_ack=None):
        self._out.append((dst, mtype, payload, on_ack))

    def _flush(self):
        with self._lock:
            self._send_deletes()
            out, self._out = self._out, []
        for dst, mtype, payload, on_ack in out:
            self.channel.send(dst, mtype, payload, on_ack)

    # -- owner side ------------------------------------------------------------------
    def _owner(self, rref_id, site=None) -> OwnerRecord:
        rec = self.owners.get(rref_id)
        if rec is None:
            if rref_id in self.deleted_owner_ids:
                raise RRefDeletedError(f"RRef {rref_id} was already deleted on its owner (worker {self.me})")
            rec = self.owners[rref_id] = OwnerRecord(rref_id, site or creation_site())
        return rec

    def create_owner(self, value, site=None):
        """``RRef(value)`` on this worker: a new OwnerRRef with one local handle."""
        with self._lock:
            rref_id = self.new_id()
            rec = self._owner(rref_id, site)
            rec.local_refs += 1
            rec.future.set_result(value)
        return rref_id

    def create_pending_owner(self, site=None):
        """``remote()`` to this very worker: an OwnerRRef whose value :meth:`set_value` gives."""
        with self._lock:
            rref_id = self.new_id()
            self._owner(rref_id, site).local_refs += 1
        return rref_id

    def acquire_owner(self, rref_id):
        """One more local Python handle of an owned RRef."""
        with self._lock:
            self._owner(rref_id).local_refs += 1

    def owner_future(self, rref_id) -> Future:
        """The value's Future (a placeholder when the ``remote()`` has not arrived yet)."""
        with self._lock:
            return self._owner(rref_id).future

    def on_remote_call(self, rref_id, fork_id, creator):
        """The owner got a ``remote()`` call: know the creator's fork now; acknowledge it
        (REMOTE_RET) when the function has finished (:meth:`set_value`), as torch's owner does."""
        with self._lock:
            self._owner(rref_id)
            if creator != self.me:
                if (rref_id, fork_id) not in self.tombstones:
                    self.forks.setdefault(rref_id, set()).add(fork_id)
                self.remote_rets[rref_id] = (creator, fork_id)

    def set_value(self, rref_id, value=None, exc=None):
        """The ``remote()`` function finished on the owner: complete the value's Future (its
        callbacks, fetches waiting for it, run here but outside the lock: they send) and send
        the creator its REMOTE_RET."""
        with self._lock:
            rec = self.owners.get(rref_id)
            ret = self.remote_rets.pop(rref_id, None)
            if ret is not None:
                self._send(ret[0], "REMOTE_RET", (rref_id, ret[1]))
        self._flush()  # first: the REMOTE_RET may then travel with a fetch's answer
        if rec is not None:
            if exc is not None:
                rec.future.set_exception(exc)
            else:
                rec.future.set_result(value)
            with self._lock:
                self._maybe_delete_owner(rref_id)
        self._flush()

    def _maybe_delete_owner(self, rref_id):
        rec = self.owners.get(rref_id)
        if rec is None or rec.local_refs > 0 or self.forks.get(rref_id) or not rec.future.done():
            return
        del self.owners[rref_id]
        self.forks.pop(rref_id, None)
        self.deleted_owner_ids.add(rref_id)
        if self.on_owner_deleted is not None:
            self.on_owner_deleted(rref_id)

    # -- user side -------------------------------------------------------------------
    def create_remote_user(self, owner, site=None):
        """The caller of ``remote(owner, ...)``: a new UserRRef awaiting REMOTE_RET."""
        with self._lock:
            rref_id = self.new_id()
            fork_id = self.new_id()
            self.users[fork_id] = UserRecord(rref_id, fork_id, owner, False, site or creation_site())
        return rref_id, fork_id

    def fork(self, rref_id, owner, fork_id, dst):
        """Share a handle with worker ``dst``: return the fork data to put in the message.

        ``fork_id`` is the handle's own fork (None on the owner). The owner records the new
        fork at once (it is the parent: G2 holds trivially); a user records it as a pending
        child that keeps its own reference alive until the child's RREF_CHILD_ACCEPT."""
        with self._lock:
            child = self.new_id()
            if owner == self.me:
                self._owner(rref_id)
                self.forks.setdefault(rref_id, set()).add(child)
            else:
                rec = self.users.get(fork_id)
                if rec is None or rec.delete_sent:
                    raise RuntimeError(f"cannot share RRef {rref_id}: its UserRRef {fork_id} is already deleted")
                rec.children.add(child)
                self.child_parent[child] = fork_id
        return (rref_id, owner, child, self.me)

    def fork_failed(self, data):
        """The message carrying ``data`` never left: undo the fork (else the parent would leak)."""
        rref_id, owner, child, _parent = data
        with self._lock:
            if owner == self.me:
                self.forks.get(rref_id, set()).discard(child)
                self._maybe_delete_owner(rref_id)
            else:
                self._child_accepted(child)
        self._flush()

    def unfork(self, data, site=None):
        """Receive fork data: return ("owner", rref_id, None) or ("user", rref_id, UserRecord)."""
        rref_id, owner, fork_id, parent = data
        with self._lock:
            if owner == self.me:
                rec = self._owner(rref_id, site)
                rec.local_refs += 1
                if parent == self.me:  # owner to itself: the fork added when pickling is not a user
                    self.forks.get(rref_id, set()).discard(fork_id)
                else:  # user to owner: accept the (phantom) child at once, the local handle holds the value
                    self._send(parent, "RREF_CHILD_ACCEPT", fork_id)
                result = ("owner", rref_id, None)
            else:
                rec = self.users.get(fork_id)
                if rec is None:
                    rec = self.users[fork_id] = UserRecord(rref_id, fork_id, owner, parent == owner,
                                                           site or creation_site())
                    if parent != owner:  # user to user: register with the owner, then accept
                        self._send(owner, "RREF_FORK_REQUEST", (rref_id, fork_id),
                                   lambda f=fork_id, p=parent: self._on_fork_confirmed(f, p))
                else:  # the same fork delivered again (a duplicated user message)
                    rec.alive = True
                result = ("user", rref_id, rec)
        self._flush()
        return result

    def _on_fork_confirmed(self, fork_id, parent):
        with self._lock:
            rec = self.users.get(fork_id)
            if rec is not None and not rec.confirmed:
                rec.confirmed = True
                rec.confirmation.set_result(True)
                self._send(parent, "RREF_CHILD_ACCEPT", fork_id)
                self._maybe_delete_user(rec)
        self._flush()

    def _child_accepted(self, child):
        parent = self.child_parent.pop(child, None)
        rec = self.users.get(parent) if parent is not None else None
        if rec is not None:
            rec.children.discard(child)
            self._maybe_delete_user(rec)

    def _maybe_delete_user(self, rec):
        if rec.alive or not rec.confirmed or rec.children or rec.delete_sent:
            return
        rec.delete_sent = True
        self._pending_deletes.setdefault(rec.owner, []).append((rec.rref_id, rec.fork_id))

    # -- handle deaths ---------------------------------------------------------------
    def release(self, token):
        """A Python handle died: ``("owner", rref_id)`` or ``("user", fork_id)``. Lock-free."""
        self._released.append(token)

    def process(self):
        """Apply released handles; send the resulting deletions, one batch per owner (G1)."""
        with self._lock:
            while self._released:
                kind, key = self._released.popleft()
                if kind == "owner":
                    rec = self.owners.get(key)
                    if rec is not None:
                        rec.local_refs -= 1
                        self._maybe_delete_owner(key)
                else:
                    rec = self.users.get(key)
                    if rec is not None:
                        rec.alive = False
                        self._maybe_delete_user(rec)
        self._flush()

    def _send_deletes(self):
        batches, self._pending_deletes = self._pending_deletes, {}
        for owner, items in batches.items():
            forks = [f for _, f in items]
            self._send(owner, "RREF_USER_DELETE", items, lambda fs=forks: self._on_deletes_acked(fs))

    def _on_deletes_acked(self, forks):
        with self._lock:
            for f in forks:
                self.users.pop(f, None)

    # -- control messages ------------------------------------------------------------
    def on_control(self, src, mtype, payload):
        """Handle one control message (any copy, any order): idempotent."""
        with self._lock:
            if mtype == "RREF_FORK_REQUEST":
                rref_id, fork_id = payload
                if (rref_id, fork_id) not in self.tombstones and rref_id not in self.deleted_owner_ids:
                    self.forks.setdefault(rref_id, set()).add(fork_id)
            elif mtype == "RREF_USER_DELETE":
                for rref_id, fork_id in payload:
                    if (rref_id, fork_id) in self.tombstones:
                        continue
                    self.tombstones.add((rref_id, fork_id))
                    fs = self.forks.get(rref_id)
                    if fs is not None:
                        fs.discard(fork_id)
                        if not fs and rref_id not in self.owners:
                            del self.forks[rref_id]
                    self._maybe_delete_owner(rref_id)
            elif mtype == "RREF_CHILD_ACCEPT":
                self._child_accepted(payload)
            elif mtype == "REMOTE_RET":
                rec = self.users.get(payload[1])
                if rec is not None and not rec.confirmed:
                    rec.confirmed = True
                    rec.confirmation.set_result(True)
                    self._maybe_delete_user(rec)
            else:
                raise ValueError(f"unknown RRef control message {mtype!r}")
        self._flush()

    # -- introspection and shutdown --------------------------------------------------
    def info(self) -> dict:
        """torch's _rref_context_get_debug_info: counts of owner and user RRefs, forks, pending users and forks, and
        unacknowledged control messages."""
        with self._lock:
            return {
                "num_owner_rrefs": len(self.owners),
                "num_forks": sum(len(s) for s in self.forks.values()),
                "num_user_rrefs": len(self.users),
                "num_pending_users": sum(1 for r in self.users.values() if not r.confirmed),
                "num_pending_forks": len(self.child_parent),
                "num_pending_control": self.channel.pending(),
            }

    def delete_all_users(self) -> list:
        """Shutdown: let every UserRRef go; return those whose Python handle was still alive."""
        leaked = []
        with self._lock:
            for rec in list(self.users.values()):
                if rec.alive:
                    leaked.append(self._describe_user(rec, "UserRRef still referenced at shutdown"))
                    rec.alive = False
                self._maybe_delete_user(rec)
        self._flush()
        return leaked

    def settled(self) -> bool:
        """No user record, no pending fork and no unacknowledged control message left."""
        with self._lock:
            return not self.users and not self.child_parent and self.channel.pending() == 0

    def _describe_user(self, rec, why):
        return {"why": why, "rref_id": rec.rref_id, "fork_id": rec.fork_id, "owner": rec.owner,
                "confirmed": rec.confirmed, "pending_children": len(rec.children), "site": rec.site}

    def leaks(self) -> list:
        """Everything that would leak now: user records, owner values, given-up messages."""
        with self._lock:
            out = [self._describe_user(r, "UserRRef never deleted") for r in self.users.values()]
            for rid, rec in self.owners.items():
                forks = sorted(self.forks.get(rid, ()))
                why = ("OwnerRRef holding its value for forks never deleted" if forks else
                       "OwnerRRef still referenced locally" if rec.local_refs else
                       "OwnerRRef whose remote() never arrived or finished")
                out.append({"why": why, "rref_id": rid, "owner": self.me, "forks": forks,
                            "local_refs": rec.local_refs, "site": rec.site})
            for dst, mtype, payload in self.channel.failures:
                out.append({"why": f"{mtype} to worker {dst} never acknowledged", "payload": payload,
                            "owner": dst, "site": "<control channel>"})
        return out

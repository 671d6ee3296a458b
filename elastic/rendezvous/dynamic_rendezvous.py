"""The dynamic rendezvous on tritensor's authenticated ``TCPStore`` (backend ``c10d``).

It exists so that nodes can form a job, and re-form it between restarts as nodes join or
leave, with nothing but the store every tritensor job already has. The state lives under
``rdzv/<run_id>/`` in the store:

- ``round``: the newest round opened; a node that ran in round ``k`` joins ``k+1`` next;
- ``r<k>/joined`` (a counter) and ``r<k>/node/<i>``: who joined round ``k``, in order;
- ``r<k>/final``: the round's members, written once (compare-and-set) by whichever node
  first sees the round complete: ``max_nodes`` alive members, or ``min_nodes`` and the
  ``last_call_timeout`` passed since that many were there (one more window, at least 5 s,
  while members of the previous round are alive but not back yet: they are restarting too);
- ``hb/<node>``: each node's keep-alive (wall-clock time, rewritten every
  ``keep_alive_interval`` s by a thread); a node silent for ``keep_alive_max_attempt``
  intervals is dead and is left out of the round it was waiting in;
- ``closed``: the job is over.

A node arriving while round ``k`` runs joins ``k+1`` and is counted by
``num_nodes_waiting()`` of ``k``'s members; their agents then restart through ``k+1``.
Every wait is bounded: ``join_timeout`` for a round to complete (the error names how many
nodes were waited for, who was there and who stopped heartbeating), ``read_timeout`` to
reach the store (the error names the endpoint, or the secret when the store refused it).
Nodes must share ``TRITENSOR_COMM_SECRET``; keep-alive times assume the nodes' clocks agree
to well within ``keep_alive_interval * keep_alive_max_attempt``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import List, Optional, Tuple

from ...comm import TCPStore
from .api import (RendezvousClosedError, RendezvousConnectionError, RendezvousHandler, RendezvousInfo,
                  RendezvousParameters, RendezvousTimeoutError)
from .utils import PrefixStore, connect_store, parse_rendezvous_endpoint

__all__ = ["DynamicRendezvousHandler", "create_handler", "DEFAULT_PORT"]

log = logging.getLogger(__name__)
DEFAULT_PORT = 29400
_POLL = 0.05


class DynamicRendezvousHandler(RendezvousHandler):
    """Round-based elastic rendezvous of ``min_nodes``..``max_nodes`` nodes over a store.

    ``store`` is a ``TCPStore`` client (or master) shared by every node of the job;
    ``heartbeat_store`` a second connection to it used only by the keep-alive thread (so a
    long wait on ``store`` never delays a heartbeat). ``hosts_store``: this node runs the store's
    server, so ``shutdown`` waits up to ``close_timeout`` s for the other live members to leave
    before stopping it.
    """

    def __init__(self, run_id: str, store, backend: str, min_nodes: int, max_nodes: int, *,
                 heartbeat_store=None, join_timeout: float = 600.0, last_call_timeout: float = 30.0,
                 keep_alive_interval: float = 5.0, keep_alive_max_attempt: int = 3, endpoint: str = "",
                 owned_stores: Tuple = (), hosts_store: bool = False, close_timeout: float = 30.0):
        self._run_id = run_id
        self._store = store
        self._hb_store = heartbeat_store if heartbeat_store is not None else store
        self._backend = backend
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.join_timeout = join_timeout
        self.last_call_timeout = last_call_timeout
        self.keep_alive_interval = keep_alive_interval
        self.keep_alive_max_attempt = keep_alive_max_attempt
        self.endpoint = endpoint
        self._owned = owned_stores
        self.hosts_store = hosts_store
        self.close_timeout = close_timeout
        self._p = f"rdzv/{run_id}"
        self.node_id = f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self._round: Optional[int] = None
        self._members: List[str] = []
        self._hb_stop = threading.Event()
        self._hb_thread: Optional[threading.Thread] = None
        self._shut = False

    # -- the interface ---------------------------------------------------------------
    def get_backend(self) -> str:
        """The backend name this handler was made for."""
        return self._backend

    def get_run_id(self) -> str:
        """The run id all nodes of this job share."""
        return self._run_id

    @property
    def use_agent_store(self) -> bool:
        """True: workers reuse the rendezvous store (its host and port are passed to them), as torch's c10d handler."""
        return True

    def is_closed(self) -> bool:
        """Whether some node closed the rendezvous (a key in the shared store), so no new round starts."""
        return self._store.check([f"{self._p}/closed"])

    def set_closed(self) -> None:
        """Close the rendezvous for every node (the job is finishing)."""
        self._store.set(f"{self._p}/closed", "1")

    def next_rendezvous(self) -> RendezvousInfo:
        """Join the next round and block until it completes (or ``join_timeout`` passes)."""
        if self._shut:
            raise RendezvousClosedError(f"rendezvous '{self._run_id}': this handler was shut down")
        deadline = time.monotonic() + self.join_timeout
        self._beat()
        self._start_heartbeat()
        k = self._store.add(f"{self._p}/round", 0)
        if self._round is not None:
            k = max(k, self._round + 1)
        while True:
            if self.is_closed():
                raise RendezvousClosedError(f"rendezvous '{self._run_id}' at {self.endpoint} is closed: "
                                            f"the job has finished")
            if self._store.check([f"{self._p}/r{k}/final"]):
                k += 1  # that round completed without us: wait in the next one
                continue
            idx = self._store.add(f"{self._p}/r{k}/joined", 1) - 1
            if idx >= self.max_nodes:
                k += 1  # the round is full
                continue
            self._store.set(f"{self._p}/r{k}/node/{idx}", self.node_id)
            cur = self._store.add(f"{self._p}/round", 0)
            while cur < k:
                cur = int(self._store.compare_set(f"{self._p}/round", str(cur), str(k)))
            members = self._wait_complete(k, deadline)
            if members is not None:
                break
            k += 1  # the round completed with others (we were too late): the next one
        self._round, self._members = k, members
        rank = members.index(self.node_id)
        log.info("rendezvous '%s' round %d complete: %d nodes, this node (%s) is rank %d",
                 self._run_id, k, len(members), self.node_id, rank)
        return RendezvousInfo(PrefixStore(f"{self._p}/r{k}/job", self._store), rank, len(members))

    def num_nodes_waiting(self) -> int:
        """Nodes alive in the next round: this round's members that restarted (always), and
        newcomers while this round has room for them (below ``max_nodes``)."""
        if self._round is None:
            return 0
        live, _ = self._nodes(self._round + 1)
        if len(self._members) >= self.max_nodes:
            live = [n for n in live if n in self._members]
        return len(live)

    def shutdown(self) -> bool:
        """Stop the keep-alive, leave, close the rendezvous (the job is over) and the store connections."""
        if self._shut:
            return True
        self._shut = True
        self._hb_stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join(timeout=5)
        ok = True
        try:
            # Close first, drop the heartbeat last: the store's host waits only until every other
            # node's heartbeat is gone, then shuts the store down, so the heartbeat must be this
            # node's final store operation (the other order raced: CI saw set_closed hit a closed store).
            self.set_closed()
            # Leaving sets the heartbeat to the epoch (stale to everyone) instead of deleting it: a
            # reader's check-then-get (``_get``) would otherwise wait the store's whole timeout for a
            # key deleted between the two (CI: the host's shutdown hung 60 s on a departed node).
            self._store.set(f"{self._p}/hb/{self.node_id}", "0")
            if self.hosts_store:  # the others still need the store to leave: wait for them, bounded
                deadline = time.monotonic() + self.close_timeout
                while time.monotonic() < deadline and any(self._alive(n) for n in self._members
                                                          if n != self.node_id):
                    time.sleep(_POLL)
        except Exception as e:  # the store's host may be gone already
            log.warning("rendezvous '%s': shutdown could not reach the store: %s", self._run_id, e)
            ok = False
        for s in self._owned:
            try:
                s.close()
            except Exception:
                pass
        return ok

    # -- internals -------------------------------------------------------------------
    def _beat(self) -> None:
        self._hb_store.set(f"{self._p}/hb/{self.node_id}", repr(time.time()))

    def _start_heartbeat(self) -> None:
        if self._hb_thread is not None:
            return

        def loop():
            while not self._hb_stop.wait(self.keep_alive_interval):
                try:
                    self._beat()
                except Exception as e:
                    log.warning("rendezvous '%s': keep-alive failed: %s", self._run_id, e)

        self._hb_thread = threading.Thread(target=loop, name=f"rdzv-keepalive-{self._run_id}", daemon=True)
        self._hb_thread.start()

    def _get(self, key: str) -> Optional[bytes]:
        """The key's value, or None while it is unset. Keys read this way are never deleted once set."""
        return self._store.get(key) if self._store.check([key]) else None

    def _alive(self, node: str) -> bool:
        hb = self._get(f"{self._p}/hb/{node}")
        return hb is not None and time.time() - float(hb) <= self.keep_alive_interval * self.keep_alive_max_attempt

    def _nodes(self, k: int) -> Tuple[List[str], List[str]]:
        """(alive, dead) node ids of round ``k`` in join order."""
        joined = min(self._store.add(f"{self._p}/r{k}/joined", 0), self.max_nodes)
        alive: List[str] = []
        dead: List[str] = []
        stale = self.keep_alive_interval * self.keep_alive_max_attempt
        now = time.time()
        for i in range(joined):
            node = self._get(f"{self._p}/r{k}/node/{i}")
            if node is None:
                continue  # joined a moment ago: its name follows
            node = node.decode()
            hb = self._get(f"{self._p}/hb/{node}")
            (alive if hb is not None and now - float(hb) <= stale else dead).append(node)
        return alive, dead

    def _wait_complete(self, k: int, deadline: float) -> Optional[List[str]]:
        """The members of round ``k`` once it completes; ``None`` if it completed without us."""
        min_since = None
        while True:
            final = self._get(f"{self._p}/r{k}/final")
            if final is not None:
                members = final.decode().split(",")
                return members if self.node_id in members else None
            if self.is_closed():
                raise RendezvousClosedError(f"rendezvous '{self._run_id}' at {self.endpoint} was closed while "
                                            f"round {k} was forming")
            alive, dead = self._nodes(k)
            now = time.monotonic()
            if len(alive) >= self.min_nodes:
                min_since = now if min_since is None else min_since
                # members of our last round that are alive but not here yet are most likely
                # restarting too: give them one more window rather than leave them for the next round
                late = [n for n in self._members if n not in alive and n not in dead and self._alive(n)]
                window = self.last_call_timeout + (max(5.0, self.last_call_timeout) if late else 0.0)
                if len(alive) >= self.max_nodes or now - min_since >= window:
                    self._store.compare_set(f"{self._p}/r{k}/final", "", ",".join(alive[:self.max_nodes]))
                    continue
            else:
                min_since = None
            if now >= deadline:
                gone = f"; {len(dead)} joined but stopped heartbeating (dead): {dead}" if dead else ""
                raise RendezvousTimeoutError(
                    f"rendezvous '{self._run_id}' at {self.endpoint} (round {k}) did not complete within "
                    f"join_timeout={self.join_timeout:g}s: waited for min_nodes={self.min_nodes} nodes "
                    f"(max_nodes={self.max_nodes}); {len(alive)} alive: {alive}{gone}")
            time.sleep(_POLL)


def create_handler(params: RendezvousParameters) -> DynamicRendezvousHandler:
    """A ``DynamicRendezvousHandler`` from ``RendezvousParameters`` (backend ``c10d``).

    Options (``--rdzv-conf``): ``join_timeout`` (600 s; ``timeout`` is accepted too),
    ``last_call_timeout`` (30 s), ``read_timeout`` (60 s, to reach the store),
    ``keep_alive_interval`` (5 s), ``keep_alive_max_attempt`` (3), ``close_timeout`` (30 s: how
    long the node hosting the store waits at shutdown for the others to leave), ``is_host`` (default: host
    the store when the endpoint is this machine and its port is free), ``store`` (an existing
    ``TCPStore`` whose server to use, as ``--standalone`` does; the handler opens its own
    connections to it).
    """
    join_timeout = params.get_as_float("join_timeout", params.get_as_float("timeout", 600.0))
    last_call = params.get_as_float("last_call_timeout", 30.0)
    read_timeout = params.get_as_float("read_timeout", 60.0)
    interval = params.get_as_float("keep_alive_interval", 5.0)
    attempts = params.get_as_int("keep_alive_max_attempt", 3)
    if attempts < 1:
        raise ValueError("The rendezvous configuration option 'keep_alive_max_attempt' must be at least 1")
    host, port = parse_rendezvous_endpoint(params.endpoint, DEFAULT_PORT)
    what = f"rendezvous '{params.run_id}' (backend '{params.backend}')"
    given = params.get("store")
    hosted = False
    if given is None:
        store, hosted = connect_store(host, port, params.get_as_bool("is_host"), read_timeout, what)
    else:  # our own connections to it: a caller's blocking wait never holds up ours
        host, port = given.host, given.port
        store, _ = connect_store(host, port, False, read_timeout, what)
    owned: Tuple = (store,)
    try:
        hb = TCPStore(host, port, is_master=False, timeout=store.timeout)
    except Exception as e:
        store.close()
        raise RendezvousConnectionError(
            f"{what}: cannot open the keep-alive connection to {host}:{port}: {e}") from None
    return DynamicRendezvousHandler(params.run_id, store, params.backend, params.min_nodes, params.max_nodes,
                                    heartbeat_store=hb, join_timeout=join_timeout, last_call_timeout=last_call,
                                    keep_alive_interval=interval, keep_alive_max_attempt=attempts,
                                    endpoint=f"{host}:{port}", owned_stores=(hb,) + owned, hosts_store=hosted,
                                    close_timeout=params.get_as_float("close_timeout", 30.0))

"""A seeded fault injector for RRef control messages (PyTorch's ``FaultyTensorPipeAgent`` idea).

Why: the RRef protocol (``shared/seeds/rref_protocol.txt``) promises to survive transient
network failures, out-of-order delivery and duplicates. Those only happen on a real network
by chance, so tests (ours and users') make them happen on purpose, reproducibly by seed.

The injector sits in :class:`~.channel.ControlChannel`'s transmit path, the one place every
control message and every acknowledgement passes through, both in the real agent and in the
in-process model check. For each transmission it returns a *plan*: the list of delays (in
seconds) after which copies are handed to the network:

* ``[]``: the copy is **dropped** (the sender's retry will send it again);
* ``[d]``: one copy, **delayed** by ``d`` (0 for no delay);
* ``[d1, d2]``: **duplicated**;
* a **reordered** message gets an extra ``reorder_delay``, so later messages overtake it.

Only control message types named in ``rules`` are touched; user function calls
(``rpc_sync``/``rpc_async``/``remote``) are never dropped or duplicated (they are not
idempotent and never retried). Drops of one message are bounded by ``max_drops`` so that
every retried message eventually gets through: "dropped-then-retried".

Usage::

    from tritensor.comm.rpc import FaultInjector, FaultRule, TensorPipeRpcBackendOptions
    inj = FaultInjector(seed=7, rules={"RREF_FORK_REQUEST": FaultRule(drop=0.5),
                                       "RREF_USER_DELETE": FaultRule(duplicate=0.5, delay=(0, 0.02))})
    rpc.init_rpc("w0", rank=0, world_size=2,
                 rpc_backend_options=TensorPipeRpcBackendOptions(fault_injector=inj))

``inj.stats`` counts what was done per type ("drop", "dup", "delay", "reorder").
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass

__all__ = ["FaultRule", "FaultInjector", "CONTROL_TYPES"]

#: The control message types of the RRef protocol, plus the acknowledgement every one gets.
CONTROL_TYPES = ("RREF_FORK_REQUEST", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE", "REMOTE_RET", "RREF_ACK")


@dataclass(frozen=True)
class FaultRule:
    """Probabilities (0..1) and delays (seconds) applied to one control message type."""

    drop: float = 0.0
    duplicate: float = 0.0
    delay: tuple = (0.0, 0.0)  # uniform range of the extra delay of each copy
    reorder: float = 0.0
    reorder_delay: float = 0.05

    def __post_init__(self):
        for name in ("drop", "duplicate", "reorder"):
            p = getattr(self, name)
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
                raise ValueError(f"{name}: expected a probability in [0, 1], got {p!r}")
        lo, hi = self.delay
        if not 0.0 <= lo <= hi:
            raise ValueError(f"delay: expected (low, high) with 0 <= low <= high, got {self.delay!r}")


class FaultInjector:
    """Seeded scheduler of faults; thread-safe; the same seed and calls give the same plans."""

    def __init__(self, seed: int = 0, rules: dict | None = None, max_drops: int = 3):
        rules = dict(rules or {})
        for name, rule in rules.items():
            if name not in CONTROL_TYPES:
                raise ValueError(f"rules: {name!r} is not a control message type; expected one of {CONTROL_TYPES}")
            if not isinstance(rule, FaultRule):
                raise TypeError(f"rules[{name!r}]: expected a FaultRule, got {type(rule).__name__}")
        if isinstance(max_drops, bool) or not isinstance(max_drops, int) or max_drops < 0:
            raise ValueError(f"max_drops: expected a non-negative int, got {max_drops!r}")
        self.seed = seed
        self.rules = rules
        self.max_drops = max_drops
        self.stats: Counter = Counter()
        self._rng = random.Random(seed)
        self._drops: Counter = Counter()
        self._lock = threading.Lock()

    @classmethod
    def chaos(cls, seed: int, p: float = 0.3, max_delay: float = 0.02, max_drops: int = 3) -> "FaultInjector":
        """Every control type dropped, duplicated and reordered with probability ``p``."""
        rule = FaultRule(drop=p, duplicate=p, delay=(0.0, max_delay), reorder=p, reorder_delay=2 * max_delay)
        return cls(seed, {t: rule for t in CONTROL_TYPES}, max_drops=max_drops)

    def plan(self, mtype: str, key) -> list:
        """Delays of the copies of one transmission of message ``key`` (of type ``mtype``)."""
        rule = self.rules.get(mtype)
        if rule is None:
            return [0.0]
        with self._lock:
            r = self._rng
            if rule.drop and self._drops[key] < self.max_drops and r.random() < rule.drop:
                self._drops[key] += 1
                self.stats[(mtype, "drop")] += 1
                return []
            copies = 2 if rule.duplicate and r.random() < rule.duplicate else 1
            if copies == 2:
                self.stats[(mtype, "dup")] += 1
            out = []
            for _ in range(copies):
                d = r.uniform(*rule.delay) if rule.delay[1] > 0 else 0.0
                if d:
                    self.stats[(mtype, "delay")] += 1
                if rule.reorder and r.random() < rule.reorder:
                    d += rule.reorder_delay
                    self.stats[(mtype, "reorder")] += 1
                out.append(d)
            return out

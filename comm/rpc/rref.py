"""``RRef``: a remote reference, torch.distributed.rpc's names and behaviour.

A Python ``RRef`` object is a *handle*: on the owner it points at the OwnerRRef record of
:class:`~.rref_context.RRefContext`, elsewhere at one UserRRef record (one fork). Handles are
never pickled by plain ``pickle``: the agent's pickler forks them (:meth:`RRefContext.fork`)
when they travel inside an RPC, and the receiver's unpickler builds a new handle from the
fork data (:meth:`RRefContext.unfork`). When a handle dies, ``__del__`` only appends to a
lock-free queue (:meth:`RRefContext.release`); the agent's housekeeping thread turns that
into a batched ``RREF_USER_DELETE`` (G1) once G2 allows it.
"""

from __future__ import annotations

from . import current

__all__ = ["RRef"]

_UNSET = object()


class RRef:
    """``RRef(value)`` creates an OwnerRRef of ``value`` on this worker."""

    __slots__ = ("_agent", "_rref_id", "_owner", "_rec", "_token", "__weakref__")

    def __init__(self, value, type_hint=None):
        agent = current.require("RRef(value)")
        self._bind(agent, agent.ctx.create_owner(value), agent.rank, None)

    @classmethod
    def _handle(cls, agent, rref_id, owner, rec):
        self = object.__new__(cls)
        self._bind(agent, rref_id, owner, rec)
        return self

    def _bind(self, agent, rref_id, owner, rec):
        self._agent = agent
        self._rref_id = rref_id
        self._owner = owner
        self._rec = rec  # UserRecord, or None on the owner
        self._token = ("owner", rref_id) if rec is None else ("user", rec.fork_id)

    def __del__(self):
        try:
            self._agent.ctx.release(self._token)
        except AttributeError:  # half-built handle
            pass

    def __reduce__(self):
        raise TypeError("an RRef can only be sent inside an RPC (rpc_sync, rpc_async, remote), not pickled")

    def __repr__(self):
        kind = "OwnerRRef" if self.is_owner() else "UserRRef"
        fork = "" if self._rec is None else f", ForkId={self._rec.fork_id}"
        return f"{kind}(RRefId={self._rref_id}{fork}, owner='{self.owner_name()}')"

    # -- identity --------------------------------------------------------------------
    def is_owner(self) -> bool:
        """torch's RRef.is_owner: whether this worker holds the value."""
        return self._rec is None

    def owner(self):
        """The owner's :class:`WorkerInfo`."""
        return self._agent.workers[self._owner]

    def owner_name(self) -> str:
        """torch's RRef.owner_name: the name of the worker that holds the value."""
        return self._agent.workers[self._owner].name

    def confirmed_by_owner(self) -> bool:
        """Whether the owner knows this reference (always True on the owner)."""
        return self._rec is None or self._rec.confirmed

    # -- values ----------------------------------------------------------------------
    def local_value(self):
        """The value, on the owner only (waits for a ``remote()`` still running)."""
        if self._rec is not None:
            raise RuntimeError(f"local_value() can only be called on the owner: this {self!r} is held by "
                               f"'{self._agent.name}'; use to_here() to copy the value here")
        return self._agent.ctx.owner_future(self._rref_id).wait()

    def to_here(self, timeout=_UNSET):
        """The value, copied to this worker (blocking). ``timeout`` in seconds."""
        if self._rec is None:
            return self.local_value()
        t = self._agent.options.rpc_timeout if timeout is _UNSET else timeout
        return self._agent.fetch(self._owner, self._rref_id, t).wait()

    def _get_future(self):
        """A Future completed when the owner has the value (torch's ``_get_future``)."""
        if self._rec is None:
            return self._agent.ctx.owner_future(self._rref_id)
        return self._agent.fetch(self._owner, self._rref_id, self._agent.options.rpc_timeout)

    # -- proxies ---------------------------------------------------------------------
    def rpc_sync(self, timeout=_UNSET):
        """torch's RRef.rpc_sync: a proxy whose method calls run on the owner, on the value, and return their
        results."""
        return _Proxy(self, "rpc_sync", timeout)

    def rpc_async(self, timeout=_UNSET):
        """torch's RRef.rpc_async: a proxy whose method calls run on the owner and return Futures."""
        return _Proxy(self, "rpc_async", timeout)

    def remote(self, timeout=_UNSET):
        """torch's RRef.remote: a proxy whose method calls run on the owner and return RRefs to the results."""
        return _Proxy(self, "remote", timeout)


def _call_method(method, rref, *args, **kwargs):
    return getattr(rref.local_value(), method)(*args, **kwargs)


class _Proxy:
    """``rref.rpc_sync().method(*args)`` runs ``method`` on the owner's value."""

    def __init__(self, rref, how, timeout):
        self._rref, self._how, self._timeout = rref, how, timeout

    def __getattr__(self, method):
        def call(*args, **kwargs):
            agent = self._rref._agent
            to = agent.worker(self._rref.owner()).id
            args = (method, self._rref, *args)
            if self._how == "remote":
                return agent.remote(to, _call_method, args, kwargs)
            timeout = agent.options.rpc_timeout if self._timeout is _UNSET else self._timeout
            fut = agent.call(to, ("call", _call_method, args, kwargs), timeout)
            return fut.wait() if self._how == "rpc_sync" else fut

        return call

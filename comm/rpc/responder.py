"""How an RPC agent runs a request it received and answers it.

Why a module of its own: :class:`~.agent.Agent` holds the sockets and threads of a worker
(listener, readers, sending, housekeeping); what happens to one request once a reader has
decoded it is a concern of its own, and it kept the agent's module past 500 lines. A request
runs on the agent's worker-thread pool: for a ``remote()``, once the owner has confirmed every
RRef it carries, the function's value (or error) is set on the owner's RRef; for a call, the
result (or the error, pickled with its type, message and traceback) is sent back as a RESPONSE
frame. A function marked ``async_execution`` answers when the Future it returned completes,
leaving the worker thread free meanwhile. User functions run exactly once and are never retried.

:class:`Responder` is the part of :class:`~.agent.Agent` that does this (the agent derives from
it); it uses the agent's ``options``, ``ctx`` (the RRef context), ``send`` and ``name``.
"""

from __future__ import annotations

import logging
import pickle
import traceback

from .. import Future
from . import wire

__all__ = ["Responder"]

log = logging.getLogger("tritensor.comm.rpc.agent")  # the agent's log: these are the agent's methods


class Responder:
    """Running received requests and sending their answers: a base of :class:`~.agent.Agent`."""

    def _error(self, e):
        try:
            pickle.dumps(e)
            obj = e
        except Exception:
            obj = None
        return ("err", obj, type(e).__qualname__, str(e), "".join(traceback.format_exception(e)))

    def _run(self, src, msg_id, msg, recs):
        with self._pending_lock:
            self.active += 1
        try:
            self._run_inner(src, msg_id, msg, recs)
        finally:
            with self._pending_lock:
                self.active -= 1

    def _run_inner(self, src, msg_id, msg, recs):
        try:
            t = self.options.rpc_timeout
            for rec in recs:  # the seed: the function runs once the owner confirmed each child RRef
                rec.confirmation.wait(t if t > 0 else None)
            fn, args, kwargs = msg[1], msg[2], msg[3]
            out = fn(*args, **kwargs)
            if getattr(fn, "_tritensor_async_execution", False):
                if not isinstance(out, Future):
                    raise TypeError(f"{getattr(fn, '__name__', fn)} is marked async_execution but returned "
                                    f"{type(out).__name__}, not a Future")
                out.add_done_callback(lambda f: self._finish(src, msg_id, msg, f))
                return
            if msg[0] != "remote":  # the common case answers at once, without a Future
                self._respond(src, msg_id, ("ok", out))
                return
            fut = Future()
            fut.set_result(out)
        except Exception as e:
            fut = Future()
            fut.set_exception(e)
        self._finish(src, msg_id, msg, fut)

    def _finish(self, src, msg_id, msg, fut):
        if msg[0] == "remote":
            try:
                self.ctx.set_value(msg[4], fut.value())
            except Exception as e:
                self.ctx.set_value(msg[4], exc=e)
            return
        self._respond_future(src, msg_id, fut)

    def _respond_future(self, src, msg_id, fut, nowait=False):
        try:
            payload = ("ok", fut.value())
        except Exception as e:
            payload = self._error(e)
        self._respond(src, msg_id, payload, nowait)

    def _respond(self, dst, msg_id, payload, nowait=False):
        try:
            self.send(dst, wire.RESPONSE, msg_id, payload, nowait=nowait)
        except Exception as e:
            if payload[0] == "ok":  # e.g. an unpicklable result: tell the caller why
                try:
                    self.send(dst, wire.RESPONSE, msg_id, self._error(e), nowait=nowait)
                    return
                except Exception:
                    pass
            log.warning("%s: could not answer worker %s: %s", self.name, dst, e)

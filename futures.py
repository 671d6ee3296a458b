"""``tritensor.futures``: ``Future``, the result of an asynchronous operation, with torch.futures
semantics (also ``tritensor.comm.Future``: one class).

Why our own: work handles of asynchronous collectives, DDP communication hooks and RPC all
hand results around as futures whose callbacks chain (``fut.then(cb)``) exactly as
``torch.futures.Future`` does. Semantics kept from torch:

* ``then(cb)`` returns a new future completed with ``cb(self)``'s return value, or with the
  exception ``cb`` raised. ``cb`` runs even when ``self`` failed; ``self.wait()`` or
  ``self.value()`` inside it re-raise, so an error flows down every chain.
* Callbacks run exactly once: inline when the future is already done, otherwise in the
  thread that completes it, in the order they were added.
* ``add_done_callback(cb)`` is fire-and-forget; an exception from ``cb`` is logged.
* ``set_result``/``set_exception`` complete a future once; a second call raises.
* ``collect_all`` completes when every input completes (with the first error, if any);
  ``wait_all`` returns their values or raises the first error.

Extension over torch: ``wait(timeout=None)`` takes an optional timeout in seconds and raises
``TimeoutError`` naming the future when it passes.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["Future", "collect_all", "wait_all"]

log = logging.getLogger(__name__)
_PENDING = object()


class Future:
    """The result of an asynchronous operation, as torch.futures.Future (see the module docstring for the semantics
    kept, and the ``wait(timeout=)`` extension)."""

    __slots__ = ("_cond", "_result", "_exc", "_callbacks", "_name", "__weakref__")

    def __init__(self, *, name: str | None = None):
        self._cond = threading.Condition(threading.Lock())
        self._result = _PENDING
        self._exc: BaseException | None = None
        self._callbacks: list = []
        self._name = name

    def __repr__(self):
        state = "pending" if not self.done() else ("failed" if self._exc is not None else "done")
        return f"Future({self._name or ''}{', ' if self._name else ''}{state})"

    # -- completion ------------------------------------------------------------------
    def done(self) -> bool:
        """Whether the future has a result or an exception (a failed future is done)."""
        return self._result is not _PENDING or self._exc is not None

    def set_result(self, result) -> None:
        """Complete the future with ``result`` and run its callbacks; a second completion is a RuntimeError."""
        self._complete(result, None)

    def set_exception(self, result: BaseException) -> None:
        """Complete the future with the exception ``result`` (wait() and value() raise it) and run its callbacks; a
        non-exception is a TypeError."""
        if not isinstance(result, BaseException):
            raise TypeError(f"set_exception: expected an exception, got {type(result).__name__}")
        self._complete(_PENDING, result)

    def _complete(self, result, exc) -> None:
        with self._cond:
            if self.done():
                raise RuntimeError(f"{self!r} can only be marked completed once")
            if exc is not None:
                self._exc = exc
            else:
                self._result = result
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for cb in callbacks:
            cb(self)

    # -- reading ---------------------------------------------------------------------
    def wait(self, timeout: float | None = None):
        """Block until done; return the value or raise the stored exception."""
        with self._cond:
            if not self._cond.wait_for(self.done, timeout):
                raise TimeoutError(f"timed out after {timeout:g}s waiting for {self!r}")
        return self.value()

    def value(self):
        """The value of a completed future (raises its exception if it failed)."""
        if self._exc is not None:
            raise self._exc
        if self._result is _PENDING:
            raise RuntimeError(f"{self!r} has no value yet: call wait() first")
        return self._result

    # -- callbacks -------------------------------------------------------------------
    def _add(self, fn) -> None:
        with self._cond:
            if not self.done():
                self._callbacks.append(fn)
                return
        fn(self)

    def then(self, callback) -> "Future":
        """A new future holding ``callback(self)``'s result (or the exception it raised)."""
        if not callable(callback):
            raise TypeError(f"callback: expected a callable, got {type(callback).__name__}")
        child = Future(name=f"then({getattr(callback, '__name__', 'callback')})")

        def run(fut):
            try:
                out = callback(fut)
            except BaseException as e:  # noqa: BLE001 - handed to the dependant
                child.set_exception(e)
            else:
                child.set_result(out)

        self._add(run)
        return child

    def add_done_callback(self, callback) -> None:
        """Run ``callback(self)`` once when done; its return value and errors are dropped."""
        if not callable(callback):
            raise TypeError(f"callback: expected a callable, got {type(callback).__name__}")

        def run(fut):
            try:
                callback(fut)
            except Exception:  # noqa: BLE001 - torch logs and ignores these too
                log.exception("exception in a Future done-callback")

        self._add(run)


def collect_all(futures) -> Future:
    """A future of the list ``futures``, completed when all are done (or the first fails)."""
    futures = list(futures)
    for i, f in enumerate(futures):
        if not isinstance(f, Future):
            raise TypeError(f"futures[{i}]: expected a tritensor.comm.Future, got {type(f).__name__}")
    out = Future(name=f"collect_all({len(futures)})")
    if not futures:
        out.set_result([])
        return out
    lock = threading.Lock()
    remaining = [len(futures)]

    def one_done(f):
        with lock:
            if out.done():
                return
            if f._exc is not None:
                out.set_exception(f._exc)
                return
            remaining[0] -= 1
            if remaining[0] == 0:
                out.set_result(futures)

    for f in futures:
        f._add(one_done)
    return out


def wait_all(futures, timeout: float | None = None) -> list:
    """Wait for every future; return their values, or raise the first error."""
    return [f.wait() for f in collect_all(futures).wait(timeout)]

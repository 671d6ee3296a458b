"""``TailLog``: prints workers' log files to the console as they grow, each line tagged with its rank.

It exists because ``tee`` is implemented as TorchElastic implements it: the worker's stream is
redirected into its log file and a thread here follows that file (``tail -f``) and copies each
line to the console as ``[{name}{local_rank}]:line`` (or a prefix of ``log_line_prefixes``).
One thread per followed file. With a ``log_line_filter``, only the lines it accepts are copied
(``--duplicate-stdout-filters`` follows the same files into a second destination this way).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Dict, List, Optional, TextIO

__all__ = ["TailLog"]


def _tail(header: str, path: str, dst: TextIO, finished: threading.Event, interval: float,
          keep: Callable[[str], bool]) -> None:
    while not os.path.exists(path):
        if finished.is_set():
            return
        time.sleep(interval)
    partial = ""
    with open(path, errors="replace") as fp:
        while True:
            chunk = fp.readline()
            if chunk:
                partial += chunk
                if partial.endswith("\n"):
                    if keep(partial):
                        dst.write(f"{header}{partial}")
                        dst.flush()
                    partial = ""
            elif finished.is_set():  # EOF after the writer is done: nothing more will come
                if partial and keep(partial):
                    dst.write(f"{header}{partial}\n")
                    dst.flush()
                return
            else:
                time.sleep(interval)


class TailLog:
    """Follows ``log_files`` (local rank -> path) into ``dst`` until :meth:`stop`.

    ``stop`` lets every thread read its file to the end first, so no line is lost.
    """

    def __init__(self, name: str, log_files: Dict[int, str], dst: TextIO, log_line_prefixes: Optional[Dict[int, str]]
                 = None, interval_sec: float = 0.05, log_line_filter: Callable[[str], bool] = lambda _line: True):
        self._name = name
        self._log_files = {rank: path for rank, path in log_files.items() if path}
        self._dst = dst
        self._prefixes = log_line_prefixes or {}
        self._interval = interval_sec
        self._keep = log_line_filter
        self._finished = threading.Event()
        self._threads: List[threading.Thread] = []
        self._started = False

    def start(self) -> "TailLog":
        """Start one thread per log file copying new lines, each prefixed with its rank's header, to the destination;
        idempotent."""
        if self._started:
            return self
        self._started = True
        for rank, path in sorted(self._log_files.items()):
            header = self._prefixes.get(rank, f"[{self._name}{rank}]:")
            t = threading.Thread(target=_tail, name=f"tail-{self._name}{rank}", daemon=True,
                                 args=(header, path, self._dst, self._finished, self._interval, self._keep))
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: Optional[float] = 10.0) -> None:
        """Signal the tailing threads to finish and join them, waiting up to ``timeout`` s each."""
        self._finished.set()
        for t in self._threads:
            t.join(timeout)

    def stopped(self) -> bool:
        """Whether stop() has been called."""
        return self._finished.is_set()

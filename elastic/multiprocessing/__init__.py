"""Launching and managing ``n`` copies of a worker: a function (multiprocessing) or a binary (subprocess).

It exists as the bottom layer of tritensor's elastic launcher, with the names and behaviour of
``torch.distributed.elastic.multiprocessing``::

    from tritensor.elastic.multiprocessing import Std, start_processes

    def trainer(a, b, c):
        ...

    ctx = start_processes(name="trainer", entrypoint=trainer,
                          args={0: (1, 2, 3), 1: (4, 5, 6)},
                          envs={0: {"LOCAL_RANK": "0"}, 1: {"LOCAL_RANK": "1"}},
                          log_dir="/tmp/foobar",
                          redirects=Std.ALL,   # every worker's stdout/stderr to a log file
                          tee={0: Std.ERR})    # and local rank 0's stderr to the console too
    result = ctx.wait()                        # RunProcsResult

``log_dir`` gets one folder per local rank: ``{local_rank}/stdout.log``, ``stderr.log`` (when
redirected) and ``error.json`` (written by ``@record`` when the worker fails), and, with
``duplicate_stdout_filters``/``duplicate_stderr_filters``, ``filtered_stdout.log`` and
``filtered_stderr.log``. A launcher that restarts workers passes a fresh ``log_dir`` per attempt
(``<log_dir>/attempt_<n>``).
"""

from __future__ import annotations

import multiprocessing as _mp
import os
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

from .api import MultiprocessContext, PContext, RunProcsResult, Std, SubprocessContext, to_map
from .errors import ERROR_FILE_ENV, ChildFailedError, ProcessFailure, record

__all__ = ["start_processes", "Std", "to_map", "PContext", "MultiprocessContext", "SubprocessContext",
           "RunProcsResult", "ProcessFailure", "ChildFailedError", "record"]


def _as_std_map(value: Any, nprocs: int, what: str) -> Dict[int, Std]:
    if isinstance(value, str):
        try:
            value = Std.from_str(value)
        except ValueError as e:
            raise ValueError(f"start_processes: bad {what}: {e}") from None
    if isinstance(value, bool) or not isinstance(value, (int, dict)):
        raise TypeError(f"start_processes: {what} must be a Std or a dict of local rank -> Std, "
                        f"got {type(value).__name__}")
    if isinstance(value, int):
        if value not in (0, 1, 2, 3):
            raise ValueError(f"start_processes: bad {what}: {value} is not a Std (0..3)")
        return to_map(Std(value), nprocs)
    out: Dict[int, Std] = {}
    for rank, std in value.items():
        if not isinstance(rank, int) or not 0 <= rank < nprocs:
            raise ValueError(f"start_processes: {what} names local rank {rank!r}, "
                             f"but the local ranks are 0..{nprocs - 1}")
        if isinstance(std, str):
            std = _as_std_map(std, 1, what)[0]
        if isinstance(std, bool) or not isinstance(std, int) or std not in (0, 1, 2, 3):
            raise ValueError(f"start_processes: bad {what} for local rank {rank}: {std!r} is not a Std")
        out[rank] = Std(std)
    return to_map(out, nprocs)


def _check_logs_options(log_line_prefixes, local_ranks_filter, duplicate_stdout_filters,
                        duplicate_stderr_filters):
    if log_line_prefixes is not None and not (isinstance(log_line_prefixes, dict) and all(
            isinstance(k, int) and isinstance(v, str) for k, v in log_line_prefixes.items())):
        raise TypeError("start_processes: log_line_prefixes must be a dict of local rank -> str")
    if local_ranks_filter is not None and not all(
            isinstance(r, int) and not isinstance(r, bool) for r in local_ranks_filter):
        raise TypeError(f"start_processes: local_ranks_filter must be a set of local ranks (ints), "
                        f"got {local_ranks_filter!r}")
    for what, filters in (("duplicate_stdout_filters", duplicate_stdout_filters),
                          ("duplicate_stderr_filters", duplicate_stderr_filters)):
        if filters is not None and (isinstance(filters, str) or not all(isinstance(f, str) for f in filters)):
            raise TypeError(f"start_processes: {what} must be a list of str, got {filters!r}")


def start_processes(name: str, entrypoint: Union[Callable, str], args: Dict[int, Tuple],
                    envs: Dict[int, Dict[str, str]], log_dir: str, start_method: str = "spawn",
                    redirects: Union[Std, Dict[int, Std]] = Std.NONE,
                    tee: Union[Std, Dict[int, Std]] = Std.NONE, log_line_prefixes: Optional[Dict[int, str]] = None,
                    local_ranks_filter: Optional[Set[int]] = None, duplicate_stdout_filters: Optional[List[str]] = None,
                    duplicate_stderr_filters: Optional[List[str]] = None) -> PContext:
    """Start ``n`` copies of ``entrypoint``, one per local rank in ``args``/``envs`` (same keys ``0..n-1``).

    A callable runs in ``multiprocessing`` processes started with ``start_method`` and is
    wrapped in ``@record``; a str is a binary run with ``subprocess`` (its args are turned to
    strings). ``redirects`` and ``tee`` (a ``Std``, a per-rank dict -- missing ranks ``NONE`` --
    or ``Std.from_str`` text) send streams to ``log_dir/{local_rank}/std{out,err}.log``;
    ``tee`` also prints them, each line prefixed ``[{name}{local_rank}]:`` (or
    ``log_line_prefixes[local_rank]``). With ``local_ranks_filter`` (torch's DefaultLogsSpecs
    option) only those local ranks reach the console: another rank's tee'd stream is written to
    its file only, and its stream that is not redirected goes to ``os.devnull``. The tee'd lines
    containing any of ``duplicate_stdout_filters`` (``duplicate_stderr_filters``) are also
    written to ``log_dir/filtered_stdout.log`` (``filtered_stderr.log``). Every argument is
    checked before any process starts. ``log_dir`` must be absent or an empty directory.
    """
    _check_logs_options(log_line_prefixes, local_ranks_filter, duplicate_stdout_filters, duplicate_stderr_filters)
    if not (callable(entrypoint) or isinstance(entrypoint, str)):
        raise TypeError(f"start_processes: entrypoint must be a callable or a binary (str), "
                        f"got {type(entrypoint).__name__}")
    if isinstance(entrypoint, str) and not entrypoint:
        raise ValueError("start_processes: entrypoint is an empty string")
    if not isinstance(args, dict) or not isinstance(envs, dict):
        raise TypeError("start_processes: args and envs must be dicts keyed by local rank")
    nprocs = len(args)
    if nprocs == 0:
        raise ValueError("start_processes: args is empty: there must be at least one local rank")
    expected = set(range(nprocs))
    if set(args) != expected:
        raise ValueError(f"start_processes: args must be keyed by local ranks 0..{nprocs - 1}, got {sorted(args)}")
    if set(envs) != set(args):
        raise ValueError(f"start_processes: args and envs must have the same local ranks: "
                         f"args has {sorted(args)} ({len(args)}), envs has {sorted(envs)} ({len(envs)})")
    methods = _mp.get_all_start_methods()
    if start_method not in methods:
        raise ValueError(f"start_processes: unknown start_method {start_method!r}; this platform has {methods}")
    redirs = _as_std_map(redirects, nprocs, "redirects")
    ts = _as_std_map(tee, nprocs, "tee")
    if not log_dir:
        raise ValueError("start_processes: log_dir is required")
    if os.path.exists(log_dir):
        if not os.path.isdir(log_dir):
            raise NotADirectoryError(f"start_processes: log_dir {log_dir} is a file")
        if os.listdir(log_dir):
            raise RuntimeError(f"start_processes: log_dir {log_dir} is not empty; use a fresh folder per attempt")
    else:
        os.makedirs(log_dir)

    # tee is a redirect plus a thread following the file (tail -f): tee implies the redirect
    stdouts: Dict[int, str] = {}
    stderrs: Dict[int, str] = {}
    tee_stdouts: Dict[int, str] = {}
    tee_stderrs: Dict[int, str] = {}
    error_files: Dict[int, str] = {}
    run_args: Dict[int, Tuple] = {}
    run_envs: Dict[int, Dict[str, str]] = {}
    for rank in range(nprocs):
        clogdir = os.path.join(log_dir, str(rank))
        os.mkdir(clogdir)
        rd = redirs[rank] | ts[rank]
        stdouts[rank] = os.path.join(clogdir, "stdout.log") if rd & Std.OUT else ""
        stderrs[rank] = os.path.join(clogdir, "stderr.log") if rd & Std.ERR else ""
        shown = local_ranks_filter is None or rank in local_ranks_filter
        if ts[rank] & Std.OUT and shown:
            tee_stdouts[rank] = stdouts[rank]
        if ts[rank] & Std.ERR and shown:
            tee_stderrs[rank] = stderrs[rank]
        if not shown:  # a console stream of a rank filtered out goes nowhere
            stdouts[rank] = stdouts[rank] or os.devnull
            stderrs[rank] = stderrs[rank] or os.devnull
        error_files[rank] = os.path.join(clogdir, "error.json")
        a = args[rank]
        run_args[rank] = a if isinstance(a, tuple) else (a,)
        run_envs[rank] = {str(k): str(v) for k, v in envs[rank].items()}
        run_envs[rank][ERROR_FILE_ENV] = error_files[rank]

    logs = dict(log_line_prefixes=log_line_prefixes, duplicate_stdout_filters=duplicate_stdout_filters,
                duplicate_stderr_filters=duplicate_stderr_filters,
                filtered_stdout=os.path.join(log_dir, "filtered_stdout.log"),
                filtered_stderr=os.path.join(log_dir, "filtered_stderr.log"))
    context: PContext
    if isinstance(entrypoint, str):
        context = SubprocessContext(name=name, entrypoint=entrypoint, args=run_args, envs=run_envs,
                                    stdouts=stdouts, stderrs=stderrs, tee_stdouts=tee_stdouts,
                                    tee_stderrs=tee_stderrs, error_files=error_files, **logs)
    else:
        context = MultiprocessContext(name=name, entrypoint=entrypoint, args=run_args, envs=run_envs,
                                      stdouts=stdouts, stderrs=stderrs, tee_stdouts=tee_stdouts,
                                      tee_stderrs=tee_stderrs, error_files=error_files, start_method=start_method,
                                      **logs)
    try:
        context.start()
    except Exception:
        context.close()
        raise
    return context

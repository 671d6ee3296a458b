"""What runs in a DataLoader worker process (PyTorch's ``torch.utils.data._utils.worker``).

A worker takes ``(epoch, send_idx, indices)`` tasks from its index queue, fetches and collates
the samples, and puts ``(epoch, send_idx, batch)`` on the shared result queue; ``None`` ends it.
An exception travels back as an :class:`ExceptionWrapper` and is re-raised in the main process,
and so does a batch that cannot be sent (:class:`ResultQueue`). For an iterable dataset each worker iterates its own copy, restarted when a task of a new epoch
arrives; an exhausted copy answers :class:`_IterableDatasetStopIteration`.
"""
from __future__ import annotations

import multiprocessing.queues
import random
import sys
import traceback
from dataclasses import dataclass

import numpy as np

from ...core.factories import manual_seed

_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    """What get_worker_info() returns in a worker: its ``id``, ``num_workers``, ``seed`` and its copy of the
    ``dataset``, as torch's."""

    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info():
    """In a worker process: its :class:`WorkerInfo` (``id``, ``num_workers``, ``seed``, its copy of
    ``dataset``); in the main process ``None``."""
    return _worker_info


class ExceptionWrapper:
    """An exception with its traceback as text, to re-raise in another process."""

    def __init__(self, exc_info, where: str):
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        """Raise the wrapped exception's type with torch's message ('Caught X in DataLoader worker process N' and the
        original traceback); a RuntimeError if the type cannot be built from a message."""
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        try:
            exc = self.exc_type(msg)
        except Exception:  # an exception type with a different constructor
            exc = RuntimeError(msg)
        raise exc


class ResultQueue(multiprocessing.queues.Queue):
    """The queue workers put ``(epoch, send_idx, data)`` on.

    A queue pickles what is put on it in a background thread of the putting process; when that
    fails (an unpicklable sample passed through ``collate_fn``), ``multiprocessing`` only prints
    the error there, and the main process would wait forever for the lost batch (torch's does).
    This queue sends the pickling error back in the batch's place, as the worker's exception,
    so the main process raises it with the worker's traceback (the hook is the one
    ``concurrent.futures`` overrides for the same reason)."""

    def _on_queue_feeder_error(self, e, obj):
        if not (isinstance(obj, tuple) and len(obj) == 3):
            return super()._on_queue_feeder_error(e, obj)
        epoch, idx, data = obj
        where = (f"in DataLoader worker process {_worker_info.id if _worker_info else '?'} while sending batch "
                 f"{idx} to the main process")
        err = ExceptionWrapper((type(e), e, e.__traceback__), where)
        if isinstance(data, ExceptionWrapper):  # the worker's own exception did not pickle: its text does
            err.exc_type, err.exc_msg = RuntimeError, f"{data.where}: {data.exc_msg}\nand sending it failed: {err.exc_msg}"
        self.put((epoch, idx, err))


@dataclass(frozen=True)
class _IterableDatasetStopIteration:
    worker_id: int


class Fetcher:
    """Fetch one batch (or one sample, without auto-collation) for a list of indices."""

    def __init__(self, dataset, is_iterable: bool, auto_collation: bool, collate_fn, drop_last: bool):
        self.dataset, self.is_iterable = dataset, is_iterable
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.dataset_iter = None
        self.ended = False

    def restart(self):
        """Start a new pass over an iterable dataset (a fresh iterator) for a new epoch."""
        self.dataset_iter = iter(self.dataset) if self.is_iterable else None
        self.ended = False

    def fetch(self, index):
        """One batch for ``index`` (collated samples of a map-style dataset, or the next items of an iterable one);
        StopIteration once an iterable dataset is exhausted."""
        if self.is_iterable:
            if self.ended:
                raise StopIteration
            if not self.auto_collation:
                try:
                    return self.collate_fn(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    raise
            data = []
            for _ in index:
                try:
                    data.append(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    break
            if not data or (self.drop_last and len(data) < len(index)):
                raise StopIteration
            return self.collate_fn(data)
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


def worker_loop(fetcher: Fetcher, index_queue, result_queue, base_seed: int, init_fn, worker_id: int,
                num_workers: int) -> None:
    """The body of a worker process: seed Python, NumPy and tritensor from ``base_seed + worker_id`` as torch does,
    run ``init_fn``, then fetch each task's batch and put it (or its exception) on ``result_queue`` until a None
    task."""
    global _worker_info
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed & 0xFFFFFFFFFFFFFFFF]).generate_state(4))
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=fetcher.dataset)
    init_error = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
    except Exception:
        init_error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
    epoch = None
    while True:
        try:
            task = index_queue.get()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if task is None:
            return
        task_epoch, idx, index = task
        if init_error is not None:
            result_queue.put((task_epoch, idx, init_error))
            continue
        if task_epoch != epoch:
            epoch = task_epoch
            fetcher.restart()
        try:
            data = fetcher.fetch(index)
        except StopIteration:
            data = _IterableDatasetStopIteration(worker_id) if fetcher.is_iterable else \
                ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
        except Exception:
            data = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
        result_queue.put((task_epoch, idx, data))
        del data

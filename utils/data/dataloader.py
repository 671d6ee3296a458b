"""``DataLoader`` (PyTorch's ``torch.utils.data.DataLoader``): batches from a dataset, in the main
process or in worker processes, with torch's arguments, checks and messages.

With ``num_workers > 0`` the loader starts that many processes (the default multiprocessing
context, or ``multiprocessing_context``); batches are dealt to them round-robin, at most
``prefetch_factor`` per worker in flight, and handed back **in sampler order**, so a loader with
workers yields exactly the batches a loader without them does. Tensors cross the process boundary
by value (pickled bytes); a worker that dies is reported instead of waited on forever, and a
batch a worker cannot send (it does not pickle) is raised as that worker's exception.
"""
from __future__ import annotations

import collections.abc
import itertools
import math
import multiprocessing
import queue
import warnings

from ...core.tensor import Tensor
from ...runtime import cuda
from . import _random
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from .worker import ExceptionWrapper, Fetcher, ResultQueue, _IterableDatasetStopIteration, worker_loop

_WATCHDOG_S = 5.0  # how often a waiting main process checks that its workers are alive


class _DatasetKind:
    """torch's two kinds of dataset (``Map``: indexed, ``Iterable``: iterated), and the fetcher of each."""

    Map = 0
    Iterable = 1

    @staticmethod
    def create_fetcher(kind, dataset, auto_collation, collate_fn, drop_last) -> Fetcher:
        """A fetcher of batches from ``dataset`` (an iterable one's iterator started), as the loader's own."""
        if kind not in (_DatasetKind.Map, _DatasetKind.Iterable):
            raise ValueError(f"kind: expected _DatasetKind.Map (0) or _DatasetKind.Iterable (1), got {kind!r}")
        fetcher = Fetcher(dataset, kind == _DatasetKind.Iterable, auto_collation, collate_fn, drop_last)
        fetcher.restart()
        return fetcher


class _InfiniteConstantSampler(Sampler):
    """The index sampler of an iterable dataset: ``None`` forever (the dataset decides the end)."""

    def __iter__(self):
        while True:
            yield None


def _shared_seed(generator) -> int:
    """``torch.empty((), dtype=torch.int64).random_(generator=g)``: two 32-bit draws as a 63-bit int."""
    bg = _random.stream(generator)
    with _random._lock:
        hi, lo = bg.random_raw(2).tolist()
    return ((hi << 32) | lo) % (2**63)


def pin_memory(data):
    """Page-locked copies of the tensors in ``data`` (containers walked as ``default_collate`` does)."""
    if isinstance(data, Tensor):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: pin_memory(v) for k, v in data.items()}) if type(data) is not dict else \
            {k: pin_memory(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(pin_memory(v) for v in data))
    if isinstance(data, tuple):
        return [pin_memory(v) for v in data]
    if isinstance(data, list):
        return [pin_memory(v) for v in data]
    return data


class DataLoader:
    """Batches from a dataset, as torch.utils.data.DataLoader (arguments, checks, messages, the order of batches);
    with ``num_workers > 0`` batches are made in worker processes and handed back in sampler order (see the module
    docstring)."""

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None, sampler=None,
                 batch_sampler=None, num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = ""):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.generator = generator

        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 f"but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, "
                                 f"but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _fetcher(self) -> Fetcher:
        return Fetcher(self.dataset, self._is_iterable, self._auto_collation, self.collate_fn, self.drop_last)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        if self.persistent_workers:
            if self._iterator is None:
                self._iterator = _MultiProcessingDataLoaderIter(self)
            else:
                self._iterator._reset()
            return self._iterator
        return _MultiProcessingDataLoaderIter(self)

    def __len__(self) -> int:
        if self._is_iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)


class _BaseDataLoaderIter:
    def __init__(self, loader: DataLoader):
        self._loader = loader
        self._sampler_iter = iter(loader._index_sampler)
        self._base_seed = _shared_seed(loader.generator)  # after iter(): torch draws in this order
        self._pin = loader.pin_memory
        if self._pin and not cuda.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.")
            self._pin = False

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def _finish(self, data):
        return pin_memory(data) if self._pin else data


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = loader._fetcher()
        self._fetcher.restart()

    def __next__(self):
        index = next(self._sampler_iter)
        return self._finish(self._fetcher.fetch(index))


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        n = self._num_workers = loader.num_workers
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing.get_context()
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self._prefetch = loader.prefetch_factor
        self._persistent = loader.persistent_workers
        self._timeout = loader.timeout
        self._result_queue = ResultQueue(ctx=ctx.get_context())
        self._index_queues, self._workers = [], []
        self._shutdown = False
        fetcher = loader._fetcher()
        for i in range(n):
            q = ctx.Queue()
            q.cancel_join_thread()
            w = ctx.Process(target=worker_loop, daemon=True,
                            args=(fetcher, q, self._result_queue, self._base_seed, loader.worker_init_fn, i, n))
            w.start()
            self._index_queues.append(q)
            self._workers.append(w)
        self._epoch = 0
        self._tasks_outstanding = 0
        self._start_epoch()

    def _start_epoch(self):
        self._epoch += 1
        self._send_idx = self._rcvd_idx = 0
        self._task_info = {}  # send_idx -> (worker_id,) while out, (worker_id, data) once back early
        self._workers_status = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch * self._num_workers):
            self._try_put_index()

    def _reset(self):
        """Persistent workers: drain the last epoch's batches still in flight, start a new one."""
        while self._tasks_outstanding > 0:
            self._get_data()
            self._tasks_outstanding -= 1
        self._sampler_iter = iter(self._loader._index_sampler)
        self._start_epoch()

    def _try_put_index(self):
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            w = next(self._worker_cycle)
            if self._workers_status[w]:
                break
        else:
            return  # every worker's copy of the iterable dataset is exhausted
        self._index_queues[w].put((self._epoch, self._send_idx, index))
        self._task_info[self._send_idx] = (w,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _get_data(self):
        """The next ``(epoch, send_idx, data)`` from any worker, watching that they stay alive."""
        if self._timeout > 0:
            try:
                return self._result_queue.get(timeout=self._timeout)
            except queue.Empty:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
        while True:
            try:
                return self._result_queue.get(timeout=_WATCHDOG_S)
            except queue.Empty:
                dead = [w.pid for w in self._workers if not w.is_alive()]
                if dead:
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(map(str, dead))}) exited "
                                       "unexpectedly") from None

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]  # its worker ran dry before answering
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process(data)
            _, idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _IterableDatasetStopIteration):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)
            else:
                del self._task_info[idx]
                self._rcvd_idx += 1
                return self._process(data)

    def _process(self, data):
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return self._finish(data)

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.join(timeout=_WATCHDOG_S)
            if w.is_alive():
                w.terminate()
                w.join()
        for q in self._index_queues + [self._result_queue]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        if getattr(self, "_workers", None) is not None:
            try:
                self._shutdown_workers()
            except Exception:  # interpreter shutdown: queues or modules may already be gone
                pass

"""The caching device allocator: device memory for tensors without a driver call per tensor.

Why it exists: a training step allocates and frees thousands of tensors. Asking cuda.core's
stream-ordered pool for each one costs a driver call each way (``cuMemAllocFromPoolAsync``,
``cuMemFreeAsync``) and a ``Buffer`` object; that was most of ``tt.empty``'s 9.7 us (torch.empty:
2.3 us). This is PyTorch's CUDACachingAllocator in miniature: freed blocks are kept and handed out
again, and the hot path (a cached block of the right size class on the right stream) is a dict
lookup and a list pop under a lock, with no driver call.

Why the hot path keeps its lock, and what it costs: the statistics are read-modify-write updates
of several counters that every thread shares, and the peaks compare the sum of them at each
malloc. The GIL makes one ``list.pop`` atomic, not ``n += 1`` followed by ``bytes += size``; a
thread switch between them loses an update or tears a ``memory_stats()`` snapshot. Per-thread
free lists and counters would make the counts exact but not the peaks, which need the process-
wide current value at every malloc. Measured on the 2-core test machine (simulated device, its
bookkeeping off as on a GPU), a malloc and free pair of a cached block costs 1.1 us with the
lock and 1.06-1.10 us with C no-ops in its place: the lock is not the cost (the two Python calls
and the statistics, 0.35 us, are). It is taken with ``acquire()``/``release()``, not a ``with``
block, whose protocol cost twice as much (0.47 against 0.19 us for two). The lock is reentrant
because the garbage collector may run a storage's ``__del__`` (a free) on a thread that is
inside ``malloc``: the updates are laid out so that no object the collector tracks is made
between the reads and writes of one statistic.

The rules (PyTorch's), and why they are safe:

* **Size classes.** A request rounds up to a multiple of 512 bytes (0 bytes to 512); a "large"
  request (over 1 MiB) rounds up to a quarter of its power of two, at most 2 MiB, so less than
  25% and less than 2 MiB is wasted. A block only serves requests of its own class: blocks are
  never split or merged. Blocks of 1 MiB or less count as ``small_pool`` in the statistics.
* **Streams.** A block belongs to the stream it was allocated on and is cached per (stream,
  class). Work on one stream runs in order, so a block freed on its stream can be reused on that
  stream at once, while kernels that read it are still queued. No other stream gets it.
* **record_stream.** A block also used on other streams (``record_stream``) is not cached when
  freed: an event is recorded on each of those streams and the block is *pending* until all of
  them have completed. Events are polled on a cache miss, before asking the backend for memory,
  so the hot path never queries the driver.
* **Graph capture.** While a capture is under way (``begin_capture``/``end_capture``, which
  ``runtime/graphs.py`` calls), no event is recorded or queried: recorded on the capturing stream,
  an event becomes part of the graph and can never be queried (CUDA_ERROR_CAPTURED_EVENT); a
  query during a global-mode capture invalidates it. A block freed then stays pending, with its
  streams noted, and gets its events when the last capture ends; cache misses meanwhile go to the
  backend. (PyTorch's ``insert_events_deferred_until_no_capture``, and no ``process_events``
  while ``captures_underway``.)
* **Pools.** Blocks live in pools keyed by an id: 0 is the default pool; ``create_pool()`` makes a
  private one, whose blocks serve only allocations that name it (CUDA graphs will allocate from
  the graph's pool during capture, and the memory stays there while the graph lives);
  ``release_pool(id)`` when the graph dies hands its cached blocks back, and the rest as they are
  freed (at the next ``empty_cache``).
* **Giving memory back.** ``empty_cache()`` returns the cached blocks of the default pool and of
  released pools to the backend, live blocks never. A pending block goes back after its stream
  is made to wait on its events: ordered on the device, the host does not block. When the backend
  is out of memory, the allocator does the same and tries once more (``num_alloc_retries``), then
  raises :class:`OutOfMemoryError` (``num_ooms``).

Statistics are torch's ``memory_stats()``: for ``allocation allocated_bytes active active_bytes
requested_bytes segment reserved_bytes`` (and ``inactive_split*``, always 0 here: nothing is
split) the ``current``, ``peak``, ``allocated`` (total increase) and ``freed`` (total decrease)
of ``all``, ``small_pool`` and ``large_pool``. ``allocated_bytes`` counts whole blocks,
``requested_bytes`` the bytes asked for; ``active`` includes pending blocks; ``reserved_bytes`` is
what the backend has handed out and not got back (every block is its own segment).

The backend is all the allocator knows of the device, small so that tests can fake it:
``runtime/memory.py: CudaPoolBackend`` (cuda.core's pool) in GPU mode, a fake in the tests.
"""
from __future__ import annotations

import collections
import threading

MIN_BLOCK = 512  # bytes: every block is a multiple of this
SMALL_SIZE = 1 << 20  # blocks up to this size are "small_pool"
LARGE_STEP = 2 << 20  # the coarsest rounding of a large request

STAT_NAMES = ("allocation", "allocated_bytes", "active", "active_bytes", "requested_bytes",
              "segment", "reserved_bytes", "inactive_split", "inactive_split_bytes")
POOL_TYPES = ("all", "small_pool", "large_pool")
FIELDS = ("current", "peak", "allocated", "freed")
_TRACKED = STAT_NAMES[:7]  # the inactive_split stats are always 0: blocks are never split


class OutOfMemoryError(RuntimeError):
    """The device has no memory left for a request, even with the cache emptied (torch's name)."""


class Backend:
    """What the allocator needs from a device. Streams and events are whatever the backend uses.

    ``allocate`` raises :class:`OutOfMemoryError` when the device is full (any other error passes
    through). ``free`` is ordered on ``stream``: the memory is reusable once work queued there
    before it has run.
    """

    def allocate(self, nbytes: int, stream) -> tuple[int, object]:
        """A new block of ``nbytes`` usable on ``stream``: ``(address, handle)``."""
        raise NotImplementedError

    def free(self, handle, stream) -> None:
        """Give a block (its ``handle``) back, ordered on ``stream``."""
        raise NotImplementedError

    def record_event(self, stream):
        """An event recorded now on ``stream``: it completes when the work queued there has run."""
        raise NotImplementedError

    def event_done(self, event) -> bool:
        """Whether the work ``event`` was recorded after has finished (a freed block waiting on it may be
        reused then)."""
        raise NotImplementedError

    def wait_event(self, stream, event) -> None:
        """Make work queued on ``stream`` from now on wait for ``event``."""
        raise NotImplementedError

    # ``lent(ptr, nbytes, stream)`` and ``returned(ptr, size, stream)``, or None: a block was handed
    # out for ``nbytes`` (malloc), or taken back into the cache (free), ordered on ``stream``. A
    # debugging backend (the simulated device) uses them to check accesses at tensor granularity:
    # past the bytes a tensor asked for, or into a block in the cache. On a GPU both are None.
    lent = None
    returned = None


class Block:
    """A block handed out by the allocator. ``ptr`` is its address, ``size`` its size class."""

    __slots__ = ("ptr", "size", "requested", "stream", "pool", "home", "handle", "uses", "events")

    def __init__(self, ptr: int, size: int, stream, pool: "_Pool", home: list, handle):
        self.ptr, self.size, self.stream, self.pool, self.home, self.handle = ptr, size, stream, pool, home, handle
        self.requested = 0  # bytes asked for by the current allocation
        self.uses = None  # other streams recorded with record_stream, while allocated
        self.events = 0  # events still to complete before a freed block may be reused


class _Pool:
    """Cached blocks by stream and size class: ``free[id(stream)][size]`` is a list of blocks.

    Streams are keyed by identity (cheap to hash): every block holds its stream, so the id cannot be
    reused by another stream while a block is listed under it. A list, once made, stays: each
    block keeps it as its ``home`` and goes back to it when freed.
    """

    __slots__ = ("id", "free", "segments")

    def __init__(self, pool_id: int):
        self.id = pool_id
        self.free: dict[int, dict[int, list]] = {}
        self.segments = 0  # blocks of this pool the backend has handed out (live or cached)

    def home(self, stream, size: int) -> list:
        by_size = self.free.get(id(stream))
        if by_size is None:
            by_size = self.free[id(stream)] = {}
        lst = by_size.get(size)
        if lst is None:
            lst = by_size[size] = []
        return lst


class _GiveBack:
    """The home of a block made while caching is off (``set_caching(False)``): where ``free`` would put
    the block back on its free list, it goes back to the backend; malloc never finds one cached."""

    __slots__ = ("allocator",)

    def __init__(self, allocator: "CachingAllocator"):
        self.allocator = allocator

    def append(self, block: Block) -> None:
        self.allocator._give_back(block)

    def __len__(self) -> int:
        return 0


class _Counts:
    """One column of the statistics (``all``, ``small_pool`` or ``large_pool``).

    Live blocks (``n`` of them, ``b`` bytes, ``r`` requested bytes) and pending ones (``pn pb pr``)
    give the current values; ``tn tb tr`` only ever grow (what was allocated; freed is the
    difference); segments likewise (``sn sb`` now, ``tsn tsb`` ever). ``pk_<stat>`` are the peaks.
    The ``all`` column keeps no totals (one update less per malloc): they are the other two's sum.
    """

    __slots__ = ("n", "b", "r", "pn", "pb", "pr", "tn", "tb", "tr", "sn", "sb", "tsn", "tsb",
                 *("pk_" + s for s in _TRACKED))

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)

    def current(self) -> dict:
        return {"allocation": self.n, "allocated_bytes": self.b, "active": self.n + self.pn,
                "active_bytes": self.b + self.pb, "requested_bytes": self.r + self.pr,
                "segment": self.sn, "reserved_bytes": self.sb}

    def total(self) -> dict:
        return {"allocation": self.tn, "allocated_bytes": self.tb, "active": self.tn,
                "active_bytes": self.tb, "requested_bytes": self.tr, "segment": self.tsn,
                "reserved_bytes": self.tsb}


def _large_size(nbytes: int) -> int:
    step = min(LARGE_STEP, 1 << (nbytes.bit_length() - 3))  # a quarter of nbytes' power of two
    return -(-nbytes // step) * step


def _fmt(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.2f} MiB"


def format_size(nbytes: int) -> str:
    """A size as torch's allocator messages write it: bytes, KiB, MiB or GiB with two decimals."""
    if nbytes <= 1024:
        return f"{nbytes} bytes"
    for unit, scale in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)):
        if nbytes <= scale << 10 or unit == "GiB":
            return f"{nbytes / scale:.2f} {unit}"


class CachingAllocator:
    """The caching allocator of one device over ``backend`` (see the module docstring)."""

    def __init__(self, backend: Backend):
        self._backend = backend
        # Reentrant: the garbage collector may run a storage's __del__ (a free) on this thread
        # while it is inside the allocator; the state is consistent wherever objects are made.
        self._lock = threading.RLock()
        self._pools = {0: _Pool(0)}
        self._next_pool_id = 1
        self._freeable: list[_Pool] = []  # released private pools that still hold blocks
        self._events: dict[object, collections.deque] = {}  # stream -> deque of (event, block)
        self._pending = 0  # freed blocks waiting on events
        self._captures = 0  # graph captures under way on this device (no event recorded or queried)
        self._deferred: list[Block] = []  # freed during a capture: their events are recorded after it
        self._all, self._small, self._large = self._counts = (_Counts(), _Counts(), _Counts())
        self._num = dict.fromkeys(("num_alloc_retries", "num_ooms", "num_sync_all_streams",
                                   "num_device_alloc", "num_device_free"), 0)
        self._base: dict = {}  # (type, stat) -> (allocated, freed) at reset_accumulated_memory_stats
        self._lent, self._returned = backend.lent, backend.returned
        self._limit = None  # set_memory_fraction's (fraction, bytes allowed): segments beyond it are refused
        self._device = None  # (device index, mem_get_info) for torch's out-of-memory message
        self._routes: dict = {}  # thread id -> private pool id (use_mem_pool): where that thread's pool-0 requests go
        self._segments: dict = {}  # address -> Block: every block the backend has handed out (snapshot)
        self._caching = True  # False (caching_allocator_enable): new blocks go back to the backend when freed

    # ----- the hot path -----------------------------------------------------------------------
    def malloc(self, nbytes: int, stream, pool: int = 0) -> Block:
        """A block of at least ``nbytes`` bytes for use on ``stream``, from pool ``pool``."""
        if type(nbytes) is not int or nbytes < 0:
            raise self._bad_size(nbytes)
        if self._routes and pool == 0:  # inside use_mem_pool: this thread's default requests go to its pool
            pool = self._routes.get(threading.get_ident(), 0)
        if nbytes <= SMALL_SIZE:
            size, k = (nbytes + MIN_BLOCK - 1) & -MIN_BLOCK or MIN_BLOCK, self._small
        else:
            size, k = _large_size(nbytes), self._large
        lock = self._lock
        lock.acquire()  # acquire/release, not ``with``: half the cost of the with statement's protocol
        try:
            p = self._pools.get(pool)
            if p is None:
                raise ValueError(f"pool: no pool with id {pool!r} (create_pool() makes one)")
            by_size = p.free.get(id(stream))
            lst = by_size.get(size) if by_size else None
            block = lst.pop() if lst else self._new_block(size, stream, p)
            block.requested = nbytes
            if self._lent is not None:
                self._lent(block.ptr, nbytes, block.stream)
            a = self._all
            a.n += 1; a.b += size; a.r += nbytes  # noqa: E702
            k.n += 1; k.b += size; k.r += nbytes; k.tn += 1; k.tb += size; k.tr += nbytes  # noqa: E702
            # Every statistic this changed, against its peak: a block waiting on another stream's
            # events must not send every later malloc to _raise_peaks, which rebuilds all the
            # current values. With no block pending (the common case) active is allocated and the
            # active peaks are never below the allocated ones: three comparisons per column do.
            if self._pending:  # pending blocks count as active and requested
                raise_peaks = (a.b > a.pk_allocated_bytes or a.n > a.pk_allocation or a.r + a.pr > a.pk_requested_bytes
                               or a.b + a.pb > a.pk_active_bytes or a.n + a.pn > a.pk_active
                               or k.b > k.pk_allocated_bytes or k.n > k.pk_allocation
                               or k.r + k.pr > k.pk_requested_bytes
                               or k.b + k.pb > k.pk_active_bytes or k.n + k.pn > k.pk_active)
            else:
                raise_peaks = (a.b > a.pk_allocated_bytes or a.n > a.pk_allocation or a.r > a.pk_requested_bytes
                               or k.b > k.pk_allocated_bytes or k.n > k.pk_allocation or k.r > k.pk_requested_bytes)
            if raise_peaks:
                self._raise_peaks()
            return block
        finally:
            lock.release()

    def free(self, block: Block) -> None:
        """Take a block back: cached at once, or pending on the events of its other streams."""
        size, r = block.size, block.requested
        k = self._small if size <= SMALL_SIZE else self._large
        lock = self._lock
        lock.acquire()
        try:
            a = self._all
            a.n -= 1; a.b -= size; a.r -= r  # noqa: E702
            k.n -= 1; k.b -= size; k.r -= r  # noqa: E702
            if block.uses is None:
                if self._returned is not None:
                    self._returned(block.ptr, block.size, block.stream)
                block.home.append(block)
                return
            for c in (a, k):
                c.pn += 1; c.pb += size; c.pr += r  # noqa: E702
            self._pending += 1
            if self._captures:  # an event now would be captured into the graph: after the capture
                self._deferred.append(block)
                return
            self._insert_events(block)
        finally:
            lock.release()

    def _insert_events(self, block: Block) -> None:
        """Record an event on each stream that used a freed block: it is reusable once all have run."""
        for s in block.uses:
            q = self._events.get(s)
            if q is None:  # setdefault: a free run by the GC meanwhile may have made one
                q = self._events.setdefault(s, collections.deque())
            q.append((self._backend.record_event(s), block))
            block.events += 1
        block.uses = None

    def record_stream(self, block: Block, stream) -> None:
        """``block`` is also used on ``stream``: its reuse waits for work queued there."""
        if stream is block.stream or stream == block.stream:
            return
        with self._lock:
            if block.uses is None:
                block.uses = [stream]
            elif stream not in block.uses:
                block.uses.append(stream)

    # ----- the cold paths ---------------------------------------------------------------------
    def _new_block(self, size: int, stream, pool: _Pool) -> Block:
        """A cache miss: a pending block that has become free, else a new one from the backend."""
        # Caching off: a default-pool block goes back when freed. Private pools (a graph's, a MemPool's)
        # keep theirs: their memory must outlive the tensors that come and go in them.
        home = pool.home(stream, size) if self._caching or pool.id else _GiveBack(self)
        if self._events and not self._captures:  # querying an event during a capture would break it
            self._process_events()
            if home:
                return home.pop()
        try:
            ptr, handle = self._allocate(size, stream)
        except OutOfMemoryError:
            self._release_cached()
            self._num["num_alloc_retries"] += 1
            try:
                ptr, handle = self._allocate(size, stream)
            except OutOfMemoryError as e:
                self._num["num_ooms"] += 1
                raise OutOfMemoryError(self._oom_message(size, e)) from e
        block = Block(ptr, size, stream, pool, home, handle)
        self._segments[ptr] = block
        k = self._small if size <= SMALL_SIZE else self._large
        for c in (self._all, k):
            c.sn += 1; c.sb += size  # noqa: E702
        k.tsn += 1
        k.tsb += size
        pool.segments += 1
        self._num["num_device_alloc"] += 1
        self._raise_peaks()
        return block

    def _allocate(self, size: int, stream):
        """A new segment from the backend, unless it would take the reserved bytes past the
        per-process limit (torch checks the same sum, before asking the device)."""
        if self._limit is not None and self._all.sb + size > self._limit[1]:
            raise OutOfMemoryError("over the per-process memory fraction")
        return self._backend.allocate(size, stream)

    def _oom_message(self, size: int, e: Exception) -> str:
        """torch's out-of-memory message; the device's capacity in it once the device is known."""
        a = self._all
        if self._device is None:
            return (f"CUDA out of memory. Tried to allocate {_fmt(size)}. Of the memory in use, {_fmt(a.b)} "
                    f"is allocated by tritensor and {_fmt(a.sb - a.b)} is reserved but unallocated "
                    f"(private pools, blocks waiting on other streams). Backend: {e}")
        index, mem_get_info = self._device
        free, total = mem_get_info()
        allowed = f"{format_size(self._limit[1])} allowed; " if self._limit is not None else ""
        return (f"CUDA out of memory. Tried to allocate {format_size(size)}. GPU {index} has a total capacity of "
                f"{format_size(total)} of which {format_size(free)} is free. {allowed}Of the allocated memory "
                f"{format_size(a.b)} is allocated by tritensor, and {format_size(a.sb - a.b)} is reserved by "
                "tritensor but unallocated.")

    def _process_events(self) -> None:
        """Cache the pending blocks whose events have all completed (events on one stream
        complete in order: stop at the first that has not)."""
        done = self._backend.event_done
        for stream, q in list(self._events.items()):
            while q and done(q[0][0]):
                block = q.popleft()[1]
                block.events -= 1
                if block.events == 0:
                    self._unpend(block)
            if not q:
                del self._events[stream]

    def _unpend(self, block: Block) -> None:
        size, r = block.size, block.requested
        for c in (self._all, self._small if size <= SMALL_SIZE else self._large):
            c.pn -= 1; c.pb -= size; c.pr -= r  # noqa: E702
        self._pending -= 1
        if self._returned is not None:
            self._returned(block.ptr, block.size, block.stream)
        block.home.append(block)

    def _release_cached(self) -> None:
        """Give every cached block of the default pool and of released pools back to the
        backend. Pending blocks first become cached: their stream waits on their events."""
        events, self._events = self._events, {}  # frees run meanwhile by the GC queue anew
        for q in events.values():
            for event, block in q:
                self._backend.wait_event(block.stream, event)
                block.events -= 1
                if block.events == 0:
                    self._unpend(block)
        for pool in (self._pools[0], *self._freeable):
            self._release_pool_cache(pool)
        self._freeable = [p for p in self._freeable if p.segments]

    def _release_pool_cache(self, pool: _Pool) -> None:
        for by_size in pool.free.values():
            for lst in by_size.values():
                while lst:
                    self._give_back(lst.pop())

    def _give_back(self, block: Block) -> None:
        """Return a block that no tensor holds to the backend (ordered on its stream)."""
        self._backend.free(block.handle, block.stream)
        self._segments.pop(block.ptr, None)
        for c in (self._all, self._small if block.size <= SMALL_SIZE else self._large):
            c.sn -= 1; c.sb -= block.size  # noqa: E702
        block.pool.segments -= 1
        self._num["num_device_free"] += 1

    def _raise_peaks(self) -> None:
        for c in self._counts:
            for name, value in c.current().items():
                if value > getattr(c, "pk_" + name):
                    setattr(c, "pk_" + name, value)

    @staticmethod
    def _bad_size(nbytes) -> Exception:
        if type(nbytes) is not int:
            return TypeError(f"nbytes: expected an int, got {type(nbytes).__name__}")
        return ValueError(f"nbytes: expected a size >= 0, got {nbytes}")

    # ----- graph capture ----------------------------------------------------------------------
    def begin_capture(self) -> None:
        """A graph capture began on one of this device's streams: record and query no event until it ends."""
        with self._lock:
            self._captures += 1

    def end_capture(self) -> None:
        """A capture ended (successfully or not): the blocks freed during it get their events now."""
        with self._lock:
            if self._captures <= 0:
                raise RuntimeError("end_capture: no capture under way")
            self._captures -= 1
            if self._captures == 0 and self._deferred:
                deferred, self._deferred = self._deferred, []
                for block in deferred:
                    self._insert_events(block)

    # ----- pools, cache, statistics -----------------------------------------------------------
    def create_pool(self) -> int:
        """A new private pool; its id goes to ``malloc(..., pool=id)``."""
        with self._lock:
            pool_id = self._next_pool_id
            self._next_pool_id += 1
            self._pools[pool_id] = _Pool(pool_id)
            return pool_id

    def release_pool(self, pool: int) -> None:
        """The private pool's owner is gone: no more allocations from it; its cached blocks go
        back to the backend now, its live ones when freed and the cache next emptied."""
        with self._lock:
            if pool == 0:
                raise ValueError("pool: the default pool (0) cannot be released")
            p = self._pools.pop(pool, None)
            if p is None:
                raise ValueError(f"pool: no pool with id {pool!r}")
            self._release_pool_cache(p)
            if p.segments:
                self._freeable.append(p)

    def set_memory_fraction(self, fraction: float | None, total: int, device: int, mem_get_info) -> None:
        """Refuse segments beyond ``fraction * total`` bytes reserved (None: no limit). ``device`` and
        ``mem_get_info`` (-> free, total) describe the device in the out-of-memory message."""
        with self._lock:
            self._limit = None if fraction is None else (fraction, int(fraction * total))
            self._device = (device, mem_get_info)

    def set_caching(self, enabled: bool) -> None:
        """``False``: blocks made from now on are not cached: freed (and their other streams' events done),
        they go back to the backend at once, so every request asks the backend (torch's
        ``caching_allocator_enable(False)``); the cache is emptied now. ``True``: cache again."""
        with self._lock:
            self._caching = bool(enabled)
            if not enabled:
                self._release_cached()

    def caching(self) -> bool:
        """Whether freed blocks are cached for reuse (False after set_caching(False), torch's
        caching_allocator_enable(False))."""
        return self._caching

    def memory_fraction(self) -> float:
        """The fraction of the device's memory this process may reserve (torch's
        set_per_process_memory_fraction), 1.0 when unset."""
        return 1.0 if self._limit is None else self._limit[0]

    def route(self, pool: int | None) -> int:
        """Send this thread's default-pool requests to private pool ``pool`` (None: back to the
        default pool); the previous route, 0 for none."""
        with self._lock:
            me = threading.get_ident()
            if pool is not None and pool not in self._pools:
                raise ValueError(f"pool: no pool with id {pool!r}")
            previous = self._routes.pop(me, 0)
            if pool:
                self._routes[me] = pool
            return previous

    def snapshot(self, device: int = 0, pool: int | None = None) -> list:
        """torch.cuda.memory_snapshot()'s segments: every block the backend handed out (each is
        its own segment: nothing is split), its state ``active_allocated`` (a live tensor's),
        ``active_pending_free`` (freed, waiting on other streams' events) or ``inactive``
        (cached), by address; only pool ``pool``'s when given."""
        with self._lock:
            cached = {id(b) for p in (*self._pools.values(), *self._freeable) for by_size in p.free.values()
                      for lst in by_size.values() for b in lst}
            deferred = {id(b) for b in self._deferred}
            out = []
            for ptr in sorted(self._segments):
                b = self._segments[ptr]
                if pool is not None and b.pool.id != pool:
                    continue
                state = ("inactive" if id(b) in cached else
                         "active_pending_free" if b.events or id(b) in deferred else "active_allocated")
                active = state != "inactive"
                out.append({
                    "device": device, "address": ptr, "total_size": b.size,
                    "allocated_size": b.size if state == "active_allocated" else 0,
                    "active_size": b.size if active else 0, "requested_size": b.requested if active else 0,
                    "stream": int(getattr(b.stream, "cuda_stream", 0)),
                    "segment_type": "small" if b.size <= SMALL_SIZE else "large",
                    "segment_pool_id": (0, b.pool.id), "is_expandable": False, "frames": [],
                    "blocks": [{"address": ptr, "size": b.size, "requested_size": b.requested if active else 0,
                                "state": state, "frames": []}],
                })
            return out

    def empty_cache(self) -> None:
        """Give cached blocks back to the backend (live blocks and live private pools stay)."""
        with self._lock:
            self._release_cached()

    def memory_stats(self) -> dict:
        """torch.cuda.memory_stats(): flat keys such as ``allocated_bytes.all.current``, sorted."""
        with self._lock:
            out = dict(self._num, max_split_size=-1)  # -1: no size limit (nothing is split)
            for stat in ("oversize_allocations", "oversize_segments"):
                out.update({f"{stat}.{f}": 0 for f in FIELDS})
            for ptype, c, total in zip(POOL_TYPES, self._counts, self._totals()):
                current = c.current()
                for stat in STAT_NAMES:
                    cur, tot = current.get(stat, 0), total.get(stat, 0)
                    base_alloc, base_freed = self._base.get((ptype, stat), (0, 0))
                    out[f"{stat}.{ptype}.current"] = cur
                    out[f"{stat}.{ptype}.peak"] = getattr(c, "pk_" + stat, 0)
                    out[f"{stat}.{ptype}.allocated"] = tot - base_alloc
                    out[f"{stat}.{ptype}.freed"] = tot - cur - base_freed
            return dict(sorted(out.items()))

    def _totals(self) -> tuple:
        small, large = self._small.total(), self._large.total()
        return {k: small[k] + large[k] for k in small}, small, large

    def reset_peak_memory_stats(self) -> None:
        """Every peak becomes the current value."""
        with self._lock:
            for c in self._counts:
                for name, value in c.current().items():
                    setattr(c, "pk_" + name, value)

    def reset_accumulated_memory_stats(self) -> None:
        """The ``allocated``/``freed`` totals and the ``num_*`` counters start again from 0."""
        with self._lock:
            for ptype, c, total in zip(POOL_TYPES, self._counts, self._totals()):
                current = c.current()
                for stat in _TRACKED:
                    self._base[(ptype, stat)] = (total[stat], total[stat] - current[stat])
            self._num = dict.fromkeys(self._num, 0)

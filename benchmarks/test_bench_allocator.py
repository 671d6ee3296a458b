"""Host cost of the caching allocator's hot path (``runtime/allocator.py``), over a backend that
does nothing: what a cached alloc+free costs in Python, without the device.

Run: `python -m pytest benchmarks/test_bench_allocator.py -p no:xdist`, or
`python benchmarks/test_bench_allocator.py` (timeit: the best of 7 runs, microseconds per pair).
The device figure (``tt.empty`` against ``torch.empty`` on a GPU) is ``python -m tritensor.bench
launch``'s business, on a machine that has one.
"""
import timeit

from tritensor.runtime.allocator import Backend, CachingAllocator


class _NullBackend(Backend):
    """Addresses from a counter; events are always complete."""

    def __init__(self):
        self.next = 1 << 32

    def allocate(self, nbytes, stream):
        self.next += nbytes
        return self.next, None

    def free(self, handle, stream):
        pass

    def record_event(self, stream):
        return None

    def event_done(self, event):
        return True

    def wait_event(self, stream, event):
        pass


def alloc_free_pair():
    """A warm allocator and one cached alloc+free of a 4 KiB block (the ``tt.empty`` hot path)."""
    alloc, stream = CachingAllocator(_NullBackend()), object()
    alloc.free(alloc.malloc(4096, stream))

    def pair():
        alloc.free(alloc.malloc(4096, stream))

    return pair


def test_bench_allocator_hit(benchmark):
    benchmark(alloc_free_pair())


if __name__ == "__main__":
    pair, n = alloc_free_pair(), 200_000
    best = min(timeit.repeat(pair, number=n, repeat=7)) / n
    print(f"cached malloc+free: {best * 1e6:.2f} us per pair (best of 7 x {n:,})")

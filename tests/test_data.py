"""tritensor.utils.data: datasets, samplers, collation and the DataLoader, with and without workers.

Expected orders marked "torch 2.13" were printed by torch 2.13 (CPU) for the same calls: our
shuffles are bit-exact with torch's CPU generator for the same seed (utils/data/_random.py).
"""
from __future__ import annotations

import collections
import os
import signal
import threading

import numpy as np
import pytest

import tritensor as tt
from tritensor.utils import data as tud
from tritensor.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, DistributedSampler,
                                  IterableDataset, RandomSampler, SequentialSampler, Subset, SubsetRandomSampler,
                                  TensorDataset, default_collate, get_worker_info, random_split)
from tritensor.utils.data import dataloader as _dl


class Gen:
    """A stand-in for a seeded generator (anything with initial_seed() is accepted)."""

    def __init__(self, seed):
        self.seed = seed

    def initial_seed(self):
        return self.seed


def _lists(batches):
    return [b.tolist() if isinstance(b, tt.Tensor) else [x.tolist() for x in b] for b in batches]


# ----- torch parity ---------------------------------------------------------------------------

def test_shuffled_loader_matches_torch():
    dl = DataLoader(list(range(10)), batch_size=3, shuffle=True, generator=Gen(0))
    assert _lists(dl) == [[3, 7, 5], [2, 0, 8], [1, 6, 9], [4]]  # torch 2.13
    dl = DataLoader(list(range(7)), batch_size=2, shuffle=True, generator=Gen(5))
    # the generator's stream advances from one epoch to the next, as torch's generator state does
    assert [_lists(dl) for _ in range(2)] == [[[2, 4], [3, 5], [0, 6], [1]], [[4, 1], [0, 2], [3, 6], [5]]]


def test_samplers_match_torch():
    s = RandomSampler(range(5), replacement=True, num_samples=40, generator=Gen(3))
    assert list(s) == [1, 3, 2, 2, 0, 0, 0, 0, 1, 4, 4, 1, 0, 4, 1, 4, 0, 4, 0, 4, 1, 4, 1, 1, 2, 3, 2, 4, 4, 0,
                       0, 1, 4, 3, 4, 2, 3, 0, 2, 1]  # torch 2.13
    assert list(SubsetRandomSampler([10, 20, 30, 40], generator=Gen(1))) == [20, 40, 30, 10]
    assert [s.indices for s in random_split(range(10), [0.3, 0.7], generator=Gen(42))] == \
        [[2, 6, 1], [8, 4, 5, 0, 9, 3, 7]]


@pytest.mark.parametrize("kw, expected", [  # torch 2.13, epochs 0 and 1, ranks 0..2 of 3
    (dict(shuffle=False), [[[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]] * 2),
    (dict(shuffle=True, seed=7), [[[5, 4, 9, 2], [0, 1, 6, 5], [3, 7, 8, 0]],
                                  [[3, 1, 4, 9], [5, 2, 7, 3], [0, 6, 8, 5]]]),
    (dict(shuffle=True, seed=7, drop_last=True), [[[5, 4, 9], [0, 1, 6], [3, 7, 8]],
                                                  [[3, 1, 4], [5, 2, 7], [0, 6, 8]]]),
])
def test_distributed_sampler_matches_torch(kw, expected):
    got = []
    for epoch in (0, 1):
        ranks = []
        for rank in range(3):
            s = DistributedSampler(range(10), num_replicas=3, rank=rank, **kw)
            s.set_epoch(epoch)
            ranks.append(list(s))
            assert len(s) == len(ranks[-1])
        got.append(ranks)
    assert got == expected


@pytest.mark.parametrize("n, replicas, drop_last", [(2, 5, False), (11, 4, True), (12, 4, False), (0, 2, True)])
def test_distributed_sampler_partition(n, replicas, drop_last):
    shares = [list(DistributedSampler(range(n), replicas, r, shuffle=True, seed=3, drop_last=drop_last))
              for r in range(replicas)] if n else [[] for _ in range(replicas)]
    assert len({len(s) for s in shares}) == 1
    flat = sum(shares, [])
    if drop_last:
        assert len(flat) == len(set(flat)) and len(flat) == n - n % replicas
    else:
        assert set(flat) == set(range(n)) and len(flat) == -(-n // replicas) * replicas


def test_distributed_sampler_errors():
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(Exception, match="init_process_group|not been initialized"):
        DistributedSampler(range(4))  # no process group: num_replicas comes from comm


def test_unseeded_shuffle_follows_the_global_seed():
    tt.manual_seed(11)
    a = [_lists(DataLoader(list(range(20)), batch_size=5, shuffle=True)) for _ in range(2)]
    tt.manual_seed(11)
    b = [_lists(DataLoader(list(range(20)), batch_size=5, shuffle=True)) for _ in range(2)]
    assert a == b and a[0] != a[1]
    assert sorted(sum(a[0], [])) == list(range(20))


# ----- datasets and samplers -------------------------------------------------------------------

def test_tensor_dataset_subset_concat():
    x, y = tt.arange(12).reshape(6, 2).float(), tt.arange(6)
    ds = TensorDataset(x, y)
    assert len(ds) == 6 and ds[4][0].tolist() == [8.0, 9.0] and ds[4][1].item() == 4
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(x, tt.arange(5))
    sub = Subset(ds, [5, 0])
    assert len(sub) == 2 and sub[0][1].item() == 5
    cat = ConcatDataset([list(range(3)), list(range(10, 12))])
    assert len(cat) == 5 and [cat[i] for i in range(5)] == [0, 1, 2, 10, 11] and cat[-1] == 11
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        random_split(range(5), [2, 2])
    parts = random_split(range(5), [2, 3])
    assert sorted(parts[0].indices + parts[1].indices) == list(range(5))


def test_batch_sampler_and_errors():
    assert list(BatchSampler(SequentialSampler(range(7)), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, True)) == 2 and len(BatchSampler(range(7), 3, False)) == 3
    with pytest.raises(ValueError, match="batch_size should be a positive integer value, but got batch_size=0"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        BatchSampler(range(3), 2, 1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError, match="replacement should be a boolean value"):
        RandomSampler(range(3), replacement=1)


# ----- collation ------------------------------------------------------------------------------

def test_default_collate():
    out = default_collate([{"a": 1.5, "b": (1, True), "c": "x"}, {"a": 2.5, "b": (2, False), "c": "y"}])
    assert out["a"].dtype is tt.float64 and out["a"].tolist() == [1.5, 2.5]
    assert out["b"][0].dtype is tt.int64 and out["b"][1].dtype is tt.bool and out["c"] == ["x", "y"]
    arr = default_collate([np.ones(2, np.int32), np.zeros(2, np.int32)])
    assert arr.dtype is tt.int32 and arr.tolist() == [[1, 1], [0, 0]]
    assert default_collate([np.float32(1), np.float32(2)]).dtype is tt.float32
    P = collections.namedtuple("P", "x y")
    p = default_collate([P(tt.ones(2), 1), P(tt.zeros(2), 2)])
    assert isinstance(p, P) and p.x.shape == (2, 2) and p.y.tolist() == [1, 2]
    bf = default_collate([tt.ones(3, dtype=tt.bfloat16), tt.full((3,), 2.0, dtype=tt.bfloat16)[::1]])
    assert bf.dtype is tt.bfloat16 and bf.float().tolist() == [[1, 1, 1], [2, 2, 2]]
    t = tt.arange(6).reshape(2, 3).float()
    assert default_collate([t.t(), t.t()]).tolist() == [t.t().tolist()] * 2  # non-contiguous samples
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[2\] at entry 0 "
                                           r"and \[3\] at entry 1"):
        default_collate([tt.ones(2), tt.ones(3)])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy arrays, numbers"):
        default_collate([object(), object()])


# ----- the DataLoader -------------------------------------------------------------------------

class Squares(Dataset):
    def __len__(self):
        return 23

    def __getitem__(self, i):
        if not 0 <= i < 23:
            raise IndexError(i)
        return {"x": np.full(3, i, np.float32), "y": i * i, "name": f"s{i}"}


def _flat(batches):
    return [(b["x"].tolist(), b["y"].tolist(), b["name"]) for b in batches]


@pytest.fixture
def host_batches():
    """DataLoader workers are forked processes. As in torch, a forked child cannot use its parent's
    CUDA context, so the tests whose workers collate build their batches on the host: ``cpu`` is the
    default device inside (it is already in CPU mode; the device run makes ``cuda`` the default)."""
    with tt.device("cpu"):
        yield


@pytest.mark.parametrize("kw", [dict(batch_size=4), dict(batch_size=5, shuffle=True, drop_last=True),
                                dict(batch_size=None)])
def test_workers_give_the_same_batches(kw, host_batches):
    gen_kw = {"generator": Gen(9)} if kw.get("shuffle") else {}
    plain = list(DataLoader(Squares(), **kw, **gen_kw))
    gen_kw = {"generator": Gen(9)} if kw.get("shuffle") else {}
    workers = list(DataLoader(Squares(), num_workers=2, **kw, **gen_kw))
    if kw["batch_size"] is None:
        assert [(b["x"].tolist(), b["y"], b["name"]) for b in plain] == \
            [(b["x"].tolist(), b["y"], b["name"]) for b in workers]
        assert len(plain) == 23
    else:
        assert _flat(plain) == _flat(workers)
        assert len(plain) == len(DataLoader(Squares(), **kw))
        if kw.get("drop_last"):
            assert len(plain) == 4


def test_persistent_workers_and_worker_info(host_batches):
    seen = []

    def init(worker_id):
        info = get_worker_info()
        assert info.id == worker_id and info.num_workers == 2 and isinstance(info.dataset, TensorDataset)

    ds = TensorDataset(tt.arange(10).float(), tt.arange(10))
    dl = DataLoader(ds, batch_size=3, shuffle=True, generator=Gen(4), num_workers=2, persistent_workers=True,
                    worker_init_fn=init)
    for epoch in range(2):
        it = iter(dl)
        first = next(it)
        if epoch == 0:
            continue  # leave the epoch unfinished: the next iter() drains it and starts over
        seen = [first] + list(it)
    # torch draws the workers' base seed from the generator once per iterator, not per epoch, so
    # the persistent loader's second epoch is the generator's next permutation without that draw
    g = Gen(4)
    list(DataLoader(ds, batch_size=3, shuffle=True, generator=g))
    ref_batches = [[ds[i] for i in b] for b in BatchSampler(RandomSampler(ds, generator=g), 3, False)]
    ref_batches = [default_collate(b) for b in ref_batches]
    assert [b[1].tolist() for b in seen] == [b[1].tolist() for b in ref_batches]
    assert get_worker_info() is None
    workers = dl._iterator._workers
    dl._iterator._shutdown_workers()
    assert not any(w.is_alive() for w in workers)


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        lo, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(lo, self.n, step))

    def __len__(self):
        return self.n


def test_iterable_dataset(host_batches):
    assert _lists(DataLoader(Stream(7), batch_size=3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert _lists(DataLoader(Stream(7), batch_size=3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(DataLoader(Stream(7), batch_size=3)) == 3
    # two workers, each its own shard; batches come round-robin, as torch's do
    assert _lists(DataLoader(Stream(9), batch_size=2, num_workers=2)) == [[0, 2], [1, 3], [4, 6], [5, 7], [8]]
    with pytest.raises(ValueError, match="expected unspecified shuffle option, but got shuffle=True"):
        DataLoader(Stream(3), shuffle=True)


class Failing(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            raise KeyError("bad sample 2")
        if i == 3 and get_worker_info() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


def test_a_forked_worker_collating_on_the_device_gets_torchs_error():
    """A worker forked after the parent used the GPU cannot use it: torch's error, naming the cure,
    comes back from the worker (not the driver's bare CUDA_ERROR_NOT_INITIALIZED)."""
    if not tt.cuda.is_available():
        pytest.skip("needs the GPU path (a GPU or TRITENSOR_DEVICE=sim)")
    tt.zeros(1, device="cuda").sum().item()  # the parent uses the device
    with tt.device("cuda"), pytest.raises(RuntimeError, match="(?s)DataLoader worker process 0.*Cannot "
                                          "re-initialize CUDA in forked subprocess.*'spawn' start method"):
        list(DataLoader(Squares(), batch_size=4, num_workers=1))


def test_worker_errors(monkeypatch):
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0"):
        list(DataLoader(Failing(), batch_size=2, sampler=[0, 2], num_workers=1))
    monkeypatch.setattr(_dl, "_WATCHDOG_S", 0.2)
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"):
        list(DataLoader(Failing(), batch_size=1, sampler=[3], num_workers=1))


class Unpicklable(Dataset):
    """Sample 1 cannot cross the process boundary (a lock is not picklable)."""

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return threading.Lock() if i == 1 else i


def _passthrough(batch):
    return batch


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ctx", [None, pytest.param("spawn", marks=pytest.mark.slow)])  # spawn: the queue pickled
def test_worker_that_cannot_send_its_batch_reports_it(ctx):
    """The worker's send once failed in the queue's feeder thread, which only printed the
    error; the main process waited forever (torch does too). Now the failure comes back to the
    main process and is raised there with the worker's traceback, and the other batches arrive."""
    dl = DataLoader(Unpicklable(), batch_size=1, collate_fn=_passthrough, num_workers=1, timeout=30,
                    multiprocessing_context=ctx)
    it = iter(dl)
    assert next(it) == [0]
    with pytest.raises(TypeError, match=r"(?s)Caught TypeError in DataLoader worker process 0 while sending "
                                        r"batch 1 to the main process.*pickle.*lock"):
        next(it)
    assert next(it) == [2]  # the loader goes on, as after any worker exception
    with pytest.raises(StopIteration):
        next(it)


def test_loader_argument_errors():
    ds = list(range(4))
    for kw, msg in [(dict(num_workers=-1), "num_workers option should be non-negative"),
                    (dict(timeout=-1), "timeout option should be non-negative"),
                    (dict(prefetch_factor=2), "prefetch_factor option could only be specified in multiprocessing"),
                    (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
                    (dict(sampler=[0, 1], shuffle=True), "sampler option is mutually exclusive with shuffle"),
                    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
                    (dict(batch_size=None, drop_last=True), "mutually exclusive with drop_last")]:
        with pytest.raises(ValueError, match=msg):
            DataLoader(ds, **kw)
    assert _lists(DataLoader(ds, batch_sampler=[[3, 1], [0]])) == [[3, 1], [0]]


def test_pin_memory_without_a_gpu_warns():
    if tt.cuda.is_available():
        # host samples: collate makes an array sample a tensor on the default device, which the
        # device-tensor variant makes cuda, and a device batch cannot be pinned (as in torch)
        b = next(iter(DataLoader([tt.ones(2, device="cpu")], batch_size=1, pin_memory=True)))
        assert b.is_pinned()
    else:
        with pytest.warns(UserWarning, match="no accelerator is found"):
            assert _lists(DataLoader(list(range(3)), batch_size=2, pin_memory=True)) == [[0, 1], [2]]
        assert not tt.ones(2).is_pinned()
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
            tt.ones(2).pin_memory()

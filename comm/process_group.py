"""Process groups: ``init_process_group``, ``new_group`` and friends, as in torch.distributed.

A :class:`ProcessGroup` is a set of ranks and the backend that moves data between them (a
:class:`.backend_api.CommBackend`, created by the factory registered under the group's backend
name: "tcp" by default, see :class:`.backend_api.Backend`). Ranks find each other through a
store: the one given, or a :class:`.TCPStore` hosted by rank 0 at ``MASTER_ADDR:MASTER_PORT``
(``env://``) or at ``tcp://host:port``. Every group gets its own key prefix in the store, which
its backend uses to connect its ranks (the tcp backend: its own connections, so operations on
different groups never interleave on one socket).
"""

from __future__ import annotations

import os
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

from .backend_api import Backend, DistributedBackendOptions
from .errors import DistError
from .reduce_op import ReduceOp
from .store import PrefixStore, Store, TCPStore, _seconds

__all__ = [
    "ReduceOp", "Backend", "GroupMember", "group", "ProcessGroup", "init_process_group",
    "destroy_process_group", "is_initialized", "is_available", "get_rank", "get_world_size",
    "get_backend", "new_group", "get_process_group_ranks", "get_global_rank", "get_group_rank",
    "default_pg_timeout",
]

default_pg_timeout = timedelta(minutes=30)  # torch's default


class _NonMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    """torch.distributed.GroupMember: ``WORLD`` (the default group, once initialised) and ``NON_GROUP_MEMBER``
    (what new_group gives a rank outside it)."""
    WORLD = None  # set to the default group on init_process_group
    NON_GROUP_MEMBER = _NonMember()


group = GroupMember  # torch exposes both ``group.WORLD`` and ``GroupMember.WORLD``


def _create_backend(name: Backend, store: Store, prefix: str, rank: int, global_ranks: list, timeout: float,
                    what: str):
    """The group's backend, made by the factory registered under ``name`` (torch's way: the
    extended API gets the group's global ranks and its key prefix; the plain one a store whose
    keys carry the prefix)."""
    plugin = Backend._plugin(name, what)
    if plugin.extended_api:
        opts = DistributedBackendOptions(store, rank, len(global_ranks), timedelta(seconds=timeout), prefix,
                                         list(global_ranks))
        return plugin.creator_fn(opts, None)
    return plugin.creator_fn(PrefixStore(prefix, store), rank, len(global_ranks), timedelta(seconds=timeout))


class ProcessGroup:
    """Ranks ``global_ranks`` and their backend; ``rank()``/``size()``/``name()`` as in torch.

    The collectives (:mod:`.collectives`) check their arguments, then call this group's backend."""

    def __init__(self, store: Store, prefix: str, rank: int, global_ranks: list, timeout: float,
                 backend: str = Backend.TCP, what: str = "init_process_group"):
        self.store = store
        self.prefix = prefix
        self._rank = rank
        self._size = len(global_ranks)
        self.global_ranks = list(global_ranks)
        self.timeout = timeout
        self.backend_name = Backend(backend)
        self._backend = _create_backend(self.backend_name, store, prefix, rank, self.global_ranks, timeout, what)

    def rank(self) -> int:
        """torch's ProcessGroup.rank: this process's rank in the group."""
        return self._rank

    def size(self) -> int:
        """torch's ProcessGroup.size: the number of ranks in the group."""
        return self._size

    def name(self) -> str:
        """The backend's name, as torch's ``ProcessGroup.name()``."""
        return self.backend_name

    def _get_backend(self, device=None):
        """The backend that runs this group's operations (torch's ``ProcessGroup._get_backend``)."""
        return self._backend

    def destroy(self):
        """Shut the group's backend down (destroy_process_group)."""
        self._backend.shutdown()

    def __repr__(self):
        return f"ProcessGroup(ranks={self.global_ranks}, rank={self._rank}, backend={self.backend_name!r})"


# ------------------------------------------------------------------------- global state


class _State:
    def __init__(self):
        self.default: ProcessGroup | None = None
        self.store: Store | None = None
        self.own_store = False
        self.groups: list[ProcessGroup] = []
        self.group_count = 0
        self.generation = 0
        self.rank = -1
        self.world_size = -1
        self.backend = Backend(Backend.TCP)
        self.timeout = default_pg_timeout.total_seconds()


_state = _State()


def is_available() -> bool:
    """torch.distributed.is_available: True, tritensor is built with its distributed package."""
    return True


def is_initialized() -> bool:
    """torch.distributed.is_initialized: whether init_process_group has set up the default group."""
    return _state.default is not None


def _require_init(what: str):
    if _state.default is None:
        raise DistError(f"{what}: the default process group is not initialized; call "
                        "tritensor.comm.init_process_group() first")


def _int_arg(value, name, lo=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected int, got {value!r}")
    if lo is not None and value < lo:
        raise ValueError(f"{name}: expected an int >= {lo}, got {value}")
    return value


def _env_int(name: str) -> int:
    v = os.environ.get(name)
    if v is None:
        raise ValueError(f"init_process_group(init_method='env://') needs ${name} (or pass it as an argument)")
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"${name}: expected an integer, got {v!r}") from None


def _query_int(query: dict, name: str, init_method: str) -> int:
    v = query[name][0]
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"init_method: {name} in {init_method!r}: expected an integer, got {v!r}") from None


def _url_port(url, init_method: str):
    try:
        return url.port
    except ValueError:  # not a number, or out of range
        bad = url.netloc.rsplit(":", 1)[-1]
        raise ValueError(f"init_method: port in {init_method!r}: expected an integer in [0, 65535], "
                         f"got {bad!r}") from None


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout=None,
                       world_size: int = -1, rank: int = -1, store: Store | None = None,
                       group_name: str = "", pg_options=None, device_id=None) -> None:
    """Initialize the default process group, as ``torch.distributed.init_process_group``.

    ``backend`` is a registered backend's name (:class:`Backend`; default ``"tcp"``).
    ``init_method`` is ``"env://"`` (default; reads ``MASTER_ADDR``, ``MASTER_PORT``,
    ``RANK``, ``WORLD_SIZE``) or ``"tcp://host:port"``; or pass ``store`` with ``rank`` and
    ``world_size``. Rank 0 hosts the TCPStore. Raises when already initialized.
    """
    if _state.default is not None:
        raise DistError("init_process_group: the default process group is already initialized "
                        "(call destroy_process_group() first)")
    backend = Backend(backend or Backend.TCP)
    Backend._plugin(backend, "init_process_group")
    tsecs = default_pg_timeout.total_seconds() if timeout is None else _seconds(timeout)
    if store is not None and init_method is not None:
        raise ValueError("init_process_group: pass either init_method or store, not both")
    own_store = False
    if store is None:
        init_method = init_method or "env://"
        url = urlparse(init_method)
        query = parse_qs(url.query)
        if "rank" in query and rank == -1:
            rank = _query_int(query, "rank", init_method)
        if "world_size" in query and world_size == -1:
            world_size = _query_int(query, "world_size", init_method)
        if url.scheme == "env":
            host = os.environ.get("MASTER_ADDR")
            if not host:
                raise ValueError("init_process_group(init_method='env://') needs $MASTER_ADDR")
            port = _env_int("MASTER_PORT")
            if rank == -1:
                rank = _env_int("RANK")
            if world_size == -1:
                world_size = _env_int("WORLD_SIZE")
        elif url.scheme == "tcp":
            port = _url_port(url, init_method)
            if not url.hostname or port is None:
                raise ValueError(f"init_method: expected 'tcp://host:port', got {init_method!r}")
            host = url.hostname
        else:
            raise ValueError(f"init_method: expected 'env://' or 'tcp://host:port', got {init_method!r}")
        _int_arg(world_size, "world_size", 1)
        _int_arg(rank, "rank", 0)
        if rank >= world_size:
            raise ValueError(f"rank: expected 0 <= rank < world_size={world_size}, got {rank}")
        store = TCPStore(host, port, world_size, is_master=(rank == 0), timeout=tsecs, rank=rank)
        own_store = True
    else:
        _int_arg(world_size, "world_size", 1)
        _int_arg(rank, "rank", 0)
        if rank >= world_size:
            raise ValueError(f"rank: expected 0 <= rank < world_size={world_size}, got {rank}")
    _state.generation += 1
    prefix = f"tt_pg/{group_name or 'default_pg'}/{_state.generation}/"
    try:
        pg = ProcessGroup(store, prefix, rank, list(range(world_size)), tsecs, backend)
    except BaseException:
        if own_store:
            store.close()
        raise
    _state.default = pg
    _state.store = store
    _state.own_store = own_store
    _state.groups = [pg]
    _state.group_count = 0
    _state.rank, _state.world_size = rank, world_size
    _state.backend, _state.timeout = backend, tsecs
    GroupMember.WORLD = pg


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Close a group's connections; with no argument, every group and the default one."""
    if group is None or group is _state.default:
        for pg in _state.groups:
            pg.destroy()
        if _state.own_store and _state.store is not None:
            _state.store.close()
        _state.__init__()
        GroupMember.WORLD = None
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    group.destroy()
    if group in _state.groups:
        _state.groups.remove(group)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None):
    """A group of a subset of ranks. Every rank must call it, in the same order, as in torch.

    Ranks outside ``ranks`` get ``GroupMember.NON_GROUP_MEMBER``."""
    _require_init("new_group")
    backend = _state.backend if backend is None else Backend(backend)
    Backend._plugin(backend, "new_group")
    world = _state.world_size
    if ranks is None:
        ranks = list(range(world))
    ranks = sorted(int(r) for r in ranks)
    if len(set(ranks)) != len(ranks) or not ranks or ranks[0] < 0 or ranks[-1] >= world:
        raise ValueError(f"ranks: expected distinct ranks in [0, {world}), got {ranks}")
    tsecs = _state.timeout if timeout is None else _seconds(timeout)
    _state.group_count += 1
    if _state.rank not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    prefix = f"{_state.default.prefix}group{_state.group_count}/"
    pg = ProcessGroup(_state.store, prefix, ranks.index(_state.rank), ranks, tsecs, backend, "new_group")
    _state.groups.append(pg)
    return pg


def _resolve(group, what: str):
    """The ProcessGroup for ``group`` (None = default); None when this rank is not a member."""
    _require_init(what)
    if group is None or group is GroupMember.WORLD:
        return _state.default
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"{what}: group: expected a ProcessGroup or None, got {type(group).__name__}")
    if group not in _state.groups:
        raise DistError(f"{what}: this process group has been destroyed")
    return group


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (-1 when not a member)."""
    pg = _resolve(group, "get_rank")
    return -1 if pg is None else pg.rank()


def get_world_size(group=None) -> int:
    """torch.distributed.get_world_size: the number of ranks in ``group`` (the default one if None); -1 for a
    rank outside it."""
    pg = _resolve(group, "get_world_size")
    return -1 if pg is None else pg.size()


def get_backend(group=None) -> Backend:
    """The backend's name of ``group`` (default: the default group), as torch's."""
    pg = _resolve(group, "get_backend")
    if pg is None:
        raise ValueError("Invalid process group specified")
    return pg.backend_name


def get_process_group_ranks(group) -> list:
    """torch.distributed.get_process_group_ranks: the global ranks of ``group``, in group-rank order."""
    pg = _resolve(group, "get_process_group_ranks")
    return [] if pg is None else list(pg.global_ranks)


def get_global_rank(group, group_rank: int) -> int:
    """torch.distributed.get_global_rank: the global rank of ``group``'s rank ``group_rank``; ValueError when
    it has none."""
    pg = _resolve(group, "get_global_rank")
    if pg is None or not 0 <= group_rank < pg.size():
        raise ValueError(f"group_rank: {group_rank} is not a rank of {pg}")
    return pg.global_ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    """torch.distributed.get_group_rank: ``global_rank``'s rank in ``group``; ValueError when it is not a
    member."""
    pg = _resolve(group, "get_group_rank")
    if pg is None or global_rank not in pg.global_ranks:
        raise ValueError(f"global_rank: {global_rank} is not in {pg}")
    return pg.global_ranks.index(global_rank)


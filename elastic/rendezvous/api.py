"""The rendezvous interface (``torch.distributed.elastic.rendezvous.api``).

It exists so that the agent can ask "who is in this job now?" without knowing how the answer
is found: a ``RendezvousHandler`` returns, per round, a store shared by the round's nodes,
this node's rank among them and their number. Backends are looked up by name in
:data:`rendezvous_handler_registry` (see :mod:`.registry`).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

__all__ = ["RendezvousError", "RendezvousClosedError", "RendezvousTimeoutError", "RendezvousConnectionError",
           "RendezvousStateError", "RendezvousGracefulExitError", "RendezvousStoreInfo", "RendezvousInfo",
           "RendezvousHandler", "RendezvousParameters", "RendezvousHandlerRegistry",
           "rendezvous_handler_registry"]


class RendezvousError(Exception):
    """Base class of the rendezvous errors."""


class RendezvousClosedError(RendezvousError):
    """The rendezvous was closed (the job is over); no new round can start."""


class RendezvousTimeoutError(RendezvousError):
    """A rendezvous did not complete within its join timeout."""


class RendezvousConnectionError(RendezvousError):
    """The rendezvous backend (its store) could not be reached or refused us."""


class RendezvousStateError(RendezvousError):
    """The rendezvous state in the backend is not what this node expects."""


class RendezvousGracefulExitError(RendezvousError):
    """This node is not part of the round and should exit quietly (e.g. the round was full)."""


@dataclass
class RendezvousStoreInfo:
    """Where the workers of the round find their own store: ``master_addr``, ``master_port``."""

    master_addr: str
    master_port: int


@dataclass
class RendezvousInfo:
    """What ``next_rendezvous`` returns: the round's ``store`` (a store whose keys are private to
    the round), this node's ``rank``, the round's ``world_size`` (number of nodes) and
    ``bootstrap_store_info`` (may be ``None``). It unpacks as ``store, rank, world_size``,
    the tuple older PyTorch returned."""

    store: Any
    rank: int
    world_size: int
    bootstrap_store_info: Optional[RendezvousStoreInfo] = None

    def __iter__(self):
        return iter((self.store, self.rank, self.world_size))


class RendezvousHandler(abc.ABC):
    """The main rendezvous interface: implement it to plug a new backend into the agent."""

    @abc.abstractmethod
    def get_backend(self) -> str:
        """The backend's name."""

    @abc.abstractmethod
    def next_rendezvous(self) -> RendezvousInfo:
        """Block until the next round completes; raise ``RendezvousClosedError`` when the
        rendezvous is closed, ``RendezvousTimeoutError``/``RendezvousConnectionError`` else."""

    @abc.abstractmethod
    def is_closed(self) -> bool:
        """Whether the rendezvous was closed."""

    @abc.abstractmethod
    def set_closed(self) -> None:
        """Close the rendezvous: the job is over, nodes must not start another round."""

    @abc.abstractmethod
    def num_nodes_waiting(self) -> int:
        """Nodes that arrived after the current round completed: a reason to start a new round."""

    @abc.abstractmethod
    def get_run_id(self) -> str:
        """The job's run id."""

    @abc.abstractmethod
    def shutdown(self) -> bool:
        """Release this node's resources (heartbeats, connections); ``True`` on success."""

    @property
    def use_agent_store(self) -> bool:
        """Whether the workers may use the store returned by ``next_rendezvous``."""
        return False


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"RendezvousParameters: {name} must be an int, got {value!r}")
    return value


class RendezvousParameters:
    """The parameters to construct a ``RendezvousHandler``: ``backend`` (its name),
    ``endpoint`` (``host[:port]``), ``run_id``, ``min_nodes``, ``max_nodes``, ``local_addr`` and
    any backend option as a keyword (``join_timeout=``, ``last_call_timeout=`` ...)."""

    def __init__(self, backend: str, endpoint: str, run_id: str, min_nodes: int, max_nodes: int,
                 local_addr: Optional[str] = None, **kwargs):
        if not backend or not isinstance(backend, str):
            raise ValueError("RendezvousParameters: backend must be a non-empty string")
        if endpoint is None or not isinstance(endpoint, str):
            raise ValueError("RendezvousParameters: endpoint must be a string")
        if not run_id or not isinstance(run_id, str):
            raise ValueError("RendezvousParameters: run_id must be a non-empty string")
        _positive_int(min_nodes, "min_nodes")
        _positive_int(max_nodes, "max_nodes")
        if min_nodes < 1:
            raise ValueError(f"RendezvousParameters: min_nodes must be at least 1, got {min_nodes}")
        if max_nodes < min_nodes:
            raise ValueError(f"RendezvousParameters: max_nodes ({max_nodes}) must be at least "
                             f"min_nodes ({min_nodes})")
        self.backend = backend
        self.endpoint = endpoint
        self.run_id = run_id
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.config: Dict[str, Any] = kwargs
        self.local_addr = local_addr

    def get(self, key: str, default: Any = None) -> Any:
        """The backend-specific option ``key`` from ``config``, or ``default``."""
        return self.config.get(key, default)

    def get_as_bool(self, key: str, default: Optional[bool] = None) -> Optional[bool]:
        """The option as a bool: bools and ints as Python reads them, strings 1/true/t/yes/y and 0/false/f/no/n (any
        case); anything else is a ValueError, as torch."""
        value = self.get(key, default)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            return value != 0
        if isinstance(value, str):
            if value.lower() in ("1", "true", "t", "yes", "y"):
                return True
            if value.lower() in ("0", "false", "f", "no", "n"):
                return False
        raise ValueError(f"The rendezvous configuration option '{key}' does not represent a valid boolean value.")

    def get_as_int(self, key: str, default: Optional[int] = None) -> Optional[int]:
        """The option as an int; a value int() refuses is a ValueError naming the key, as torch."""
        value = self.get(key, default)
        if value is None:
            return value
        try:
            return int(value)
        except ValueError as e:
            raise ValueError(f"The rendezvous configuration option '{key}' does not represent a valid "
                             f"integer value.") from e

    def get_as_float(self, key: str, default: Optional[float] = None) -> Optional[float]:
        """The option as a float; a value float() refuses is a ValueError naming the key."""
        value = self.get(key, default)
        if value is None:
            return value
        try:
            out = float(value)
        except ValueError as e:
            raise ValueError(f"The rendezvous configuration option '{key}' does not represent a valid "
                             f"number.") from e
        if not out > 0:
            raise ValueError(f"The rendezvous configuration option '{key}' must be positive, got {value!r}")
        return out

    def __repr__(self):
        return (f"RendezvousParameters(backend={self.backend!r}, endpoint={self.endpoint!r}, run_id={self.run_id!r}, "
                f"min_nodes={self.min_nodes}, max_nodes={self.max_nodes}, config={self.config!r})")


RendezvousHandlerCreator = Callable[[RendezvousParameters], RendezvousHandler]


class RendezvousHandlerRegistry:
    """Backend name -> a function creating its handler from ``RendezvousParameters``."""

    def __init__(self):
        self._registry: Dict[str, RendezvousHandlerCreator] = {}

    def register(self, backend: str, creator: RendezvousHandlerCreator) -> None:
        """Make ``creator`` the factory of backend ``backend``; registering another creator under a taken name is a
        ValueError."""
        if not backend:
            raise ValueError("The rendezvous backend name must be a non-empty string.")
        current = self._registry.get(backend)
        if current is not None and current is not creator:
            raise ValueError(f"The rendezvous backend '{backend}' cannot be registered with '{creator}' "
                             f"as it is already registered with '{current}'.")
        self._registry[backend] = creator

    def create_handler(self, params: RendezvousParameters) -> RendezvousHandler:
        """A handler for ``params.backend`` from its registered creator; an unknown backend is a ValueError listing
        the known ones."""
        try:
            creator = self._registry[params.backend]
        except KeyError:
            raise ValueError(f"The rendezvous backend '{params.backend}' is not registered. Did you forget "
                             f"to call `register`? Known backends: {sorted(self._registry)}") from None
        handler = creator(params)
        if handler.get_backend() != params.backend:
            raise RuntimeError(f"The rendezvous backend '{handler.get_backend()}' does not match the requested "
                               f"backend '{params.backend}'.")
        return handler


rendezvous_handler_registry = RendezvousHandlerRegistry()

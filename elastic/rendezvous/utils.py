"""Helpers shared by the rendezvous backends: endpoints, the round-private store view, and
creating (or joining) the authenticated ``TCPStore`` a rendezvous runs on."""

from __future__ import annotations

import ipaddress
import socket
from datetime import timedelta
from typing import List, Optional, Tuple

from ...comm import SECRET_ENV, DistError, DistStoreError, TCPStore
from .api import RendezvousConnectionError

__all__ = ["parse_rendezvous_endpoint", "PrefixStore", "is_local_host", "connect_store"]


def parse_rendezvous_endpoint(endpoint: Optional[str], default_port: int) -> Tuple[str, int]:
    """``"host[:port]"`` (``[v6]:port`` too) -> ``(host, port)``; an empty endpoint is ``localhost``."""
    endpoint = (endpoint or "").strip()
    if not endpoint:
        return "localhost", default_port
    if endpoint.startswith("["):
        host, _, rest = endpoint[1:].partition("]")
        port_s = rest[1:] if rest.startswith(":") else ""
    elif endpoint.count(":") == 1:
        host, port_s = endpoint.split(":")
    else:
        host, port_s = endpoint, ""
    if not host:
        raise ValueError(f"The hostname of the rendezvous endpoint '{endpoint}' must be a dot-separated list "
                         f"of labels, an IPv4 address, or an IPv6 address.")
    if not port_s:
        return host, default_port
    try:
        port = int(port_s)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"The port number of the rendezvous endpoint '{endpoint}' must be an integer between "
                         f"0 and 65536.")
    return host, port


def is_local_host(host: str) -> bool:
    """Whether ``host`` names this machine (loopback, its hostname, or one of its addresses)."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass
    try:
        mine = {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None)}
        theirs = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(mine & theirs) or all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in theirs)


class PrefixStore:
    """A view of ``store`` whose keys all start with ``prefix + "/"`` (``torch.distributed.PrefixStore``)."""

    def __init__(self, prefix: str, store):
        self.prefix = prefix
        self.underlying_store = store

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    def set(self, key, value):
        """Store.set on the prefixed key."""
        self.underlying_store.set(self._k(key), value)

    def get(self, key):
        """Store.get of the prefixed key."""
        return self.underlying_store.get(self._k(key))

    def add(self, key, amount):
        """Store.add on the prefixed key."""
        return self.underlying_store.add(self._k(key), amount)

    def compare_set(self, key, expected, desired):
        """Store.compare_set on the prefixed key."""
        return self.underlying_store.compare_set(self._k(key), expected, desired)

    def check(self, keys: List[str]) -> bool:
        """Store.check of the prefixed keys."""
        return self.underlying_store.check([self._k(k) for k in keys])

    def wait(self, keys: List[str], timeout=None):
        """Store.wait for the prefixed keys."""
        self.underlying_store.wait([self._k(k) for k in keys], timeout)

    def delete_key(self, key) -> bool:
        """Store.delete_key of the prefixed key."""
        return self.underlying_store.delete_key(self._k(key))

    def multi_get(self, keys):
        """Store.multi_get of the prefixed keys."""
        return self.underlying_store.multi_get([self._k(k) for k in keys])

    def multi_set(self, keys, values):
        """Store.multi_set of the prefixed keys."""
        self.underlying_store.multi_set([self._k(k) for k in keys], values)

    @property
    def timeout(self):
        """The underlying store's timeout."""
        return self.underlying_store.timeout


def connect_store(host: str, port: int, is_host: Optional[bool], timeout: float, what: str):
    """The rendezvous store at ``host:port``: hosted here when ``is_host`` (``None``: when
    ``host`` is this machine and the port is free), joined as a client otherwise.

    Returns ``(store, hosted)``. Raises ``RendezvousConnectionError`` naming the endpoint when
    it cannot be reached within ``timeout`` s or refuses our secret (``TRITENSOR_COMM_SECRET``).
    """
    tout = timedelta(seconds=timeout)
    if is_host is None:
        is_host = is_local_host(host)
    if is_host:
        try:
            return TCPStore(host, port, is_master=True, wait_for_workers=False, timeout=tout), True
        except DistError:  # the port is taken: most likely another node of this machine hosts it
            if port == 0:
                raise
    try:
        return TCPStore(host, port, is_master=False, timeout=tout), False
    except ConnectionError as e:  # AuthenticationError: no secret set here
        raise RendezvousConnectionError(f"{what}: cannot join the store at {host}:{port}: {e}") from None
    except DistStoreError as e:  # the handshake failed: a different secret
        raise RendezvousConnectionError(
                f"{what}: the store at {host}:{port} refused this node's secret: every node needs the same "
                f"{SECRET_ENV} ({e})") from None
    except DistError as e:
        raise RendezvousConnectionError(
            f"{what}: no store answered at {host}:{port} within {timeout:g}s ({e})") from None

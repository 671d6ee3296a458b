"""Shared-secret authentication for every socket tritensor listens on.

Why: a store or process group that listens on a port executes whatever its peers ask of
it (set keys, overwrite tensors). Before a single byte of a request is read, the peer
must prove it holds the job's secret. The proof is an HMAC-SHA256 challenge-response in
both directions with fixed-size messages, so nothing from an unauthenticated peer is ever
parsed, unpickled or acted on: the server reads exactly ``CLIENT_REPLY_LEN`` bytes and
compares a digest with :func:`hmac.compare_digest`.

Where the secret comes from: ``TRITENSOR_COMM_SECRET`` in the environment. Whoever starts
a job (the launcher, or the process that creates the master :class:`TCPStore`) calls
:func:`ensure_secret`, which generates one when none is set and puts it into
``os.environ`` so that child processes inherit it.

Wire protocol (``role`` binds the exchange to one service, e.g. ``b"store"`` or ``b"pg"``)::

    server -> client   MAGIC(8) | server_nonce(32)
    client -> server   MAGIC(8) | client_nonce(32) | HMAC(secret, b"C" role sn cn)(32)
    server -> client   HMAC(secret, b"S" role cn sn)(32)        (only when the client's MAC matched)
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import time

__all__ = [
    "SECRET_ENV",
    "AuthenticationError",
    "get_secret",
    "ensure_secret",
    "client_handshake",
    "server_handshake",
]

SECRET_ENV = "TRITENSOR_COMM_SECRET"
MAGIC = b"TTAUTH\x00\x01"  # 8 bytes: name + protocol version
NONCE_LEN = 32
MAC_LEN = 32
SERVER_HELLO_LEN = len(MAGIC) + NONCE_LEN
CLIENT_REPLY_LEN = len(MAGIC) + NONCE_LEN + MAC_LEN


class AuthenticationError(ConnectionError):
    """The peer did not prove it holds the job's secret (or we could not prove it to them)."""


def _as_bytes(secret) -> bytes:
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not isinstance(secret, (bytes, bytearray)) or len(secret) == 0:
        raise ValueError("secret: expected a non-empty str or bytes")
    return bytes(secret)


def get_secret(secret=None) -> bytes:
    """The secret to authenticate with: ``secret`` if given, else ``$TRITENSOR_COMM_SECRET``."""
    if secret is not None:
        return _as_bytes(secret)
    value = os.environ.get(SECRET_ENV)
    if not value:
        raise AuthenticationError(
            f"{SECRET_ENV} is not set: tritensor's sockets only talk to peers that share a "
            "secret. The process that starts the job (the master TCPStore, the launcher) "
            f"generates one; hand it down to every worker in {SECRET_ENV}."
        )
    return _as_bytes(value)


def ensure_secret() -> bytes:
    """Return the job's secret, generating one into ``os.environ`` when none is set yet."""
    if not os.environ.get(SECRET_ENV):
        os.environ[SECRET_ENV] = secrets.token_hex(32)
    return get_secret()


def _mac(secret: bytes, direction: bytes, role: bytes, a: bytes, b: bytes) -> bytes:
    return hmac.new(secret, direction + role + b"\x00" + a + b, hashlib.sha256).digest()


def recv_exact(sock: socket.socket, n: int, deadline: float, what: str) -> bytes:
    """Read exactly ``n`` bytes from a blocking socket before ``deadline`` (time.monotonic)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"timed out waiting for {what}")
        sock.settimeout(remaining)
        try:
            k = sock.recv_into(view[got:])
        except socket.timeout:
            raise TimeoutError(f"timed out waiting for {what}") from None
        if k == 0:
            raise ConnectionError(f"connection closed while waiting for {what}")
        got += k
    return bytes(buf)


def _sendall(sock: socket.socket, data: bytes, deadline: float, what: str) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError(f"timed out sending {what}")
    sock.settimeout(remaining)
    try:
        sock.sendall(data)
    except socket.timeout:
        raise TimeoutError(f"timed out sending {what}") from None


def client_handshake(sock: socket.socket, secret: bytes, role: bytes, timeout: float) -> None:
    """Prove to the server that we hold ``secret`` and check that the server holds it too.

    Raises :class:`AuthenticationError` when the server's answer is wrong or it closes the
    connection (which is how a server refuses a wrong secret). A connection *reset* is left
    as :class:`ConnectionResetError`: servers reset unauthenticated connections they shed
    under load (too many strangers, a handshake deadline), which says nothing about the
    secret, so the caller may reconnect."""
    deadline = time.monotonic() + timeout
    try:
        hello = recv_exact(sock, SERVER_HELLO_LEN, deadline, "the server's challenge")
    except ConnectionResetError:
        raise  # a reset is how a busy server sheds unauthenticated connections: not a verdict, retry
    except ConnectionError as e:
        raise AuthenticationError(f"the server closed the connection before authenticating: {e}") from None
    if hello[: len(MAGIC)] != MAGIC:
        raise AuthenticationError("the server does not speak tritensor's authentication protocol")
    server_nonce = hello[len(MAGIC):]
    client_nonce = secrets.token_bytes(NONCE_LEN)
    mac = _mac(secret, b"C", role, server_nonce, client_nonce)
    _sendall(sock, MAGIC + client_nonce + mac, deadline, "the authentication reply")
    try:
        answer = recv_exact(sock, MAC_LEN, deadline, "the server's proof of the secret")
    except ConnectionResetError:
        raise  # dropped before our reply was judged (a refusal is an orderly close)
    except ConnectionError:
        raise AuthenticationError(
            f"the server refused our credentials (is {SECRET_ENV} the same on every process?)"
        ) from None
    if not hmac.compare_digest(answer, _mac(secret, b"S", role, client_nonce, server_nonce)):
        raise AuthenticationError("the server failed to prove it holds the job's secret")


def server_challenge() -> tuple[bytes, bytes]:
    """(bytes to send, server nonce) for the first server message; used by event-driven servers."""
    nonce = secrets.token_bytes(NONCE_LEN)
    return MAGIC + nonce, nonce


def server_verify(secret: bytes, role: bytes, server_nonce: bytes, reply: bytes) -> bytes | None:
    """Check the client's fixed-size reply; return the proof to send back, or None to refuse."""
    if len(reply) != CLIENT_REPLY_LEN or reply[: len(MAGIC)] != MAGIC:
        return None
    client_nonce = reply[len(MAGIC): len(MAGIC) + NONCE_LEN]
    mac = reply[len(MAGIC) + NONCE_LEN:]
    if not hmac.compare_digest(mac, _mac(secret, b"C", role, server_nonce, client_nonce)):
        return None
    return _mac(secret, b"S", role, client_nonce, server_nonce)


def server_handshake(sock: socket.socket, secret: bytes, role: bytes, timeout: float) -> None:
    """Blocking server side of the handshake; raises AuthenticationError on a bad peer."""
    deadline = time.monotonic() + timeout
    hello, nonce = server_challenge()
    _sendall(sock, hello, deadline, "the authentication challenge")
    reply = recv_exact(sock, CLIENT_REPLY_LEN, deadline, "the client's authentication reply")
    proof = server_verify(secret, role, nonce, reply)
    if proof is None:
        raise AuthenticationError("a peer failed authentication (wrong or missing secret)")
    _sendall(sock, proof, deadline, "the authentication proof")

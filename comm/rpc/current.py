"""This process's RPC agent, between ``init_rpc`` and ``shutdown`` (one per process, as in torch).

It sits beneath both ``api`` (which starts and stops the agent) and ``rref`` (``RRef(value)``
needs the agent to own its value), so neither has to import the other.
"""
from __future__ import annotations

_agent = None


def set_agent(agent) -> None:
    """Make ``agent`` this process's agent (``None`` after shutdown)."""
    global _agent
    _agent = agent


def agent():
    """The current agent, or None."""
    return _agent


def require(what: str):
    """The current agent; a clear error naming ``what`` when RPC is not initialized."""
    if _agent is None:
        raise RuntimeError(f"{what}: RPC is not initialized; call tritensor.comm.rpc.init_rpc() first")
    return _agent

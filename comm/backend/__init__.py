"""The built-in "tcp" backend beneath tritensor.comm's public API: how bytes move between ranks.

Why a package of its own: ``tritensor.comm`` is torch.distributed's public API (collectives,
process groups, the store, Work, GradBucket) and sits over its backends, as torch.distributed's
Python API sits over its c10d backends; the collectives reach a backend only through the
interface of :mod:`tritensor.comm.backend_api`. :mod:`.tcp` is this package's backend (the
:class:`~.tcp.TCPBackend` that implements that interface and registers itself as "tcp"); the
rest is its transport. Nothing here is a public name; users, the DDP hooks and RPC reach it
through comm's public modules (RPC's agent, which has sockets of its own, uses the handshake and
the listener gate, and the store runs its server from here).

Connections: :mod:`.auth` (the shared-secret HMAC handshake), :mod:`.gate` (letting
authenticated peers in through a listener strangers can reach: process groups' and RPC's),
:mod:`.mesh` (connecting the ranks of a group), :mod:`.store_server` (the master store's event
loop). Messages: :mod:`.framing` (binary frames and data headers). The engine:
:mod:`.transport` composes :mod:`.peer_io` (peer sockets, the poll loop; :mod:`.peer` holds a
peer and its posted requests), the Work bookkeeping of :mod:`tritensor.comm.work` and
:mod:`.failures` (aborts, error texts, reporting to the store). Algorithms: :mod:`.plan` (what
every algorithm shares), :mod:`.ring` (the pipelined ring) and :mod:`.direct` (direct
exchanges); :mod:`.staging` turns tensors into host buffers.

Beneath the public API means: these modules import nothing of comm but each other,
:mod:`tritensor.comm.errors` (the exceptions they raise), :mod:`tritensor.comm.work` (the
Work handles they complete), :mod:`tritensor.comm.reduce_op` and
:mod:`tritensor.comm.backend_api` (the interface :mod:`.tcp` implements); and no public module
imports them but the package (which loads :mod:`.tcp`) and the store (its server);
``tests/test_layering.py`` checks it.
"""

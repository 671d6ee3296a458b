"""The "tcp" backend (alias "gloo"): tritensor.comm's collectives over authenticated sockets.

Why this module exists: it is the one place where the TCP transport meets the backend
interface (:class:`tritensor.comm.backend_api.CommBackend`). A group's :class:`TCPBackend`
connects its ranks (:func:`.mesh.connect_mesh`), owns the group's engine
(:class:`.transport.Engine`), and for each operation turns its tensors into host buffers
(:mod:`.staging`), picks an algorithm (:mod:`.direct` or :mod:`.ring`; :func:`.plan.use_direct`
decides for all_reduce, all_gather and reduce_scatter) and posts the plan (:class:`.plan.Plan`,
whose headers :mod:`.framing` packs) to the engine. The work keeps the plan, and so the
caller's tensors, alive until it completes.

The algorithms, in short: ``all_reduce``, ``all_gather`` and ``reduce_scatter`` use a direct
exchange for small sizes (one network latency) and a chunked, pipelined ring for large ones;
``broadcast``, ``reduce``, ``gather``, ``scatter`` are one-to-all or all-to-one, and
``all_to_all`` is pairwise; these end with zero-byte confirmations between all ranks, so a rank
whose sizes disagree makes *every* rank's call raise. ``barrier`` is a direct zero-byte
exchange. fp16 and bf16 are reduced in fp32 and rounded once at the end.

Listening sockets bind to loopback when the store's host is a loopback address, else to the
local address this host uses to reach the store; ``TRITENSOR_COMM_BIND_ADDR`` overrides both.
Importing this module registers the backend (``Backend.register_backend("tcp", ...)``).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading

import numpy as np

from ..backend_api import Backend, CommBackend
from ..reduce_op import ReduceOp
from . import auth, direct, ring
from .failures import REPORT_TIMEOUT
from .framing import (ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BARRIER, BROADCAST, GATHER, P2P, REDUCE, REDUCE_SCATTER,
                      SCATTER)
from .mesh import connect_mesh
from .plan import UFUNCS, Plan, use_direct
from .staging import HostBuffer
from .transport import Engine

__all__ = ["TCPBackend", "BIND_ENV"]

BIND_ENV = "TRITENSOR_COMM_BIND_ADDR"


def _is_loopback(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback for i in infos)


def _bind_host(master_host: str, store) -> str:
    env = os.environ.get(BIND_ENV)
    if env:
        return env
    if _is_loopback(master_host):
        return "127.0.0.1"
    sock = getattr(store, "_sock", None)
    if sock is not None:
        return sock.getsockname()[0]
    return "127.0.0.1"


class TCPBackend(CommBackend):
    """Ranks ``global_ranks`` connected pairwise, and the engine that moves data between them.

    Every group gets its own key prefix in the store and its own connections, so operations
    on different groups never interleave on one socket."""

    def __init__(self, store, prefix: str, rank: int, global_ranks: list, timeout: float):
        self.store = store
        self.prefix = prefix
        self._rank = rank
        self._size = len(global_ranks)
        self.global_ranks = list(global_ranks)
        self.timeout = timeout
        self._seq = 0
        self._p2p_sent: dict[int, int] = {}
        # Receives posted per source ("any" for src=None), to name them; the sequence numbers
        # that headers check are counted by the engine as messages arrive (an any-source
        # receive learns its sender only then).
        self._p2p_recvd: dict = {}
        self.scratch_pool: list = []  # reusable ring buffers (see plan.Plan.scratch)
        secret = getattr(store, "_secret", None) or auth.get_secret()
        bind = _bind_host(getattr(store, "host", "127.0.0.1"), store)
        peers = connect_mesh(store, prefix, rank, self._size, self.global_ranks, bind, secret, timeout)
        self.engine = Engine(rank, self.global_ranks[rank], peers, self._report_failure,
                             group_desc=prefix.strip("/"))

    def rank(self) -> int:
        """This process's rank in the group."""
        return self._rank

    def size(self) -> int:
        """The number of ranks in the group."""
        return self._size

    def name(self) -> str:
        """'tcp': the name the backend is registered under."""
        return "tcp"

    def next_seq(self) -> int:
        """The next collective's sequence number: every rank numbers its collectives alike, and headers carry
        it so a mismatch is caught."""
        self._seq += 1
        return self._seq

    def next_p2p(self, table: dict, peer: int) -> int:
        """The next sequence number of point-to-point messages with ``peer`` in ``table`` (sends or receives)."""
        table[peer] = table.get(peer, 0) + 1
        return table[peer]

    def _report_failure(self, reason: str, budget: float) -> str | None:
        """Record the first failure of this group in the store; return the first one recorded,
        or None when it is this one or the store did not answer within ``budget`` seconds.

        The request runs on a daemon thread and this waits at most ``budget``: the store's
        host may be the process that hung, and a client call can take longer than asked (it
        reconnects, and allows the server slack to answer). A late report still lands in the
        store for the other ranks to read."""
        mine = f"rank {self.global_ranks[self._rank]}: {reason}"
        out: list = []
        done = threading.Event()

        def report():
            try:
                quick = getattr(self.store, "_compare_set_quick", None)  # bounded even if the store host died
                if quick is not None:
                    out.append(quick(self.prefix + "abort", "", mine, timeout=REPORT_TIMEOUT))
                else:
                    out.append(self.store.compare_set(self.prefix + "abort", "", mine))
            except Exception:  # the store may be gone with the rank that hosted it
                pass
            finally:
                done.set()

        threading.Thread(target=report, name="tritensor-comm-report", daemon=True).start()
        if not done.wait(budget) or not out:
            return None
        first = out[0]
        first = first.decode("utf-8", "replace") if isinstance(first, bytes) else first
        return None if first == mine else first

    def shutdown(self):
        """Stop the engine: close the sockets and end its thread (destroy_process_group)."""
        self.engine.shutdown()

    def _run(self, build, async_op):
        """Post an operation under the engine lock; its Work (waited for by the caller unless
        ``async_op``, in which case the engine's background thread drives it meanwhile).

        ``build`` is the operation's plan: a closure over its arguments (their
        :class:`~.staging.HostBuffer`, which hold the caller's tensors). The work keeps it
        until the operation completes, so an asynchronous operation's inputs stay alive while its
        bytes are in flight, whatever the caller drops before ``wait()`` (as torch's work objects
        hold their tensors)."""
        eng = self.engine
        with eng.posting():
            op = build()
            op.work._keep = build
            op.then(op.release_scratch)
            eng.finish_posting(op.work, async_op)
        if async_op:
            eng._flush_notifications()  # it may have completed while posting (world size 1)
        return op.work

    # ------------------------------------------------------------------------ all_reduce

    def allreduce(self, tensors, opts):
        """CommBackend.allreduce over sockets: direct exchange for small tensors, a ring for large ones; a
        device tensor staged through host memory, summed in the policy's accumulator."""
        tensor = tensors[0]
        buf = HostBuffer(tensor, "tensor", write=True, defer=True)
        op = opts.reduceOp
        ufunc, avg = UFUNCS[op], op == ReduceOp.AVG

        def build():
            o = Plan(self, ALL_REDUCE, "all_reduce", buf.dtype, buf.numel, op, [tensor])
            algo = direct if o.n > 1 and use_direct(o, buf.flat.nbytes) else ring
            algo.all_reduce(o, buf, ufunc, avg)
            o.then(buf.writeback)
            return o

        return self._run(build, opts.asyncOp)

    # ------------------------------------------------------------------- rooted collectives

    def broadcast(self, tensors, opts):
        """CommBackend.broadcast: the root's tensor sent to every rank."""
        tensor, root = tensors[0], opts.rootRank
        buf = HostBuffer(tensor, "tensor", write=self._rank != root)

        def build():
            o = Plan(self, BROADCAST, "broadcast", buf.dtype, buf.numel, 0, [tensor], root=root)
            direct.broadcast(o, root, buf)
            return o

        return self._run(build, opts.asyncOp)

    def reduce(self, tensors, opts):
        """CommBackend.reduce: every rank's tensor reduced into the root's."""
        tensor, root, op = tensors[0], opts.rootRank, opts.reduceOp
        buf = HostBuffer(tensor, "tensor", write=self._rank == root)

        def build():
            o = Plan(self, REDUCE, "reduce", buf.dtype, buf.numel, op, [tensor], root=root)
            direct.reduce(o, root, buf, UFUNCS[op], op == ReduceOp.AVG)
            return o

        return self._run(build, opts.asyncOp)

    def gather(self, output_tensors, input_tensors, opts):
        """CommBackend.gather: every rank's tensor into the root's gather_list."""
        root = opts.rootRank
        buf = HostBuffer(input_tensors[0], "tensor", write=False)
        gather_list = output_tensors[0] if output_tensors else None
        outs = None if gather_list is None else [HostBuffer(t, f"gather_list[{i}]", write=True)
                                                 for i, t in enumerate(gather_list)]

        def build():
            o = Plan(self, GATHER, "gather", buf.dtype, buf.numel, 0, gather_list, root=root)
            direct.gather_or_scatter(o, root, buf, outs, to_root=True)
            return o

        return self._run(build, opts.asyncOp)

    def scatter(self, output_tensors, input_tensors, opts):
        """CommBackend.scatter: the root's scatter_list, one tensor to each rank."""
        root, tensor = opts.rootRank, output_tensors[0]
        buf = HostBuffer(tensor, "tensor", write=True)
        ins = None if not input_tensors else [HostBuffer(t, f"scatter_list[{i}]", write=False)
                                              for i, t in enumerate(input_tensors[0])]

        def build():
            o = Plan(self, SCATTER, "scatter", buf.dtype, buf.numel, 0, [tensor], root=root)
            direct.gather_or_scatter(o, root, buf, ins, to_root=False)
            return o

        return self._run(build, opts.asyncOp)

    # ---------------------------------------------------------------- gather / scatter all

    def _all_gather_plan(self, outs, buf, what, result, writebacks):
        """The plan of an all_gather of ``buf`` into ``outs`` (n flat arrays, one per rank)."""
        def build():
            o = Plan(self, ALL_GATHER, what, buf.dtype, buf.numel, 0, result)
            if o.n > 1 and use_direct(o, buf.flat.nbytes):
                direct.all_gather(o, outs, buf.flat)
            else:
                ring.all_gather(o, outs, buf.flat)
            for b in writebacks:
                o.then(b.writeback)
            return o

        return build

    def allgather(self, output_tensors, input_tensors, opts):
        """CommBackend.allgather: every rank's tensor into every rank's tensor_list."""
        tensor_list = output_tensors[0]
        buf = HostBuffer(input_tensors[0], "tensor", write=False)
        outs = [HostBuffer(t, f"tensor_list[{i}]", write=True) for i, t in enumerate(tensor_list)]
        build = self._all_gather_plan([b.flat for b in outs], buf, "all_gather", list(tensor_list), outs)
        return self._run(build, opts.asyncOp)

    def _allgather_base(self, output_tensor, input_tensor, opts):
        buf = HostBuffer(input_tensor, "input_tensor", write=False)
        out = HostBuffer(output_tensor, "output_tensor", write=True)
        segs = [out.flat[i * buf.numel:(i + 1) * buf.numel] for i in range(self._size)]
        build = self._all_gather_plan(segs, buf, "all_gather_into_tensor", [output_tensor], [out])
        return self._run(build, opts.asyncOp)

    def _reduce_scatter_plan(self, out, inputs, op, what, result):
        """The plan of a reduce_scatter into ``out``; ``inputs()``: the n flat input views, taken
        from the input host buffers when the plan runs (so the plan holds them, see :meth:`_run`)."""
        ufunc, avg = UFUNCS[op], op == ReduceOp.AVG

        def build():
            ins = inputs()
            o = Plan(self, REDUCE_SCATTER, what, out.dtype, out.numel, op, result)
            algo = direct if o.n > 1 and use_direct(o, out.flat.nbytes) else ring
            algo.reduce_scatter(o, out, ins, ufunc, avg)
            o.then(out.writeback)
            return o

        return build

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        """CommBackend.reduce_scatter: input_list[i] of every rank reduced into rank i's output."""
        output = output_tensors[0]
        out = HostBuffer(output, "output", write=True)
        ins = [HostBuffer(t, f"input_list[{i}]", write=False) for i, t in enumerate(input_tensors[0])]
        build = self._reduce_scatter_plan(out, lambda: [b.flat for b in ins], opts.reduceOp, "reduce_scatter",
                                          [output])
        return self._run(build, opts.asyncOp)

    def _reduce_scatter_base(self, output_tensor, input_tensor, opts):
        out = HostBuffer(output_tensor, "output", write=True)
        inp = HostBuffer(input_tensor, "input", write=False)
        n = out.numel
        build = self._reduce_scatter_plan(out, lambda: [inp.flat[i * n:(i + 1) * n] for i in range(self._size)],
                                          opts.reduceOp, "reduce_scatter_tensor", [output_tensor])
        return self._run(build, opts.asyncOp)

    def alltoall(self, output_tensors, input_tensors, opts):
        """CommBackend.alltoall: input i of every rank to rank i, output j from rank j."""
        outs = [HostBuffer(t, f"output_tensor_list[{i}]", write=True) for i, t in enumerate(output_tensors)]
        ins = [HostBuffer(t, f"input_tensor_list[{i}]", write=False) for i, t in enumerate(input_tensors)]

        def build():
            o = Plan(self, ALL_TO_ALL, "all_to_all", ins[0].dtype, 0, 0, list(output_tensors))
            direct.all_to_all(o, outs, ins)
            return o

        return self._run(build, opts.asyncOp)

    def barrier(self, opts):
        """CommBackend.barrier: completes when every rank has reached it."""
        def build():
            o = Plan(self, BARRIER, "barrier", np.dtype(np.uint8), 0)
            direct.barrier(o)
            return o

        return self._run(build, opts.asyncOp)

    # --------------------------------------------------------------------- point to point

    def send(self, tensors, dstRank, tag):
        """Messages between two ranks are matched in the order they are posted (as with NCCL);
        the tag is checked, not used to reorder."""
        tensor, peer = tensors[0], dstRank
        buf = HostBuffer(tensor, "tensor", write=False)

        def build():
            o = Plan(self, P2P, f"send to rank {self.global_ranks[peer]}", buf.dtype, buf.numel, 0, [tensor],
                     seq=self.next_p2p(self._p2p_sent, peer))
            direct.send(o, peer, tag, buf)
            return o

        return self._run(build, True)

    def recv(self, tensors, srcRank, tag):
        """CommBackend.recv: the next message from ``srcRank`` under ``tag`` into the tensor."""
        return self._recv(tensors[0], srcRank, tag)

    def recv_anysource(self, tensors, tag):
        """CommBackend.recv_anysource: the next message under ``tag`` from whichever rank sends first."""
        return self._recv(tensors[0], None, tag)

    def _recv(self, tensor, peer, tag):
        """A receive from group rank ``peer``, or from any rank when it is None: the first
        send/recv message addressed to this rank that carries ``tag`` and is not claimed by a
        receive posted before it (MPI's rule; see :mod:`.peer_io`)."""
        buf = HostBuffer(tensor, "tensor", write=True)

        def build():
            # The "#n" in the name counts receives posted from that source.
            if peer is None:
                o = Plan(self, P2P, "recv from any rank", buf.dtype, buf.numel, 0, [tensor],
                         seq=self.next_p2p(self._p2p_recvd, "any"))
            else:
                o = Plan(self, P2P, f"recv from rank {self.global_ranks[peer]}", buf.dtype, buf.numel, 0, [tensor],
                         seq=self.next_p2p(self._p2p_recvd, peer))
            direct.recv(o, peer, tag, buf)
            return o

        return self._run(build, True)

    def __repr__(self):
        return f"TCPBackend(ranks={self.global_ranks}, rank={self._rank})"


def _create(opts, pg_options=None) -> TCPBackend:
    """The registered factory (torch's extended API: the group's global ranks and key prefix)."""
    return TCPBackend(opts.store, opts.group_id, opts.group_rank, opts.global_ranks_in_group,
                      opts.timeout.total_seconds())


Backend.register_backend(Backend.TCP, _create, extended_api=True, devices=["cpu", "cuda"])

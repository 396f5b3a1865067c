"""The MPI engine for the parameter-server optimizers (mpi4py, launched by ``mpirun``).

``mpirun -np N+1``: rank 0 runs the parameter server, ranks 1..N are the replicas
(worker id = rank - 1). It is the same server core as on Spark
(:class:`~distbench.ps_async.server.ParameterServer`: validation, logical clock,
staleness, per-(worker, sequence) idempotency, barrier rounds for EASGD and model
averaging) and the same client logic (:class:`~distbench.ps_async.client.PSClient`, the
HELLO/AUTH handshake with the per-run secret included); only the transport differs:
:class:`MPIServerTransport` and :class:`MPIClientTransport` implement the interfaces of
:mod:`distbench.ps_async.transport` with mpi4py's buffer (uppercase) API: never pickle.
:class:`MPIParameterServer` and :class:`MPIClient` are the server and client with these
transports injected.

A message is a metadata send (tag ``*_META``: int64 array ``[n_frames, size_0, ...,
size_{n-1}]``, fixed length) followed by one ``uint8`` send per frame (tag
``*_DATA``). The receiver checks the metadata (frame count, each size, total against
the message-size bound) before allocating, then receives each frame into a buffer of
exactly that size; the server core then validates the frames as it does ZeroMQ's.

Synchronous rounds go through the server core's barrier rather than an MPI collective
on purpose: that way a bad contribution is rejected for its sender alone, and the
staleness, rejection and idempotency accounting is identical on both engines.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import numpy as np

from distbench.ps_async import protocol as P
from distbench.ps_async.client import PSClient
from distbench.ps_async.server import ParameterServer
from distbench.ps_async.transport import ClientTransport, Incoming, ServerTransport

_LOG = logging.getLogger(__name__)

REQ_META, REQ_DATA, REP_META, REP_DATA, RESULT = 11, 12, 21, 22, 31
META_LEN = P.MAX_TENSORS + 2
SERVER_RANK = 0
ADDRESS = "mpi://rank0"


def _comm() -> Any:
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _message(frames: list) -> tuple[np.ndarray, list[np.ndarray]]:
    """The metadata array and the ``uint8`` views of one message's frames."""
    bufs = [np.frombuffer(P.frame_view(f), dtype=np.uint8) for f in frames]
    if len(bufs) > META_LEN - 1:
        raise P.ProtocolError("count", f"{len(bufs)} frames, at most {META_LEN - 1}")
    meta = np.zeros(META_LEN, dtype=np.int64)
    meta[0] = len(bufs)
    meta[1:1 + len(bufs)] = [b.size for b in bufs]
    return meta, bufs


def send_frames(comm: Any, frames: list, dest: int, meta_tag: int, data_tag: int) -> int:
    """Send one message's frames to ``dest``; returns the bytes sent (frames only)."""
    meta, bufs = _message(frames)
    comm.Send([meta, len(meta), _mpi_int64()], dest=dest, tag=meta_tag)
    for b in bufs:
        comm.Send([b, b.size, _mpi_byte()], dest=dest, tag=data_tag)
    return int(sum(b.size for b in bufs))


def isend_frames(comm: Any, frames: list, dest: int, meta_tag: int, data_tag: int) -> tuple[list, list]:
    """Start sending one message's frames to ``dest`` without waiting for it to arrive.

    A blocking ``MPI_Send`` of a frame over Open MPI's rendezvous size (4 KiB on shared
    memory, 64 KiB on TCP) returns only once the receiver has matched it; on the server that
    serialises every replica behind the slowest one to poll for its reply.

    Returns:
        ``(requests, buffers)``: the buffers must stay alive, unchanged, until every
        request completes (:func:`mpi4py.MPI.Request.Testall`). MPI keeps the messages of
        one sender to one receiver in the order they were started.
    """
    meta, bufs = _message(frames)
    reqs = [comm.Isend([meta, len(meta), _mpi_int64()], dest=dest, tag=meta_tag)]
    reqs += [comm.Isend([b, b.size, _mpi_byte()], dest=dest, tag=data_tag) for b in bufs]
    return reqs, [meta, *bufs]


def recv_frames(comm: Any, source: int, meta_tag: int, data_tag: int, max_bytes: int) -> list[np.ndarray]:
    """Receive one message sent by :func:`send_frames` from ``source``.

    Raises:
        ProtocolError: the metadata is malformed or announces more than ``max_bytes``;
            the announced frames are then drained in bounded chunks so the stream stays
            in step, and nothing larger than ``max_bytes`` is ever allocated.
    """
    from mpi4py import MPI

    st = MPI.Status()
    comm.Probe(source=source, tag=meta_tag, status=st)
    count = st.Get_count(MPI.BYTE)
    if count != META_LEN * 8:
        junk = np.empty(max(count, 1), dtype=np.uint8) if count <= 1 << 16 else None
        if junk is None:
            raise P.ProtocolError("size", f"metadata of {count} bytes from rank {source}; expected {META_LEN * 8}")
        comm.Recv([junk, count, MPI.BYTE], source=source, tag=meta_tag)
        raise P.ProtocolError("truncated", f"metadata of {count} bytes from rank {source}; expected {META_LEN * 8}")
    meta = np.empty(META_LEN, dtype=np.int64)
    comm.Recv([meta, META_LEN, MPI.INT64_T], source=source, tag=meta_tag)
    n = int(meta[0])
    sizes = meta[1:1 + max(0, min(n, META_LEN - 1))]
    bad = None
    if not 1 <= n <= META_LEN - 1:
        bad = ("count", f"{n} frames announced; expected 1..{META_LEN - 1}")
    elif (sizes < 0).any() or int(sizes.sum()) > max_bytes:
        bad = ("size", f"{int(sizes.sum())} bytes announced; the limit is {max_bytes}")
    frames = []
    for size in sizes:
        if bad is None:
            buf = np.empty(int(size), dtype=np.uint8)
            comm.Recv([buf, buf.size, MPI.BYTE], source=source, tag=data_tag)
            frames.append(buf)
        else:  # drain what the peer sends without trusting its sizes
            comm.Probe(source=source, tag=data_tag, status=st)
            c = st.Get_count(MPI.BYTE)
            chunk = np.empty(min(max(c, 1), max_bytes), dtype=np.uint8)
            if c > chunk.size:
                raise P.ProtocolError("size", f"frame of {c} bytes from rank {source} exceeds {max_bytes}")
            comm.Recv([chunk, c, MPI.BYTE], source=source, tag=data_tag)
    if bad is not None:
        raise P.ProtocolError(*bad)
    return frames


def _mpi_byte() -> Any:
    from mpi4py import MPI

    return MPI.BYTE


def _mpi_int64() -> Any:
    from mpi4py import MPI

    return MPI.INT64_T


class MPIServerTransport(ServerTransport):
    """The server side on rank 0: MPI point-to-point with every replica rank.

    Peer identity is the sender's rank (4 bytes, little-endian); a worker must still
    authenticate with the run secret. The serving thread is the only thread of rank 0
    that uses MPI while the server runs.

    Messages announcing more than the core's ``max_bytes`` are refused on their metadata,
    before any allocation.
    """

    def __init__(self) -> None:
        self.max_bytes = 0
        self._comm: Any = None
        self._idle = 0.0
        self._pending: list[tuple[list, list]] = []  # replies in flight: (requests, buffers)

    def open(self, max_bytes: int) -> str:
        """Attach to ``MPI.COMM_WORLD``; the address is :data:`ADDRESS`."""
        self._comm, self.max_bytes = _comm(), int(max_bytes)
        return ADDRESS

    def receive(self, timeout_s: float) -> Incoming | None:
        """Probe for a request from any rank until ``timeout_s``, backing off to 2 ms sleeps
        while idle; a message whose metadata is invalid comes back with ``error`` set."""
        from mpi4py import MPI

        st = MPI.Status()
        deadline = time.monotonic() + timeout_s
        while not self._comm.Iprobe(source=MPI.ANY_SOURCE, tag=REQ_META, status=st):
            self._complete()
            if time.monotonic() >= deadline:
                return None
            self._idle = min(0.002, self._idle + 0.0001)
            time.sleep(self._idle)
        self._idle = 0.0
        src = st.Get_source()
        ident = int(src).to_bytes(4, "little")
        try:
            return Incoming(ident, recv_frames(self._comm, src, REQ_META, REQ_DATA, self.max_bytes))
        except P.ProtocolError as e:
            return Incoming(ident, [], e)

    def send(self, ident: bytes, frames: list) -> None:
        """Start sending to the rank in ``ident`` without blocking (``MPI_Isend``): the
        frames are kept, unchanged as the transport contract promises, until MPI has sent
        them, so the server goes on serving while that replica has yet to poll for its reply."""
        self._pending.append(isend_frames(self._comm, frames, int.from_bytes(ident, "little"),
                                          REP_META, REP_DATA))
        self._complete()

    def _complete(self) -> None:
        """Drop the replies MPI has finished sending (their buffers may then be freed)."""
        if self._pending:
            from mpi4py import MPI

            self._pending = [p for p in self._pending if not MPI.Request.Testall(p[0])]

    def close(self, wait_s: float = 3.0) -> None:
        """Wait up to ``wait_s`` seconds for the replies still in flight (a replica that
        stopped polling never takes its last one): less than
        :meth:`~distbench.ps_async.server.ParameterServer.stop` waits for the serving
        thread, so rank 0's main thread never uses MPI beside it. MPI is finalised at exit."""
        deadline = time.monotonic() + wait_s
        while self._pending and time.monotonic() < deadline:
            self._complete()
            time.sleep(0.001)
        if self._pending:
            _LOG.info("%d replies to replicas were still unsent when the server closed", len(self._pending))
        self._pending = []


class MPIClientTransport(ClientTransport):
    """The client side on a replica rank: MPI point-to-point to rank 0.

    Args:
        address: informational (:data:`ADDRESS`).
        max_bytes: bound on one reply (bytes), checked before allocation.
        timeout_s: unused (an MPI send does not time out).
    """

    def __init__(self, address: str, max_bytes: int, timeout_s: float) -> None:
        self.address, self.max_bytes = address, int(max_bytes)
        self._comm: Any = None

    @property
    def connected(self) -> bool:
        """True once attached (MPI has no connection to lose)."""
        return self._comm is not None

    def connect(self) -> None:
        """Attach to ``MPI.COMM_WORLD``."""
        self._comm = _comm()

    def send(self, frames: list) -> bool:
        """Send the frames to rank 0 and return once their buffers may be reused, sleeping
        between checks rather than spinning in ``MPI_Send`` (on cores shared with the
        server, the spin held the core the server needed to take the message)."""
        from mpi4py import MPI

        reqs, _keep = isend_frames(self._comm, frames, SERVER_RANK, REQ_META, REQ_DATA)
        while not MPI.Request.Testall(reqs):
            time.sleep(0.0002)
        return True

    def receive(self, timeout_s: float) -> list | None:
        """Poll for rank 0's reply until ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not self._comm.Iprobe(source=SERVER_RANK, tag=REP_META):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.0002)
        return recv_frames(self._comm, SERVER_RANK, REP_META, REP_DATA, self.max_bytes)

    def reset(self) -> None:
        """Nothing to reset: a timed-out request's late reply is dropped by its request id."""

    def close(self) -> None:
        """Nothing to release: MPI is finalised at process exit."""


class MPIParameterServer(ParameterServer):
    """:class:`ParameterServer` on rank 0 with :class:`MPIServerTransport` injected.

    Takes :class:`ParameterServer`'s arguments (``host``, ``port``, ``io_threads`` and
    ``transport`` are ignored).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "transport": MPIServerTransport()})


class MPIClient(PSClient):
    """:class:`PSClient` with :class:`MPIClientTransport` injected (same arguments;
    ``address`` is informational)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "transport": MPIClientTransport})


def send_result(result: dict[str, Any]) -> None:
    """Send a replica's JSON result to rank 0 (bytes, no pickle)."""
    comm = _comm()
    send_frames(comm, [json.dumps(result).encode()], SERVER_RANK, RESULT, RESULT + 1)


def recv_results(num_workers: int, max_bytes: int = 1 << 24) -> list[dict[str, Any]]:
    """On rank 0: the JSON result of every replica rank 1..N, sorted by worker id."""
    comm = _comm()
    out = []
    for r in range(1, num_workers + 1):
        (buf,) = recv_frames(comm, r, RESULT, RESULT + 1, max_bytes)
        out.append(json.loads(buf.tobytes().decode()))
    return sorted(out, key=lambda d: d["worker"])


def broadcast_secret(secret: bytes | None) -> bytes:
    """Rank 0's per-run secret, broadcast to every rank (a 32-byte buffer, no pickle)."""
    comm = _comm()
    buf = np.frombuffer(secret, dtype=np.uint8).copy() if comm.Get_rank() == 0 else np.empty(32, np.uint8)
    comm.Bcast([buf, 32, _mpi_byte()], root=0)
    return buf.tobytes()

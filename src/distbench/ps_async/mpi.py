"""The MPI engine for the parameter-server optimizers (mpi4py, launched by ``mpirun``).

``mpirun -np N+1``: rank 0 runs the parameter server, ranks 1..N are the replicas
(worker id = rank - 1). It is the same server core as on Spark
(:class:`~distbench.ps_async.server.ParameterServer`: validation, logical clock,
staleness, per-(worker, sequence) idempotency, barrier rounds for EASGD and model
averaging) and the same client logic (:class:`~distbench.ps_async.client.PSClient`, the
HELLO/AUTH handshake with the per-run secret included); only the transport differs:
:class:`MPIParameterServer` and :class:`MPIClient` move the protocol's frames with
mpi4py's buffer (uppercase) API: never pickle.

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
import threading
import time
from typing import Any

import numpy as np

from distbench.ps_async import protocol as P
from distbench.ps_async.client import PSClient
from distbench.ps_async.server import ParameterServer

_LOG = logging.getLogger(__name__)

REQ_META, REQ_DATA, REP_META, REP_DATA, RESULT = 11, 12, 21, 22, 31
META_LEN = P.MAX_TENSORS + 2
SERVER_RANK = 0
ADDRESS = "mpi://rank0"


def _comm() -> Any:
    from mpi4py import MPI

    return MPI.COMM_WORLD


def send_frames(comm: Any, frames: list, dest: int, meta_tag: int, data_tag: int) -> int:
    """Send one message's frames to ``dest``; returns the bytes sent (frames only)."""
    bufs = [np.frombuffer(P._buf(f), dtype=np.uint8) for f in frames]
    if len(bufs) > META_LEN - 1:
        raise P.ProtocolError("count", f"{len(bufs)} frames, at most {META_LEN - 1}")
    meta = np.zeros(META_LEN, dtype=np.int64)
    meta[0] = len(bufs)
    meta[1:1 + len(bufs)] = [b.size for b in bufs]
    comm.Send([meta, len(meta), _mpi_int64()], dest=dest, tag=meta_tag)
    for b in bufs:
        comm.Send([b, b.size, _mpi_byte()], dest=dest, tag=data_tag)
    return int(sum(b.size for b in bufs))


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


class MPIParameterServer(ParameterServer):
    """:class:`ParameterServer` whose transport is MPI point-to-point on rank 0.

    Takes the same arguments (``host``/``port`` are ignored). Peer identity is the MPI
    rank; a worker must still authenticate with the run secret.
    """

    def start(self) -> "MPIParameterServer":
        """Start serving in a background thread (the only thread of rank 0 using MPI
        until :meth:`stop` returns)."""
        if self._thread is not None:
            raise RuntimeError("MPIParameterServer.start() called twice")
        self._mpi = _comm()
        self.address = ADDRESS
        self.port = None
        self._thread = threading.Thread(target=self._serve, name="distbench-mpi-ps", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving; returns within about ``timeout_s``."""
        if self._thread is None:
            return
        self._stop_evt.set()
        self._thread.join(timeout_s)

    def _serve(self) -> None:
        from mpi4py import MPI

        comm = self._mpi
        st = MPI.Status()
        idle = 0.0
        try:
            while not self._stop_evt.is_set():
                if not comm.Iprobe(source=MPI.ANY_SOURCE, tag=REQ_META, status=st):
                    idle = min(0.002, idle + 0.0001)  # back off to 2 ms while idle
                    time.sleep(idle)
                    self._check_sync_timeout()
                    continue
                idle = 0.0
                src = st.Get_source()
                ident = int(src).to_bytes(4, "little")
                try:
                    frames = recv_frames(comm, src, REQ_META, REQ_DATA, self.max_bytes)
                except P.ProtocolError as e:
                    self._reject(ident, None, e.kind, str(e))
                    continue
                self._handle_message(ident, frames)
        except Exception:  # pragma: no cover - a bug; keep the traceback
            _LOG.exception("MPI parameter server loop crashed")

    def _send(self, ident: bytes, msg: P.Message, track: bool = False) -> None:
        nbytes = send_frames(self._mpi, P.encode(msg), int.from_bytes(ident, "little"), REP_META, REP_DATA)
        with self._lock:
            self._n["bytes_sent"] += nbytes


class MPIClient(PSClient):
    """:class:`PSClient` whose transport is MPI point-to-point to rank 0.

    Same arguments as :class:`PSClient` (``address`` is informational).
    """

    def _connect(self) -> None:
        self._mpi = _comm()
        self._sock = self._mpi  # "connected"
        self._token = bytes(P.TOKEN_BYTES)
        self._handshake()

    def _reset(self) -> None:
        """MPI has no connection to reset; a timed-out request's late reply is dropped by req id."""

    def close(self) -> None:
        """Mark the client closed (MPI itself is finalised at process exit)."""
        self._closed = True

    def _send_frames(self, frames: list) -> bool:
        send_frames(self._mpi, frames, SERVER_RANK, REQ_META, REQ_DATA)
        return True

    def _recv_frames(self, timeout_s: float) -> list | None:
        deadline = time.monotonic() + timeout_s
        while not self._mpi.Iprobe(source=SERVER_RANK, tag=REP_META):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.0002)
        return recv_frames(self._mpi, SERVER_RANK, REP_META, REP_DATA, self.max_bytes)


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

"""The parameter server: holds the centre variable ``C`` and folds worker commits into it.

The transport (how frames travel: ZeroMQ for Spark, MPI for ``mpi_ps``) is injected,
see :mod:`distbench.ps_async.transport`; everything below is transport-independent.

Authentication (no CURVE): a per-run secret (bytes, >= 16) known to the driver
and its workers.  Handshake on a fresh connection::

    client -> HELLO(worker_id, client_nonce)
    server -> CHALLENGE(server_nonce, HMAC(secret, "server", cn, sn, id))   # server proves itself
    client -> AUTH(HMAC(secret, "client", cn, sn, id))                      # client proves itself
    server -> WELCOME(clock, num_workers)

Both sides then derive ``token = HMAC(secret, "session", cn, sn, id)[:16]``;
every later request must carry it and come from the same ZeroMQ peer.  A peer
without the secret gets only error replies and never reaches ``C``.  This
authenticates peers; it does not encrypt or integrity-protect traffic against
an on-path attacker (use CURVE or a private network for that).

Size bounds: the transport drops a peer announcing a frame over ``max_bytes`` before
allocating it where it can (ZeroMQ's ``MAXMSGSIZE``, the MPI metadata check), and the core
rejects any message whose frames add up to more than ``max_bytes``.

Everything about ``C`` happens in one background thread of the driver process;
the fold runs under ``self._lock`` (which ``center()`` and ``stats()`` also take).
``C`` is never modified in place once it exists: an async commit is folded out of
place into the commit's own received buffers (``C_new = C + delta`` written over
``delta``, which the server owns and nobody else reads), which then *are* the new
centre, and a sync round writes new arrays. So replies send ``C`` without copying
(a received ZeroMQ frame is re-sent by reference count) and no reply is ever torn
by a later fold, without tracking sends in flight.
"""
from __future__ import annotations

import collections
import hmac
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from distbench.contracts import SyncKind

from . import protocol as P
from .rules import get_optimizer, resolve_params
from .transport import SendFailed, ServerTransport, ZmqServerTransport

__all__ = ["ParameterServer", "staleness_summary"]

_LOG = logging.getLogger("distbench.ps_async.server")
_LABEL_SERVER, _LABEL_CLIENT, _LABEL_SESSION = b"distbench-ps server", b"distbench-ps client", \
    b"distbench-ps session"


@dataclass
class _Session:
    worker_id: int
    token: bytes


def staleness_summary(histogram: Mapping[int, int]) -> dict:
    """Summarise a staleness histogram ``{tau: count}``.

    Returns:
        ``{"count", "min", "median", "p95", "max", "mean", "histogram"}``; the quantiles are
        ``numpy.percentile``'s (linear interpolation between order statistics) and
        ``histogram`` has string keys (JSON-able). Values are None when the histogram is empty.
    """
    items = sorted((int(k), int(v)) for k, v in histogram.items() if v > 0)
    n = sum(v for _, v in items)
    out: dict[str, Any] = {"count": n, "min": None, "median": None, "p95": None, "max": None,
                           "mean": None, "histogram": {str(k): v for k, v in items}}
    if n == 0:
        return out
    taus = np.repeat([k for k, _ in items], [v for _, v in items])
    med, p95 = np.percentile(taus, [50, 95])
    out.update(min=items[0][0], max=items[-1][0], median=float(med), p95=float(p95), mean=float(taus.mean()))
    return out


@dataclass
class _Counters:
    """Statistics of one server (read and written under the server's lock)."""

    clock: int = 0
    n: collections.Counter = field(default_factory=collections.Counter)
    rejected: collections.Counter = field(default_factory=collections.Counter)
    per_worker: collections.Counter = field(default_factory=collections.Counter)
    staleness: collections.Counter = field(default_factory=collections.Counter)
    done_workers: set = field(default_factory=set)


@dataclass
class _SyncRound:
    """Barrier state of the synchronous optimizers (serving thread only)."""

    number: int = 0
    contributions: dict = field(default_factory=dict)  # worker id -> payload
    waiters: dict = field(default_factory=dict)  # worker id -> (ident, request)
    started: float = 0.0
    last_workers: set = field(default_factory=set)


@dataclass
class _Peers:
    """Handshakes in progress and authenticated sessions, bounded (serving thread only)."""

    pending: collections.OrderedDict = field(default_factory=collections.OrderedDict)
    sessions: collections.OrderedDict = field(default_factory=collections.OrderedDict)


class ParameterServer:
    """Asynchronous / synchronous parameter server for one training run.

    Args:
        initial_weights: the model's initial weights (list of arrays); ``C``
            starts as a float32 copy of them and defines the template every
            commit, sync contribution and pull must match.
        optimizer: a name from :data:`distbench.ps_async.rules.OPTIMIZERS`.
        secret: per-run secret (bytes, >= 16); see :func:`protocol.new_secret`.
        num_workers: number of workers N.  Required for sync optimizers (barrier
            size); for async ones it bounds the accepted worker ids (0..N-1).
        host: interface the default ZeroMQ transport binds; default loopback.
            Binding all interfaces (``"0.0.0.0"``) must be asked for explicitly and is logged.
        port: TCP port of the default transport; 0 picks a free one (see :attr:`address`).
        params: optimizer parameter overrides (see :func:`rules.resolve_params`).
        max_bytes: bound on one message; default from the template plus 64 KiB.
        sync_timeout_s: a sync round whose contributions are still incomplete
            this long after the first one arrived is abandoned; waiting workers
            get an error naming the missing workers.
        poll_interval_s: loop wake-up period (bounds how long ``stop`` waits).
        io_threads: ZeroMQ I/O threads of the default transport.
        tune_malloc: call :func:`protocol.tune_malloc` (process-wide glibc
            setting).  None (default) = auto: it only acts when messages can
            exceed 16 MiB (models above ~4 M parameters); False = never.
        transport: the :class:`~distbench.ps_async.transport.ServerTransport` to serve
            on; default a :class:`~distbench.ps_async.transport.ZmqServerTransport` on
            ``host:port`` (``host``, ``port`` and ``io_threads`` are ignored otherwise).
        non_trainable: positions of the non-trainable weights (BatchNormalization's moving
            statistics). The optimizer's rule folds only the trainable positions; for these,
            a commit or a round's contribution carries the worker's current values, and the
            centre holds the mean over the workers of the latest values each sent (a round's
            contributions, for the synchronous optimizers): statistics of the training data,
            never treated as gradients.
        start_barrier: hold every worker's WELCOME (the end of its handshake) until all
            ``num_workers`` have authenticated, then send them together: the replicas start
            training within a message of each other. Spark's ``BarrierTaskContext.barrier()``
            releases each task on its own one-second poll (measured: up to 1.0 s apart), and
            that skew landed on the training clock of the synchronous optimizers. Once
            released, a later handshake (a retried task) is welcomed at once.
    Raises:
        ValueError / TypeError / KeyError: bad optimizer, secret, weights or num_workers
            (or ``start_barrier`` without ``num_workers``).
    """

    def __init__(self, initial_weights: Sequence[np.ndarray], optimizer: str, secret: bytes, *,
                 num_workers: int | None = None, host: str = "127.0.0.1", port: int = 0,
                 params: Mapping[str, Any] | None = None, max_bytes: int | None = None,
                 sync_timeout_s: float = 60.0, poll_interval_s: float = 0.05,
                 io_threads: int = 1, tune_malloc: bool | None = None,
                 transport: ServerTransport | None = None, non_trainable: Sequence[int] = (),
                 start_barrier: bool = False) -> None:
        self.spec = get_optimizer(optimizer)
        self.params = resolve_params(optimizer, params)
        self._secret = P.check_secret(secret)
        if not initial_weights:
            raise ValueError("initial_weights is empty: the model has no variables")
        self._center = [np.array(w, dtype=np.float32, order="C", copy=True)
                        for w in initial_weights]
        self.template = P.template_from(self._center)
        self._nt = sorted(set(int(i) for i in non_trainable))
        if any(not 0 <= i < len(self._center) for i in self._nt):
            raise ValueError(f"non_trainable positions {self._nt} outside the {len(self._center)} weights")
        self._tr = [i for i in range(len(self._center)) if i not in set(self._nt)]
        self._latest_state: dict[int, list] = {}  # worker -> its latest non-trainable values
        if num_workers is not None and (isinstance(num_workers, bool) or num_workers < 1):
            raise ValueError(f"num_workers must be a positive integer, got {num_workers!r}")
        if self.spec.kind == SyncKind.SYNC and num_workers is None:
            raise ValueError(f"optimizer {optimizer!r} is synchronous: num_workers is required "
                             "(size of the barrier)")
        self.num_workers = num_workers
        if start_barrier and num_workers is None:
            raise ValueError("start_barrier needs num_workers (how many workers to wait for)")
        self._held: dict[int, tuple[bytes, int]] | None = {} if start_barrier else None  # worker -> (ident, req)
        self.max_bytes = int(max_bytes) if max_bytes else P.default_max_bytes(self.template)
        if tune_malloc is not False:  # None (auto) or True: acts only for messages > 16 MiB
            P.tune_malloc(self.max_bytes)
        self._transport = transport or ZmqServerTransport(host, port, io_threads)
        self._sync_timeout_s = float(sync_timeout_s)
        self._poll_s = max(0.001, float(poll_interval_s))
        u8 = [((P.NONCE_BYTES,), np.dtype("u1"))]
        self._expected = {P.MsgType.HELLO: u8, P.MsgType.AUTH: u8,
                          P.MsgType.COMMIT: self.template, P.MsgType.SYNC: self.template}
        self._known = P.KnownDescriptors([self.template])
        self._lock = threading.Lock()
        self._snap_clocks: frozenset[int] = frozenset()
        self._snaps: dict[int, tuple[float, list]] = {}  # clock -> (unix time, the centre then)
        self._stop_evt = threading.Event()
        self._done_evt = threading.Event()
        self._thread: threading.Thread | None = None
        self.address: str | None = None
        self.port: int | None = None
        self._peers = _Peers()  # serving thread only
        self._applied: dict[int, set] = collections.defaultdict(set)  # worker -> applied seqs
        self._center_frames: list = list(self._center)  # what a reply sends for each tensor of C
        self._sync = _SyncRound()
        self._n = _Counters()  # under self._lock
        self._busy_s = 0.0  # CPU seconds the serving thread spent handling messages (written by it only)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "ParameterServer":
        """Open the transport and start the serving thread.

        Returns:
            ``self`` (so ``server = ParameterServer(...).start()`` works).
        Raises:
            RuntimeError: if already started; the transport's error if it cannot open
            (e.g. ``zmq.ZMQError`` when the bind fails).
        """
        if self._thread is not None:
            raise RuntimeError("ParameterServer.start() called twice")
        self.address = self._transport.open(self.max_bytes)
        port = self.address.rsplit(":", 1)[-1]
        self.port = int(port) if port.isdigit() else None
        self._thread = threading.Thread(target=self._serve, name="distbench-ps-server", daemon=True)
        self._thread.start()
        _LOG.info("parameter server (%s) listening on %s", self.spec.name, self.address)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving and release the transport; returns within about ``timeout_s``.

        Waiting sync workers get no reply (their clients time out).  Safe to call twice.
        """
        if self._thread is None:
            return
        self._stop_evt.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():  # pragma: no cover - loop wakes every poll interval
            _LOG.error("parameter server thread did not stop within %.1f s", timeout_s)

    def __enter__(self) -> "ParameterServer":
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_done(self, timeout_s: float | None = None) -> bool:
        """Block until all ``num_workers`` workers sent DONE (or timeout).

        Returns:
            True if they all did.  Raises ValueError if ``num_workers`` is unknown.
        """
        if self.num_workers is None:
            raise ValueError("wait_done needs num_workers")
        return self._done_evt.wait(timeout_s)

    # ------------------------------------------------------------------ inspection
    @property
    def clock(self) -> int:
        """Logical clock: number of updates applied to ``C`` (commits or sync rounds)."""
        with self._lock:
            return self._n.clock

    def center(self) -> list:
        """A copy of the centre variable ``C`` (list of float32 arrays, template shapes)."""
        with self._lock:
            return [c.copy() for c in self._center]

    def snapshot_at(self, clocks: Sequence[int]) -> None:
        """Keep the centre as it is right after the update that brings the logical clock to
        each of ``clocks`` (exact, whatever the load: taken in the update itself, under the
        lock; no copy there, since an update replaces ``C``'s arrays and never writes into
        them). Read them back with :meth:`snapshots_taken`."""
        with self._lock:
            self._snap_clocks = frozenset(int(c) for c in clocks)

    def snapshots_taken(self) -> dict[int, tuple[float, list]]:
        """``clock -> (unix_time, centre)`` for each clock of :meth:`snapshot_at` reached so
        far (the centre as copies: float32 arrays, template shapes)."""
        with self._lock:
            taken = dict(self._snaps)
        return {k: (t, [np.array(c, dtype=np.float32, copy=True) for c in w]) for k, (t, w) in taken.items()}

    def _tick(self) -> int:
        """Advance the logical clock after ``C`` was replaced (called under the lock); keep
        the new centre when :meth:`snapshot_at` asked for this clock. Returns the clock."""
        self._n.clock += 1
        if self._n.clock in self._snap_clocks:
            self._snaps[self._n.clock] = (time.time(), list(self._center))
        return self._n.clock

    def stats(self) -> dict:
        """JSON-able statistics.

        Returns:
            dict with ``optimizer``, ``address``, ``num_workers``, ``clock``,
            ``sync_rounds``, ``commits``, ``duplicate_commits``, ``pulls``,
            ``syncs``, ``rejected`` ({"total", "by_reason": {kind: n}}),
            ``bytes_received``, ``bytes_sent``, ``per_worker_commits``
            ({"id": n}), ``staleness`` (see :func:`staleness_summary`),
            ``workers_done``, ``send_failures``, ``sync_timeouts``, ``server_busy_s`` (CPU
            seconds the serving thread spent handling messages: decoding, folding, replying).
        """
        with self._lock:
            n = self._n
            return {
                "optimizer": self.spec.name, "address": self.address,
                "num_workers": self.num_workers, "clock": n.clock,
                "sync_rounds": self._sync.number, "commits": n.n["commits"],
                "duplicate_commits": n.n["duplicates"], "pulls": n.n["pulls"],
                "syncs": n.n["syncs"],
                "rejected": {"total": sum(n.rejected.values()),
                             "by_reason": dict(sorted(n.rejected.items()))},
                "bytes_received": n.n["bytes_received"], "bytes_sent": n.n["bytes_sent"],
                "per_worker_commits": {str(k): v for k, v in sorted(n.per_worker.items())},
                "applied_commit_keys": sum(len(v) for v in self._applied.values()),
                "staleness": staleness_summary(n.staleness),
                "workers_done": sorted(n.done_workers),
                "send_failures": n.n["send_failures"],
                "sync_timeouts": n.n["sync_timeouts"],
                "server_busy_s": round(self._busy_s, 6),
            }

    # ------------------------------------------------------------------ loop
    def _serve(self) -> None:
        try:
            while not self._stop_evt.is_set():
                got = self._transport.receive(self._poll_s)
                if got is not None:
                    if got.error is not None:
                        self._reject(got.ident, None, got.error.kind, str(got.error))
                    else:
                        t0 = time.thread_time()  # this thread's CPU time: not the time another process held the core
                        self._handle_message(got.ident, got.frames)
                        self._busy_s += time.thread_time() - t0
                self._check_sync_timeout()
        except Exception:  # pragma: no cover - a bug; keep the traceback
            _LOG.exception("parameter server loop crashed")
        finally:
            self._transport.close()

    def _handle_message(self, ident: bytes, body: list) -> None:
        """Validate and dispatch one message ``body`` (frames) from peer ``ident``."""
        nbytes = sum(len(f) for f in body)
        with self._lock:
            self._n.n["bytes_received"] += nbytes
        hdr = None
        try:
            if nbytes > self.max_bytes:
                raise P.ProtocolError("size", f"message of {nbytes} bytes in {len(body)} "
                                              f"frames exceeds the limit of {self.max_bytes}")
            if not body:
                raise P.ProtocolError("truncated", "message has no header frame")
            hdr = P.decode_header(body[0], self._known)
            if hdr.type in (P.MsgType.HELLO, P.MsgType.AUTH):
                msg = P.decode(body, self._expected, header=hdr)
                (self._on_hello if hdr.type == P.MsgType.HELLO else self._on_auth)(ident, msg)
                return
            sess = self._peers.sessions.get(ident)
            if sess is None or not hmac.compare_digest(sess.token, hdr.token) \
                    or sess.worker_id != hdr.worker_id:
                raise P.ProtocolError("auth", f"{hdr.type.name} from a peer that is not "
                                              "authenticated (no or wrong session token or "
                                              "worker id); complete HELLO/AUTH first")
            msg = P.decode(body, self._expected, header=hdr,
                           require_finite=(P.MsgType.COMMIT, P.MsgType.SYNC))
            handler = {P.MsgType.PULL: self._on_pull, P.MsgType.COMMIT: self._on_commit,
                       P.MsgType.SYNC: self._on_sync, P.MsgType.DONE: self._on_done}.get(msg.type)
            if handler is None:
                raise P.ProtocolError("type", f"{msg.type.name} is a reply type; a client may "
                                              "send HELLO, AUTH, PULL, COMMIT, SYNC or DONE")
            handler(ident, msg)
        except P.ProtocolError as e:
            self._reject(ident, hdr, e.kind, str(e))
        except Exception as e:  # pragma: no cover - a bug must not kill the server
            _LOG.exception("internal error handling a message")
            self._reject(ident, hdr, "internal", f"internal server error: {type(e).__name__}")

    def _reject(self, ident: bytes, hdr: P.Header | None, kind: str, reason: str) -> None:
        with self._lock:
            self._n.rejected[kind] += 1
            n = self._n.rejected[kind]
        if n <= 20 or n % 1000 == 0:
            _LOG.warning("rejected message (%s, #%d of this kind) from worker %s: %s", kind, n,
                         hdr.worker_id if hdr else "?", reason)
        err = P.Message(P.MsgType.ERROR, worker_id=hdr.worker_id if hdr else 0,
                        req_id=hdr.req_id if hdr else 0, seq=hdr.seq if hdr else 0,
                        tensors=[np.frombuffer(f"{kind}: {reason}".encode()[:4000], np.uint8)])
        self._send(ident, err)

    def _send(self, ident: bytes, msg: P.Message, tensor_frames: list | None = None) -> None:
        """Encode and send ``msg``; ``tensor_frames`` (one per tensor: a received frame or an
        array with the tensor's bytes) replace the tensors' arrays on the wire."""
        frames = P.encode(msg)
        nbytes = sum(len(f) if isinstance(f, bytes) else f.nbytes for f in frames)
        if tensor_frames is not None:
            frames[1:] = tensor_frames
        try:
            self._transport.send(ident, frames)
        except SendFailed as e:  # peer gone, or its queue is full
            with self._lock:
                self._n.n["send_failures"] += 1
            _LOG.info("could not send %s to a peer: %s", msg.type.name, e)
            return
        with self._lock:
            self._n.n["bytes_sent"] += nbytes

    # ------------------------------------------------------------------ handshake
    def _on_hello(self, ident: bytes, msg: P.Message) -> None:
        wid = msg.worker_id
        if self.num_workers is not None and wid >= self.num_workers:
            raise P.ProtocolError("state", f"worker id {wid} out of range: this run has "
                                           f"num_workers={self.num_workers} (ids 0.."
                                           f"{self.num_workers - 1})")
        cn = msg.tensors[0].tobytes()
        sn = secrets.token_bytes(P.NONCE_BYTES)
        wid_b = wid.to_bytes(4, "little")
        pending = self._peers.pending
        pending[ident] = (wid, cn, sn)
        pending.move_to_end(ident)
        while len(pending) > 1024:
            pending.popitem(last=False)
        proof = P.hmac_digest(self._secret, _LABEL_SERVER, cn, sn, wid_b)
        self._send(ident, P.Message(P.MsgType.CHALLENGE, worker_id=wid, req_id=msg.req_id,
                                    tensors=[np.frombuffer(sn, np.uint8),
                                             np.frombuffer(proof, np.uint8)]))

    def _on_auth(self, ident: bytes, msg: P.Message) -> None:
        pend = self._peers.pending.pop(ident, None)
        if pend is None or pend[0] != msg.worker_id:
            raise P.ProtocolError("auth", "AUTH without a matching HELLO from this peer")
        wid, cn, sn = pend
        wid_b = wid.to_bytes(4, "little")
        expect = P.hmac_digest(self._secret, _LABEL_CLIENT, cn, sn, wid_b)
        if not hmac.compare_digest(expect, msg.tensors[0].tobytes()):
            raise P.ProtocolError("auth", f"authentication failed for worker id {wid}: the "
                                          "peer does not know the run secret")
        token = P.hmac_digest(self._secret, _LABEL_SESSION, cn, sn, wid_b)[:P.TOKEN_BYTES]
        sessions = self._peers.sessions
        sessions[ident] = _Session(wid, token)
        while len(sessions) > 65536:
            sessions.popitem(last=False)
        _LOG.debug("worker %d authenticated", wid)
        held = self._held
        if held is not None:  # the start barrier: WELCOME once every worker has authenticated
            held[wid] = (ident, msg.req_id)  # a re-sent handshake replaces the earlier one
            if len(held) < (self.num_workers or 0):
                return
            self._held = None  # released once; later handshakes (a retried task) pass at once
            for w in sorted(held):
                self._welcome(*held[w], w)
            return
        self._welcome(ident, msg.req_id, wid)

    def _welcome(self, ident: bytes, req_id: int, wid: int) -> None:
        with self._lock:
            clock = self._n.clock
        self._send(ident, P.Message(P.MsgType.WELCOME, worker_id=wid, req_id=req_id,
                                    clock=clock, aux=self.num_workers or 0))

    # ------------------------------------------------------------------ requests
    def _center_reply(self, ident: bytes, mtype: P.MsgType, req: P.Message, clock: int,
                      seq: int = 0, aux: int = 0, flags: int = 0) -> None:
        self._send(ident, P.Message(mtype, worker_id=req.worker_id, req_id=req.req_id, seq=seq,
                                    clock=clock, aux=aux, flags=flags,
                                    tensors=list(self._center)), self._center_frames)

    def _on_pull(self, ident: bytes, msg: P.Message) -> None:
        with self._lock:
            self._n.n["pulls"] += 1
            clock = self._n.clock
        self._center_reply(ident, P.MsgType.PULL_REPLY, msg, clock)

    def _on_commit(self, ident: bytes, msg: P.Message) -> None:
        if self.spec.kind != SyncKind.ASYNC:
            raise P.ProtocolError("state", f"COMMIT sent to a {self.spec.name} server, which "
                                           "is synchronous; expected SYNC")
        wid, seq = msg.worker_id, msg.seq
        with self._lock:
            clock = self._n.clock
        if seq in self._applied[wid]:
            with self._lock:
                self._n.n["duplicates"] += 1
            _LOG.info("worker %d replayed commit seq %d: acknowledged, not applied", wid, seq)
            tau, dup = 0, True
        else:
            if msg.clock > clock:
                raise P.ProtocolError("state", f"commit seq {seq} claims pull clock {msg.clock}"
                                               f", but the server clock is only {clock}")
            tau, dup = clock - msg.clock, False
            if self._nt:
                self._latest_state[wid] = [np.array(msg.tensors[i], dtype=np.float32) for i in self._nt]
            with self._lock:
                self._center, self._center_frames = self._fold(msg, tau)
                clock = self._tick()
                self._n.n["commits"] += 1
                self._n.per_worker[wid] += 1
                self._n.staleness[tau] += 1
            self._applied[wid].add(seq)
        if msg.flags & P.FLAG_PULL:
            with self._lock:
                self._n.n["pulls"] += 1
            self._center_reply(ident, P.MsgType.PULL_REPLY, msg, clock, seq=seq, aux=tau,
                               flags=P.FLAG_DUPLICATE if dup else 0)
        else:
            self._send(ident, P.Message(P.MsgType.ACK, worker_id=wid, req_id=msg.req_id,
                                        seq=seq, clock=clock, aux=tau,
                                        flags=P.FLAG_DUPLICATE if dup else 0))

    def _fold(self, msg: P.Message, tau: int) -> tuple[list, list]:
        """The centre after commit ``msg`` (``C`` itself is left untouched), and what a reply
        sends for each of its tensors. Called under the lock.

        The optimizer folds the trainable positions out of place into the commit's own
        received buffers when they are writable (they are then the new centre and are sent on
        as the frames they arrived in), else into new arrays; the non-trainable positions
        become the mean of the workers' latest values.
        """
        payload = [msg.tensors[i] for i in self._tr]
        out = payload if all(a.flags.writeable for a in payload) else None
        folded = self.spec.server_fold([self._center[i] for i in self._tr], payload,
                                       staleness=tau, out=out)
        new, frames = list(self._center), list(self._center_frames)
        for k, (i, a) in enumerate(zip(self._tr, folded)):
            if out is not None and a is out[k] and msg.frames:
                new[i], frames[i] = a, msg.frames[i]
            else:
                new[i] = frames[i] = np.ascontiguousarray(a, dtype=np.float32)
        for k, i in enumerate(self._nt):
            new[i] = frames[i] = np.mean([s[k] for s in self._latest_state.values()], axis=0,
                                         dtype=np.float64).astype(np.float32)
        return new, frames

    def _on_sync(self, ident: bytes, msg: P.Message) -> None:
        if self.spec.kind != SyncKind.SYNC:
            raise P.ProtocolError("state", f"SYNC sent to a {self.spec.name} server, which is "
                                           "asynchronous; expected COMMIT")
        wid, rnd = msg.worker_id, self._sync
        if msg.clock + 1 == rnd.number and wid in rnd.last_workers:
            # A retry (e.g. a reconnect after a client timeout) of a round that has completed
            # since: C is still that round's result, so answer it again; nothing is re-applied.
            _LOG.info("worker %d re-sent its contribution to completed round %d; replying "
                      "with that round's result", wid, msg.clock)
            self._center_reply(ident, P.MsgType.SYNC_REPLY, msg, rnd.number)
            return
        with self._lock:
            left = sorted(self._n.done_workers)
        if left:  # a round needs every worker: one that sent DONE (e.g. it diverged) never comes
            raise P.ProtocolError("left", self._left_text(left, rnd.number))
        if msg.clock != rnd.number:
            raise P.ProtocolError("state", f"SYNC for round {msg.clock}, but the server is at "
                                           f"round {rnd.number}")
        if not rnd.contributions:
            rnd.started = time.monotonic()
        if wid in rnd.contributions:  # a retry: keep the first contribution
            _LOG.info("worker %d re-sent its contribution to round %d; keeping the first",
                      wid, rnd.number)
        else:
            rnd.contributions[wid] = msg.tensors
        rnd.waiters[wid] = (ident, msg)
        with self._lock:
            self._n.n["syncs"] += 1
        if len(rnd.contributions) < self.num_workers:
            return
        payloads = [rnd.contributions[k] for k in sorted(rnd.contributions)]
        with self._lock:
            tr = self.spec.sync_fold([self._center[i] for i in self._tr], [[p[i] for i in self._tr] for p in payloads])
            new = list(self._center)
            for i, a in zip(self._tr, tr):
                new[i] = np.ascontiguousarray(a, dtype=np.float32)
            for i in self._nt:
                new[i] = np.mean([p[i] for p in payloads], axis=0, dtype=np.float64).astype(np.float32)
            self._center, self._center_frames = new, list(new)
            self._tick()
            rnd.number += 1
            number = rnd.number
        rnd.last_workers = set(rnd.contributions)
        waiters = rnd.waiters
        rnd.contributions, rnd.waiters = {}, {}
        for w in sorted(waiters):
            ident_w, req = waiters[w]
            self._center_reply(ident_w, P.MsgType.SYNC_REPLY, req, number)

    def _check_sync_timeout(self) -> None:
        rnd = self._sync
        if not rnd.contributions:
            return
        waited = time.monotonic() - rnd.started
        if waited < self._sync_timeout_s:
            return
        have = sorted(rnd.contributions)
        missing = [k for k in range(self.num_workers) if k not in rnd.contributions]
        reason = (f"sync round {rnd.number} timed out after {waited:.1f} s: contributions "
                  f"from workers {have}, missing {missing}")
        _LOG.error(reason)
        with self._lock:
            self._n.n["sync_timeouts"] += 1
        waiters = rnd.waiters
        rnd.contributions, rnd.waiters = {}, {}
        for ident_w, req in waiters.values():
            self._send(ident_w, P.Message(P.MsgType.ERROR, worker_id=req.worker_id,
                                          req_id=req.req_id, tensors=[np.frombuffer(
                                              f"timeout: {reason}".encode(), np.uint8)]))

    @staticmethod
    def _left_text(left: list, number: int) -> str:
        return (f"worker(s) {left} left the run (sent DONE, e.g. after diverging) before synchronous "
                f"round {number} completed; the round cannot complete without them, so it is abandoned")

    def _on_done(self, ident: bytes, msg: P.Message) -> None:
        with self._lock:
            self._n.done_workers.add(msg.worker_id)
            clock = self._n.clock
            left = sorted(self._n.done_workers)
            if self.num_workers is not None and len(self._n.done_workers) >= self.num_workers:
                self._done_evt.set()
        rnd = self._sync
        if self.spec.kind == SyncKind.SYNC and rnd.waiters:  # release the workers waiting for this one
            waiters = rnd.waiters
            rnd.contributions, rnd.waiters = {}, {}
            for ident_w, req in waiters.values():
                self._send(ident_w, P.Message(P.MsgType.ERROR, worker_id=req.worker_id, req_id=req.req_id,
                                              tensors=[np.frombuffer(
                                                  f"left: {self._left_text(left, rnd.number)}".encode(),
                                                  np.uint8)]))
        self._send(ident, P.Message(P.MsgType.ACK, worker_id=msg.worker_id,
                                    req_id=msg.req_id, clock=clock))

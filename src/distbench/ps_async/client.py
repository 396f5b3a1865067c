"""Worker-side client of the distbench parameter server.

:class:`PSClient` is the protocol's client side: authenticated request/reply with
timeouts (``pull``, ``commit``, ``commit_and_pull``, ``sync``, ``done``) over an injected
transport (:mod:`distbench.ps_async.transport`: ZeroMQ by default, MPI for ``mpi_ps``).
:class:`WorkerSession` layers any optimizer of :data:`rules.OPTIMIZERS` on top
so a worker loop is engine- and optimizer-agnostic::

    session = WorkerSession(PSClient(address, secret, worker_id, template), "adag")
    model.set_weights(session.start())
    for i, batch in enumerate(batches, 1):
        model.train_on_batch(*batch)
        if i % session.window == 0:
            model.set_weights(session.exchange(model.get_weights(), steps=session.window))
    if i % session.window:                        # the last partial window is committed too
        model.set_weights(session.exchange(model.get_weights(), steps=i % session.window))
    session.finish()
"""
from __future__ import annotations

import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from distbench.contracts import SyncKind

from . import protocol as P
from .rules import get_optimizer, resolve_params
from .transport import ClientTransportFactory, ZmqClientTransport

__all__ = ["PSClient", "PSError", "PSTimeout", "Ack", "WorkerSession"]

_LOG = logging.getLogger("distbench.ps_async.client")
_LABEL_SERVER, _LABEL_CLIENT, _LABEL_SESSION = b"distbench-ps server", b"distbench-ps client", \
    b"distbench-ps session"


class PSError(RuntimeError):
    """The server rejected a request, authentication failed, or a reply was malformed.

    Attributes:
        kind: the server's rejection category (``"shape"``, ``"auth"``, ...) or
            ``"client"`` / ``"timeout"`` for locally detected problems.
    """

    def __init__(self, message: str, kind: str = "client") -> None:
        super().__init__(message)
        self.kind = kind


class PSTimeout(PSError):
    """No reply within the client's timeout (server gone, dropped message, slow barrier)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "timeout")


@dataclass(frozen=True)
class Ack:
    """Server acknowledgement of a commit.

    Attributes:
        seq: the commit's sequence number.
        clock: server clock after the commit.
        staleness: ``tau`` the server computed (0 for a duplicate).
        duplicate: True if this (worker, seq) had already been applied; nothing changed.
    """

    seq: int
    clock: int
    staleness: int
    duplicate: bool


class PSClient:
    """Authenticated connection of one worker to a :class:`ParameterServer`.

    Args:
        address: the server's ``address`` (e.g. ``"tcp://127.0.0.1:5555"``).
        secret: the per-run secret (bytes, >= 16).
        worker_id: this worker's id (0..N-1).
        template: model template: list of arrays or ``(shape, dtype)`` pairs
            (the centre is float32 with the model's shapes).
        timeout_s: seconds to wait for any reply (also bounds a blocked send).
        max_bytes: bound on one incoming message; default from the template.
        tune_malloc: call :func:`protocol.tune_malloc` (process-wide).  None
            (default) = auto: only acts when messages can exceed 16 MiB; False = never.
        transport: builds the transport from ``(address, max_bytes, timeout_s)``; default
            :class:`~distbench.ps_async.transport.ZmqClientTransport`.
    Raises:
        PSError: authentication failed (wrong secret, or the server could not
            prove it knows the secret); PSTimeout: no server answered in time.

    Not thread-safe: use one client per thread/process.  After a timeout the
    connection is reset and re-authenticated on the next request.
    """

    def __init__(self, address: str, secret: bytes, worker_id: int, template: Sequence[Any],
                 timeout_s: float = 30.0, *, max_bytes: int | None = None,
                 tune_malloc: bool | None = None, transport: ClientTransportFactory | None = None) -> None:
        self.address = address
        self._secret = P.check_secret(secret)
        if isinstance(worker_id, bool) or not 0 <= int(worker_id) < 2 ** 32:
            raise ValueError(f"worker_id must be an integer in [0, 2**32), got {worker_id!r}")
        self.worker_id = int(worker_id)
        self.template = [(s, np.dtype("<f4") if dt.kind == "f" else dt)
                         for s, dt in P.template_from(template)]
        self.timeout_s = float(timeout_s)
        self.max_bytes = int(max_bytes) if max_bytes else P.default_max_bytes(self.template)
        self._known = P.KnownDescriptors([self.template])
        if tune_malloc is not False:  # None (auto) or True: acts only for messages > 16 MiB
            P.tune_malloc(self.max_bytes)
        self.num_workers: int | None = None
        self.last_clock = 0
        self._transport = (transport or ZmqClientTransport)(address, self.max_bytes, self.timeout_s)
        self._token = bytes(P.TOKEN_BYTES)
        self._req = 0
        self._closed = False
        self._connect()

    # ------------------------------------------------------------------ connection
    def _connect(self) -> None:
        self._transport.connect()
        self._token = bytes(P.TOKEN_BYTES)
        try:
            self._handshake()
        except BaseException:
            self._transport.reset()
            raise

    def _handshake(self) -> None:
        cn = secrets.token_bytes(P.NONCE_BYTES)
        wid_b = self.worker_id.to_bytes(4, "little")
        u8 = [((P.NONCE_BYTES,), np.dtype("u1"))]
        rep = self._request(P.Message(P.MsgType.HELLO, tensors=[np.frombuffer(cn, np.uint8)]),
                            P.MsgType.CHALLENGE, u8 * 2)
        sn, proof = rep.tensors[0].tobytes(), rep.tensors[1].tobytes()
        if not hmac.compare_digest(proof, P.hmac_digest(self._secret, _LABEL_SERVER, cn, sn,
                                                          wid_b)):
            raise PSError(f"the server at {self.address} failed to prove it knows the run "
                          "secret; refusing to talk to it", "auth")
        mine = P.hmac_digest(self._secret, _LABEL_CLIENT, cn, sn, wid_b)
        rep = self._request(P.Message(P.MsgType.AUTH, tensors=[np.frombuffer(mine, np.uint8)]),
                            P.MsgType.WELCOME, [])
        self._token = P.hmac_digest(self._secret, _LABEL_SESSION, cn, sn, wid_b)[:P.TOKEN_BYTES]
        self.num_workers = rep.aux or None
        self.last_clock = rep.clock

    def _request(self, msg: P.Message, reply_type: P.MsgType, reply_template: list | None,
                 timeout_s: float | None = None) -> P.Message:
        if self._closed:
            raise PSError("client is closed")
        if not self._transport.connected:  # reset after a timeout: reconnect and re-authenticate
            self._connect()
        timeout = self.timeout_s if timeout_s is None else float(timeout_s)
        self._req = (self._req + 1) % 2 ** 32
        msg.req_id, msg.worker_id, msg.token = self._req, self.worker_id, self._token
        frames = P.encode(msg)
        if not self._transport.send(frames):
            self._transport.reset()
            raise PSTimeout(f"could not send {msg.type.name} to {self.address} within "
                            f"{self.timeout_s} s") from None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            got = self._transport.receive(left) if left > 0 else None
            if got is None:
                self._transport.reset()
                raise PSTimeout(f"no reply to {msg.type.name} from {self.address} within "
                                f"{timeout} s (worker {self.worker_id})")
            try:
                hdr = P.decode_header(got[0], self._known)
            except P.ProtocolError as e:
                raise PSError(f"malformed reply to {msg.type.name}: {e}", e.kind) from None
            if hdr.req_id != self._req:
                _LOG.debug("dropping stale reply %s (req %d, want %d)", hdr.type.name,
                           hdr.req_id, self._req)
                continue
            if hdr.type == P.MsgType.ERROR:
                text = bytes(P.frame_view(got[1])).decode("utf-8", "replace") if len(got) > 1 else "?"
                kind = text.split(":", 1)[0] if ":" in text else "server"
                raise PSError(f"server rejected {msg.type.name} from worker {self.worker_id}: "
                              f"{text}", kind)
            if hdr.type != reply_type:
                raise PSError(f"expected {reply_type.name} in reply to {msg.type.name}, got "
                              f"{hdr.type.name}")
            try:
                return P.decode(got, reply_template, max_bytes=self.max_bytes, header=hdr)
            except P.ProtocolError as e:
                raise PSError(f"malformed {hdr.type.name} reply: {e}", e.kind) from None

    def _payload(self, tensors: Sequence[np.ndarray], what: str) -> list:
        if len(tensors) != len(self.template):
            raise PSError(f"{what}: got {len(tensors)} tensors, the model template has "
                          f"{len(self.template)}")
        out = []
        for i, (t, (shape, dt)) in enumerate(zip(tensors, self.template)):
            a = np.ascontiguousarray(t, dtype=dt)
            if a.shape != shape:
                raise PSError(f"{what}: tensor {i} has shape {a.shape}, expected {shape}")
            out.append(a)
        return out

    # ------------------------------------------------------------------ API
    def pull(self) -> tuple[list, int]:
        """Fetch the centre variable.

        Returns:
            ``(weights, clock)``: list of float32 arrays with the template's
            shapes (writable views of the received message) and the server clock.
        Raises:
            PSError / PSTimeout.
        """
        rep = self._request(P.Message(P.MsgType.PULL), P.MsgType.PULL_REPLY, self.template)
        self.last_clock = rep.clock
        return rep.tensors, rep.clock

    def commit(self, delta: Sequence[np.ndarray], seq: int, pull_clock: int) -> Ack:
        """Send one commit (``delta`` or elastic difference ``E``).

        Args:
            delta: list of arrays with the template's shapes (cast to float32).
            seq: this worker's commit sequence number; a repeated (worker, seq)
                is acknowledged but not applied again.
            pull_clock: the clock returned by the pull this delta is relative to
                (the server computes staleness ``tau = clock_now - pull_clock``).
        Returns:
            :class:`Ack`.
        Raises:
            PSError (bad shapes, NaN/inf, rejected) / PSTimeout.
        """
        rep = self._request(P.Message(P.MsgType.COMMIT, seq=seq, clock=pull_clock,
                                      tensors=self._payload(delta, "commit")),
                            P.MsgType.ACK, [])
        self.last_clock = rep.clock
        return Ack(rep.seq, rep.clock, rep.aux, bool(rep.flags & P.FLAG_DUPLICATE))

    def commit_and_pull(self, delta: Sequence[np.ndarray], seq: int,
                        pull_clock: int) -> tuple[list, int, Ack]:
        """Commit then pull in one round trip (same semantics as ``commit`` + ``pull``).

        Returns:
            ``(weights, clock, ack)``: the centre right after this commit was folded in.
        """
        rep = self._request(P.Message(P.MsgType.COMMIT, seq=seq, clock=pull_clock,
                                      flags=P.FLAG_PULL, tensors=self._payload(delta, "commit")),
                            P.MsgType.PULL_REPLY, self.template)
        self.last_clock = rep.clock
        return rep.tensors, rep.clock, Ack(rep.seq, rep.clock, rep.aux,
                                           bool(rep.flags & P.FLAG_DUPLICATE))

    def sync(self, contribution: Sequence[np.ndarray], round: int,
             timeout_s: float | None = None) -> list:
        """Contribute to barrier round ``round`` and wait for the new centre.

        Args:
            contribution: ``E_k`` (EASGD) or ``W_k`` (averaging), template shapes.
            round: the round number (0, 1, ...; the server's current round).
            timeout_s: wait bound for the barrier (default: the client's timeout).
        Returns:
            The new centre (list of float32 arrays); ``last_clock`` is set to the next round.
        Raises:
            PSError (wrong round, rejected, round timed out on the server) / PSTimeout.
        """
        rep = self._request(P.Message(P.MsgType.SYNC, clock=round,
                                      tensors=self._payload(contribution, "sync")),
                            P.MsgType.SYNC_REPLY, self.template, timeout_s)
        self.last_clock = rep.clock
        return rep.tensors

    def done(self) -> None:
        """Tell the server this worker has finished (see ``ParameterServer.wait_done``)."""
        self._request(P.Message(P.MsgType.DONE), P.MsgType.ACK, [])

    def close(self) -> None:
        """Close the transport (idempotent)."""
        if not self._closed:
            self._closed = True
            self._transport.close()

    def __enter__(self) -> "PSClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WorkerSession:
    """Runs one worker's side of any PS optimizer over a :class:`PSClient`.

    Follows the :class:`rules.OptimizerSpec` flags so the caller never branches
    on the optimizer: delta methods commit then pull (one round trip with
    ``commit_and_pull``), elastic async methods pull, compute ``E``, commit,
    sync methods contribute to the next barrier round.

    Args:
        client: a connected :class:`PSClient`.
        optimizer: name in :data:`rules.OPTIMIZERS`.
        params: parameter overrides (:func:`rules.resolve_params`).
        non_trainable: positions of the non-trainable weights (BatchNormalization's moving
            statistics). They are not the optimizer's: every exchange sends their current
            values in place of the rule's payload, and the worker keeps its own (the
            server's centre holds their mean over the workers, see
            :class:`~distbench.ps_async.server.ParameterServer`).
    Attributes:
        window: the communication window (None = once per epoch).
        staleness: list of ``tau`` values the server reported for this worker's commits.
    """

    def __init__(self, client: PSClient, optimizer: str,
                 params: Mapping[str, Any] | None = None, non_trainable: Sequence[int] = ()) -> None:
        self.client = client
        self.non_trainable = sorted(set(int(i) for i in non_trainable))
        self.spec = get_optimizer(optimizer)
        self.params = resolve_params(optimizer, params)
        self.window = self.params["communication_window"]
        self.seq = 0
        self.round = 0
        self.staleness: list[int] = []
        self._ref: list | None = None
        self._pull_clock = 0

    def start(self) -> list:
        """Pull the centre; returns a writable copy to load into the model."""
        c, clock = self.client.pull()
        self._ref, self._pull_clock = c, clock
        if self.spec.kind == SyncKind.SYNC:
            self.round = clock
        return [a.copy() for a in c]

    def exchange(self, weights: Sequence[np.ndarray], steps: int) -> list:
        """One communication step after ``steps`` local mini-batches.

        Args:
            weights: the model's current weights.
            steps: local steps since the last exchange (the final partial window
                passes its actual count; ADAG divides by it).
        Returns:
            The weights the worker continues from (writable arrays).
        Raises:
            RuntimeError if ``start`` was not called; PSError / PSTimeout.
        """
        if self._ref is None:
            raise RuntimeError("WorkerSession.exchange called before start()")
        spec, c = self.spec, self.client
        if spec.kind == SyncKind.SYNC:
            new_w, payload = spec.worker_commit(weights, self._ref, steps=steps,
                                                params=self.params)
            center = c.sync(self._own_state(payload, weights), self.round)
            self.round += 1
            self._ref = center
            return self._keep_state([a.copy() for a in center] if spec.adopt_center else list(new_w), weights)
        if spec.pull_before_commit:
            center, clock = c.pull()
            new_w, payload = spec.worker_commit(weights, center, steps=steps, params=self.params)
            ack = c.commit(self._own_state(payload, weights), self.seq, clock)
            self.seq += 1
            self.staleness.append(ack.staleness)
            return self._keep_state(list(new_w), weights)
        _, payload = spec.worker_commit(weights, self._ref, steps=steps, params=self.params)
        center, clock, ack = c.commit_and_pull(self._own_state(payload, weights), self.seq, self._pull_clock)
        self.seq += 1
        self.staleness.append(ack.staleness)
        self._ref, self._pull_clock = center, clock
        return self._keep_state([a.copy() for a in center], weights)

    def _own_state(self, payload: list, weights: Sequence[np.ndarray]) -> list:
        """``payload`` with the non-trainable positions replaced by the worker's current values."""
        if not self.non_trainable:
            return payload
        out = list(payload)
        for i in self.non_trainable:
            out[i] = weights[i]
        return out

    def _keep_state(self, new: list, weights: Sequence[np.ndarray]) -> list:
        """``new`` with the non-trainable positions kept from the worker's own weights."""
        for i in self.non_trainable:
            new[i] = np.array(weights[i], copy=True)
        return new

    def finish(self) -> None:
        """Send DONE (the caller still owns and closes the client)."""
        self.client.done()

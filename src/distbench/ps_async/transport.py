"""Transports of the parameter-server protocol: the interface, and ZeroMQ's implementation.

The server core (:class:`~distbench.ps_async.server.ParameterServer`) and the client
(:class:`~distbench.ps_async.client.PSClient`) speak the framed protocol of
:mod:`distbench.ps_async.protocol`; a transport only moves a message's frames between
them and knows nothing of the protocol. Two transports implement the interfaces here:
ZeroMQ (:class:`ZmqServerTransport`, :class:`ZmqClientTransport`; the Spark engine) and
MPI point-to-point (:mod:`distbench.ps_async.mpi`). Authentication, validation and every
bound on sizes, shapes and dtypes live in the core, so both transports get the same.

Why ZeroMQ (pyzmq, ROUTER on the server, DEALER on each client): it does the framing,
buffering and connection handling in its own I/O threads, so a peer that stalls
mid-message can never block the server loop; multipart messages let every tensor travel
in its own frame with zero-copy send (``copy=False``) and receive (``np.frombuffer``
over the ``zmq.Frame``); and ``MAXMSGSIZE`` lets libzmq drop a connection that
announces an oversized frame before allocating it. libzmq has no bound on the *number*
of frames in one multipart message, so a peer could make it buffer many frames before
the core sees them: keep the port on loopback or a private network.
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from typing import Callable

import zmq

from distbench.ps_async.protocol import ProtocolError

_LOG = logging.getLogger("distbench.ps_async.transport")

ALL_INTERFACES = ("0.0.0.0", "*", "::")


class SendFailed(RuntimeError):
    """A reply could not be handed to the transport (peer gone, its queue full)."""


@dataclass
class Incoming:
    """One message received by a server transport.

    Attributes:
        ident: the peer's identity (bytes; stable for one connection or one MPI rank).
        frames: the message's frames (header first); empty when ``error`` is set.
        error: a transport-level rejection (e.g. metadata announcing too many bytes),
            which the core answers like any other invalid message.
    """

    ident: bytes
    frames: list
    error: ProtocolError | None = None


class ServerTransport(abc.ABC):
    """What the parameter-server core needs from a transport.

    One thread (the core's serving thread) calls :meth:`receive`, :meth:`send` and
    :meth:`close`; :meth:`open` is called once before that thread starts.
    """

    @abc.abstractmethod
    def open(self, max_bytes: int) -> str:
        """Bind or attach; return the address clients connect to.

        Args:
            max_bytes: the core's bound on one message (bytes); a transport that can drop
                a larger message before allocating it does so.

        Raises:
            RuntimeError / OSError / zmq.ZMQError: the address cannot be bound.
        """

    @abc.abstractmethod
    def receive(self, timeout_s: float) -> Incoming | None:
        """The next message, or None if none arrived within ``timeout_s`` seconds."""

    @abc.abstractmethod
    def send(self, ident: bytes, frames: list) -> None:
        """Send one message's frames to peer ``ident`` without blocking.

        Frames may be sent without copying: the caller never modifies a frame's buffer
        after passing it here (the server never modifies its centre in place).

        Args:
            ident: the peer, as :meth:`receive` reported it.
            frames: the header then one frame per tensor: bytes-likes, arrays, or frames as
                this transport received them (which it may send on by reference).

        Raises:
            SendFailed: the message could not be queued (peer gone, queue full).
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release the transport (idempotent)."""


class ClientTransport(abc.ABC):
    """What :class:`~distbench.ps_async.client.PSClient` needs from a transport.

    Implementations take ``(address, max_bytes, timeout_s)`` in their constructor:
    the server's address, the bound on one incoming message (bytes) and the send bound
    (seconds). Not thread-safe: one per client.
    """

    @property
    @abc.abstractmethod
    def connected(self) -> bool:
        """True between :meth:`connect` and :meth:`reset`/:meth:`close`."""

    @abc.abstractmethod
    def connect(self) -> None:
        """Open a connection to the server (a new peer identity for the server)."""

    @abc.abstractmethod
    def send(self, frames: list) -> bool:
        """Send one message; False if it could not be sent within the send bound."""

    @abc.abstractmethod
    def receive(self, timeout_s: float) -> list | None:
        """The next message's frames, or None if none arrived within ``timeout_s``."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Drop the connection (after a timeout); the next request reconnects."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the transport (idempotent)."""


ClientTransportFactory = Callable[[str, int, float], ClientTransport]
"""``(address, max_bytes, timeout_s) -> ClientTransport``: how a client builds its transport."""


class ZmqServerTransport(ServerTransport):
    """A ZeroMQ ROUTER socket bound to ``tcp://host:port``.

    Args:
        host: interface to bind; binding all interfaces (``0.0.0.0``, ``*``, ``::``) is
            allowed only when asked for explicitly, and logged.
        port: TCP port; 0 = any free port.
        io_threads: ZeroMQ I/O threads.

    Incoming queues are bounded (64 messages per peer, ``RCVHWM``), as are outgoing ones.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, io_threads: int = 1) -> None:
        self.host, self.port, self.io_threads = host, int(port), int(io_threads)
        self._ctx: zmq.Context | None = None
        self._sock: zmq.Socket | None = None

    def open(self, max_bytes: int) -> str:
        """Bind the ROUTER socket (libzmq drops a peer announcing a frame over ``max_bytes``);
        return ``tcp://host:port`` with the port actually bound."""
        if self.host in ALL_INTERFACES:
            _LOG.warning("parameter server binds ALL interfaces (%s): any host that can reach this port can "
                         "attempt to connect", self.host)
        self._ctx = zmq.Context(io_threads=self.io_threads)
        sock = self._ctx.socket(zmq.ROUTER)
        for opt, value in ((zmq.LINGER, 0), (zmq.ROUTER_MANDATORY, 1), (zmq.MAXMSGSIZE, int(max_bytes)),
                           (zmq.RCVHWM, 64), (zmq.SNDHWM, 64)):
            sock.setsockopt(opt, value)
        host = self.host
        if ":" in host:
            sock.setsockopt(zmq.IPV6, 1)
            host = f"[{host}]"
        try:
            sock.bind(f"tcp://{host}:{self.port if self.port else '*'}")
        except zmq.ZMQError:
            sock.close(0)
            self._ctx.term()
            self._ctx = None
            raise
        self._sock = sock
        return sock.getsockopt_string(zmq.LAST_ENDPOINT)

    def receive(self, timeout_s: float) -> Incoming | None:
        """Wait up to ``timeout_s`` for a message (ROUTER prepends the peer identity)."""
        sock = self._sock
        if sock is None or not sock.poll(max(1, int(timeout_s * 1000)), zmq.POLLIN):
            return None
        try:
            frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return None
        return Incoming(frames[0].bytes, frames[1:])

    def send(self, ident: bytes, frames: list) -> None:
        """Queue the frames for ``ident`` without copying (``copy=False``): a received
        ``zmq.Frame`` goes out by reference count, an array through pyzmq's zero-copy path
        (frames under its copy threshold, 64 KiB, are copied).

        Raises:
            SendFailed: the peer is gone (EHOSTUNREACH) or its queue is full (EAGAIN).
        """
        try:
            self._sock.send(ident, zmq.SNDMORE | zmq.NOBLOCK)
            self._sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
        except zmq.ZMQError as e:
            raise SendFailed(str(e)) from None

    def close(self) -> None:
        """Close the socket and terminate the context."""
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None


class ZmqClientTransport(ClientTransport):
    """A ZeroMQ DEALER socket connected to the server's ``tcp://`` address.

    Args:
        address: the server's address (``tcp://127.0.0.1:5555``, ``tcp://[::1]:5555``).
        max_bytes: libzmq drops a server frame larger than this (bytes).
        timeout_s: bound on a blocked send (seconds).

    The socket comes from the process-wide ZeroMQ context, which :meth:`close` never terms.
    """

    def __init__(self, address: str, max_bytes: int, timeout_s: float) -> None:
        self.address, self.max_bytes, self.timeout_s = address, int(max_bytes), float(timeout_s)
        self._sock: zmq.Socket | None = None

    @property
    def connected(self) -> bool:
        """True while a socket is open."""
        return self._sock is not None

    def connect(self) -> None:
        """Open a DEALER socket and connect it (ZeroMQ connects in the background)."""
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_bytes)
        sock.setsockopt(zmq.SNDTIMEO, max(1, int(self.timeout_s * 1000)))
        if self.address.startswith("tcp://["):
            sock.setsockopt(zmq.IPV6, 1)
        sock.connect(self.address)
        self._sock = sock

    def send(self, frames: list) -> bool:
        """Send zero-copy; False when the send bound expired."""
        try:
            self._sock.send_multipart(frames, copy=False)
        except zmq.Again:
            return False
        return True

    def receive(self, timeout_s: float) -> list | None:
        """Wait up to ``timeout_s`` for the next message."""
        if not self._sock.poll(max(1, int(timeout_s * 1000)), zmq.POLLIN):
            return None
        return self._sock.recv_multipart(copy=False)

    def reset(self) -> None:
        """Close the socket (a late reply to it is lost with it)."""
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None

    def close(self) -> None:
        """Same as :meth:`reset`."""
        self.reset()

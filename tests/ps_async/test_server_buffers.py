"""The centre is never modified in place: commits fold into their own received buffers, which
replies send as they are (ParameterServer + PSClient over an in-memory transport)."""
import queue

import numpy as np
import pytest

from distbench.ps_async import protocol as P
from distbench.ps_async.client import PSClient
from distbench.ps_async.server import ParameterServer
from distbench.ps_async.transport import ClientTransport, Incoming, ServerTransport

from .test_server import INIT, SECRET, assert_center, ones

class MemoryLink:
    """A server transport and a client transport factory joined by in-process queues.

    Every delivered frame is a fresh copy (``bytearray``: writable, as ZeroMQ and MPI deliver;
    or ``bytes``: read-only); the server side records what it received and sent.
    """

    def __init__(self, writable=True):
        link, copy = self, (bytearray if writable else bytes)
        self.to_server, self.to_client = queue.Queue(), queue.Queue()
        self.received, self.sent = [], []

        class Server(ServerTransport):
            def open(self, max_bytes):
                return "mem://server"

            def receive(self, timeout_s):
                try:
                    frames = [copy(P.frame_view(f)) for f in link.to_server.get(timeout=timeout_s)]
                except queue.Empty:
                    return None
                link.received.append(frames)
                return Incoming(b"peer", frames)

            def send(self, ident, frames):
                link.sent.append(list(frames))
                link.to_client.put([copy(P.frame_view(f)) for f in frames])

            def close(self):
                pass

        class Client(ClientTransport):
            def __init__(self, address, max_bytes, timeout_s):
                self._on = False

            @property
            def connected(self):
                return self._on

            def connect(self):
                self._on = True

            def send(self, frames):
                link.to_server.put(list(frames))
                return True

            def receive(self, timeout_s):
                try:
                    return link.to_client.get(timeout=timeout_s)
                except queue.Empty:
                    return None

            def reset(self):
                self._on = False

            def close(self):
                self._on = False

        self.server, self.client = Server(), Client


@pytest.mark.parametrize("writable", [True, False])
def test_commit_folds_out_of_place_and_reply_reuses_the_received_buffers(writable):
    """C is never modified in place: a commit is folded into its own received buffers (when
    writable), which the reply then sends as they are; earlier replies keep their centre."""
    link = MemoryLink(writable)
    srv = ParameterServer(INIT, "dynsgd", SECRET, transport=link.server).start()
    try:
        c = PSClient("mem://server", SECRET, 0, INIT, timeout_s=3, transport=link.client)
        _, clock = c.pull()
        first = link.sent[-1][1:]  # the initial centre, as sent
        w, clock, ack = c.commit_and_pull(ones(4), 0, clock)
        got, reply = link.received[-1][1:], link.sent[-1][1:]
        assert all((r is g) == writable for r, g in zip(reply, got))
        np.testing.assert_array_equal(w[0], np.full((4, 3), 4))
        w, clock, ack = c.commit_and_pull(ones(4), 1, 0)  # tau = 1: dynsgd folds 4 / 2
        assert ack.staleness == 1
        np.testing.assert_array_equal(w[1], np.arange(3) + 6)
        for f, want in zip(first, INIT):  # not torn by the folds since
            np.testing.assert_array_equal(np.frombuffer(P.frame_view(f), np.float32), want.ravel())
        assert_center(srv, [np.full((4, 3), 6), np.arange(3) + 6])
        c.close()
    finally:
        srv.stop()

"""ParameterServer + PSClient over real loopback sockets (fast; no TensorFlow)."""
import json
import secrets
import socket
import struct
import threading
import time

import numpy as np
import pytest
import zmq

from distbench.ps_async import protocol as P
from distbench.ps_async.rules import OPTIMIZERS, resolve_params
from distbench.ps_async.client import PSClient, PSError, PSTimeout, WorkerSession
from distbench.ps_async.server import ParameterServer, staleness_summary

SECRET = b"0123456789abcdef-test-secret"
INIT = [np.zeros((4, 3), np.float32), np.arange(3, dtype=np.float32)]


def ones(k):
    return [np.full((4, 3), k, np.float32), np.full(3, k, np.float32)]


@pytest.fixture
def make_server():
    servers = []

    def make(optimizer="downpour", init=INIT, **kw):
        srv = ParameterServer(init, optimizer, SECRET, **kw).start()
        servers.append(srv)
        return srv

    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def make_client():
    clients = []

    def make(srv, wid=0, timeout_s=3.0, secret=SECRET, template=INIT):
        c = PSClient(srv.address, secret, wid, template, timeout_s=timeout_s)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def assert_center(srv, want):
    got = srv.center()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


class RawPeer:
    """A DEALER that speaks the protocol by hand, to send arbitrary (bad) frames."""

    def __init__(self, address, secret=SECRET, wid=0, authenticate=True):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)
        self.wid, self.token = wid, bytes(16)
        if authenticate:
            self.handshake(secret)

    def send(self, frames):
        self.sock.send_multipart([bytes(P.frame_view(f)) for f in frames])

    def request(self, msg=None, frames=None, timeout_s=3.0):
        if msg is not None:
            msg.worker_id, msg.token = self.wid, self.token
            frames = P.encode(msg)
        self.send(frames)
        assert self.sock.poll(int(timeout_s * 1000)), "no reply"
        got = self.sock.recv_multipart()
        return P.decode_header(got[0]), got

    def handshake(self, secret):
        cn = secrets.token_bytes(32)
        wid_b = self.wid.to_bytes(4, "little")
        h, got = self.request(P.Message(P.MsgType.HELLO, tensors=[np.frombuffer(cn, np.uint8)]))
        assert h.type == P.MsgType.CHALLENGE
        sn = got[1]
        proof = P.hmac_digest(secret, b"distbench-ps client", cn, sn, wid_b)
        h, got = self.request(P.Message(P.MsgType.AUTH, tensors=[np.frombuffer(proof, np.uint8)]))
        self.last = (h, got)
        if h.type == P.MsgType.WELCOME:
            self.token = P.hmac_digest(secret, b"distbench-ps session", cn, sn, wid_b)[:16]

    def close(self):
        self.sock.close(0)
        self.ctx.term()


def error_text(reply):
    h, got = reply
    assert h.type == P.MsgType.ERROR, h.type
    return got[1].decode()


# ----------------------------------------------------------------------------- basics
def test_binds_loopback_and_reports_port(make_server):
    srv = make_server()
    assert srv.address.startswith("tcp://127.0.0.1:") and srv.port > 0
    assert srv.address.endswith(str(srv.port))


def test_concurrent_commits_give_exact_center(make_server):
    srv = make_server(num_workers=8)
    n_commits = 25
    errors = []

    def worker(k):
        try:
            with PSClient(srv.address, SECRET, k, INIT, timeout_s=10) as c:
                _, clock = c.pull()
                for s in range(n_commits):
                    ack = c.commit(ones(k + 1), s, clock)
                    assert not ack.duplicate
                    _, clock = c.pull()
                c.done()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    total = n_commits * sum(range(1, 9))  # 25 * 36 = 900
    assert_center(srv, [np.full((4, 3), total), np.arange(3) + total])
    st = srv.stats()
    assert st["commits"] == 8 * n_commits and st["clock"] == 8 * n_commits
    assert st["per_worker_commits"] == {str(k): n_commits for k in range(8)}
    assert st["rejected"]["total"] == 0 and st["staleness"]["count"] == 8 * n_commits
    # its thread's CPU seconds handling messages (the cost model's per-exchange server time), within the process's
    assert 0 < st["server_busy_s"] <= time.process_time()
    assert st["workers_done"] == list(range(8)) and srv.wait_done(1)
    assert st["bytes_received"] > 8 * n_commits * 60 and st["bytes_sent"] > 0
    json.dumps(st)


def test_commit_and_pull_returns_folded_center(make_server, make_client):
    srv = make_server()
    c = make_client(srv)
    w, clock, ack = c.commit_and_pull(ones(2), 0, 0)
    assert clock == 1 and ack.staleness == 0 and not ack.duplicate
    np.testing.assert_array_equal(w[1], np.arange(3) + 2)
    w, clock, ack = c.commit_and_pull(ones(2), 0, 0)  # replay: same centre, flagged
    assert clock == 1 and ack.duplicate
    np.testing.assert_array_equal(w[1], np.arange(3) + 2)


def test_centre_kept_exactly_at_the_asked_clocks(make_server, make_client):
    # the epoch snapshots of a run: the centre right after the update that reaches each clock,
    # not whatever a poller saw later (a busy machine made two identical runs' curves differ)
    from distbench.ps_async.monitor import CentreMonitor

    srv = make_server()
    monitor = CentreMonitor(srv, total_updates=4, epochs=2).start()  # boundaries at clocks 2 and 4
    c = make_client(srv)
    centres = []
    for k in range(3):  # the run stops after 3 of its 4 updates
        centres.append(c.commit_and_pull(ones(1), k, k)[0])
    assert sorted(srv.snapshots_taken()) == [2]
    monitor.stop()
    (t2, e2, clock2, w2), (_, e4, clock4, w4) = monitor.snapshots
    assert (e2, clock2, e4, clock4) == (1, 2, 2, 3)  # never reached: the centre training left, its clock
    np.testing.assert_array_equal(w2[1], centres[1][1])
    np.testing.assert_array_equal(w4[1], centres[2][1])
    assert not np.array_equal(w2[1], w4[1])


# ----------------------------------------------------------------------------- auth
def test_wrong_secret_is_rejected_and_center_untouched(make_server, make_client):
    srv = make_server()
    with pytest.raises(PSError, match="prove it knows the run secret"):
        PSClient(srv.address, b"wrong-secret-wrong-secret", 0, INIT, timeout_s=3)
    peer = RawPeer(srv.address, secret=b"wrong-secret-wrong-secret")
    assert "authentication failed" in error_text(peer.last)
    # an unauthenticated peer forging a commit and a pull gets errors only
    for msg in (P.Message(P.MsgType.COMMIT, tensors=ones(5)), P.Message(P.MsgType.PULL)):
        peer.token = secrets.token_bytes(16)
        assert "not authenticated" in error_text(peer.request(msg))
    peer.close()
    assert_center(srv, INIT)
    assert srv.clock == 0 and srv.stats()["rejected"]["by_reason"]["auth"] == 3
    c = make_client(srv)  # the right secret still works
    c.commit(ones(1), 0, 0)
    assert srv.clock == 1


def test_session_token_bound_to_peer(make_server):
    srv = make_server(num_workers=2)
    good = RawPeer(srv.address, wid=0)
    thief = RawPeer(srv.address, authenticate=False, wid=0)
    thief.token = good.token  # a valid token, but from another connection
    assert "not authenticated" in error_text(thief.request(P.Message(P.MsgType.PULL)))
    h, _ = good.request(P.Message(P.MsgType.PULL))
    assert h.type == P.MsgType.PULL_REPLY
    good.close(), thief.close()


def test_authenticated_peer_cannot_use_other_id_or_bad_token(make_server):
    srv = make_server(num_workers=2)
    peer = RawPeer(srv.address, wid=0)
    peer.wid = 1  # its session belongs to worker 0
    assert "not authenticated" in error_text(peer.request(P.Message(P.MsgType.PULL)))
    peer.wid, token = 0, peer.token
    peer.token = bytes(b ^ 1 for b in token)
    assert "not authenticated" in error_text(
        peer.request(P.Message(P.MsgType.COMMIT, tensors=ones(1))))
    peer.token = token
    h, _ = peer.request(P.Message(P.MsgType.COMMIT, tensors=ones(1)))
    assert h.type == P.MsgType.ACK and srv.clock == 1
    peer.close()


def test_worker_id_out_of_range(make_server):
    srv = make_server(num_workers=2)
    with pytest.raises(PSError, match="worker id 2 out of range"):
        PSClient(srv.address, SECRET, 2, INIT, timeout_s=3)


# ----------------------------------------------------------------------------- bad frames
def _commit_frames(peer, tensors, seq=0, clock=0):
    msg = P.Message(P.MsgType.COMMIT, worker_id=peer.wid, token=peer.token, seq=seq,
                    clock=clock, req_id=7, tensors=tensors)
    return [bytes(P.frame_view(f)) for f in P.encode(msg)]


def _bad_cases(peer):
    good = ones(1)
    f = _commit_frames(peer, good)
    nan = ones(1)
    nan[0][2, 1] = np.nan
    shape = [np.ones((3, 4), np.float32), good[1]]
    return {
        "truncated": f[:1] + [f[1][:-4]] + f[2:],
        "shape": _commit_frames(peer, shape),
        "dtype": _commit_frames(peer, [good[0].astype(np.float64), good[1]]),
        "nonfinite": _commit_frames(peer, nan),
        "size": f + [b"\0" * 2000] * 40,  # 80 kB of extra frames: over max_bytes
        "count": _commit_frames(peer, good[:1]),
    }


@pytest.mark.parametrize("kind", ["truncated", "shape", "dtype", "nonfinite", "size", "count"])
def test_bad_commit_rejected_center_untouched_server_still_serves(make_server, make_client, kind):
    srv = make_server()
    peer = RawPeer(srv.address, wid=0)
    text = error_text(peer.request(frames=_bad_cases(peer)[kind]))
    assert text.startswith(kind + ":"), text
    assert "expected" in text or "exceeds" in text
    assert_center(srv, INIT)
    assert srv.clock == 0 and srv.stats()["rejected"]["by_reason"] == {kind: 1}
    c = make_client(srv, wid=1)
    assert c.commit(ones(3), 0, 0).clock == 1
    assert_center(srv, [np.full((4, 3), 3), np.arange(3) + 3])
    peer.close()


def test_frame_over_transport_limit_drops_peer_not_server(make_server, make_client):
    srv = make_server()
    peer = RawPeer(srv.address, wid=0)
    peer.send([b"x" * (srv.max_bytes + 10)])  # libzmq MAXMSGSIZE: connection dropped
    assert not peer.sock.poll(500)
    assert_center(srv, INIT)
    c = make_client(srv, wid=1)
    assert c.commit(ones(1), 0, 0).clock == 1
    peer.close()


def test_client_checks_shapes_locally(make_server, make_client):
    c = make_client(make_server())
    with pytest.raises(PSError, match="tensor 0 has shape"):
        c.commit([np.ones((3, 4)), np.ones(3)], 0, 0)
    with pytest.raises(PSError, match="nonfinite"):
        c.commit([np.full((4, 3), np.inf), np.ones(3)], 0, 0)


def test_pull_in_flight_is_not_torn_by_a_later_commit(make_server, make_client):
    """A slow reader's pending pull must still carry the centre as it was (copy-on-write)."""
    big = [np.zeros(8 << 20, np.float32)]  # 32 MB: more than the kernel buffers hold
    srv = make_server(init=big, num_workers=2)
    slow = RawPeer(srv.address, wid=0, authenticate=False)
    slow.sock.close(0)
    slow.sock = slow.ctx.socket(zmq.DEALER)
    slow.sock.setsockopt(zmq.LINGER, 0)
    slow.sock.setsockopt(zmq.RCVHWM, 1)
    slow.sock.setsockopt(zmq.RCVBUF, 4096)
    slow.sock.connect(srv.address)
    slow.handshake(SECRET)
    for _ in range(2):  # two pulls; the second stays stuck in the server's send queue
        slow.send(P.encode(P.Message(P.MsgType.PULL, worker_id=0, token=slow.token)))
    deadline = time.monotonic() + 10
    while srv.stats()["pulls"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # both pulls answered (the 2nd reply is still being sent)
    time.sleep(0.1)
    fast = make_client(srv, wid=1, template=big, timeout_s=10)
    assert fast.commit([np.ones(8 << 20, np.float32)], 0, 0).clock == 1
    for _ in range(2):
        assert slow.sock.poll(10_000)
        got = slow.sock.recv_multipart()
        assert P.decode_header(got[0]).clock == 0
        assert not np.frombuffer(got[1], np.float32).any(), "pulled centre was torn"
    assert srv.center()[0].min() == 1
    slow.close()


def test_client_recovers_after_timeout_and_retry_is_not_double_counted(make_server):
    srv = make_server("averaging", num_workers=2)
    with PSClient(srv.address, SECRET, 0, INIT, timeout_s=0.3) as c0:
        with pytest.raises(PSTimeout):
            c0.sync(ones(1), 0)  # worker 1 is late
        out = {}
        t = threading.Thread(target=lambda: out.update(r=c0.sync(ones(100), 0, timeout_s=5)))
        t.start()  # retry of the same round: reconnects, server keeps the first contribution
        with PSClient(srv.address, SECRET, 1, INIT, timeout_s=5) as c1:
            mine = c1.sync(ones(5), 0)
        t.join(5)
    np.testing.assert_array_equal(mine[0], np.full((4, 3), 3))  # mean(1, 5), not (100, 5)
    np.testing.assert_array_equal(out["r"][0], np.full((4, 3), 3))


# ----------------------------------------------------------------------------- idempotence
def test_replayed_commit_is_acknowledged_not_applied(make_server, make_client):
    srv = make_server()
    c = make_client(srv)
    assert not c.commit(ones(2), 5, 0).duplicate
    ack = c.commit(ones(2), 5, 0)
    assert ack.duplicate and ack.clock == 1
    c2 = make_client(srv, wid=0)  # a retried task: new connection, same worker id
    assert c2.commit(ones(2), 5, 0).duplicate
    assert not c2.commit(ones(2), 6, 1).duplicate
    assert_center(srv, [np.full((4, 3), 4), np.arange(3) + 4])
    st = srv.stats()
    assert st["commits"] == 2 and st["duplicate_commits"] == 2 and st["clock"] == 2


def test_future_pull_clock_rejected(make_server, make_client):
    srv = make_server()
    with pytest.raises(PSError, match="pull clock 3"):
        make_client(srv).commit(ones(1), 0, 3)
    assert srv.clock == 0


# ----------------------------------------------------------------------------- staleness
def test_staleness_scripted_interleaving(make_server, make_client):
    srv = make_server(num_workers=3)
    a, b, d = make_client(srv, 0), make_client(srv, 1), make_client(srv, 2)
    _, ca = a.pull()
    _, cb = b.pull()
    _, cd = d.pull()
    assert (ca, cb, cd) == (0, 0, 0)
    assert a.commit(ones(1), 0, ca).staleness == 0      # clock 0 -> 1
    assert b.commit(ones(1), 0, cb).staleness == 1      # 1 update since b pulled
    _, ca = a.pull()
    assert ca == 2
    assert d.commit(ones(1), 0, cd).staleness == 2      # clock 2, pulled at 0
    assert a.commit(ones(1), 1, ca).staleness == 1      # clock 3, pulled at 2
    s = srv.stats()["staleness"]
    assert s["histogram"] == {"0": 1, "1": 2, "2": 1}
    assert (s["min"], s["median"], s["max"], s["count"]) == (0, 1.0, 2, 4)


def test_staleness_summary_quantiles():
    s = staleness_summary({0: 50, 1: 45, 9: 5})
    assert s["median"] == 0.5 and s["p95"] == pytest.approx(1 + 8 * 0.05)
    assert s["max"] == 9 and s["mean"] == pytest.approx((45 + 45) / 100)
    assert staleness_summary({})["median"] is None


def test_dynsgd_fold_uses_staleness(make_server, make_client):
    srv = make_server("dynsgd", num_workers=2)
    a, b = make_client(srv, 0), make_client(srv, 1)
    a.commit(ones(6), 0, 0)   # tau 0: +6
    b.commit(ones(6), 0, 0)   # tau 1: +3
    b.commit(ones(6), 1, 0)   # tau 2: +2
    a.commit(ones(12), 1, 1)  # tau 2: +4
    assert_center(srv, [np.full((4, 3), 15), np.arange(3) + 15])


# ----------------------------------------------------------------------------- sync
def _run_sync(srv, contributions, round_=0, timeout_s=5.0, template=INIT):
    results, errors = {}, {}

    def go(k, contrib):
        try:
            with PSClient(srv.address, SECRET, k, template, timeout_s=timeout_s) as c:
                results[k] = c.sync(contrib, round_)
        except Exception as e:
            errors[k] = e

    ts = [threading.Thread(target=go, args=(k, c)) for k, c in contributions.items()]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    return results, errors


def test_sync_easgd_round_with_two_clients(make_server):
    init = [np.zeros(2, np.float32)]
    srv = make_server("easgd", init=init, num_workers=2)
    C = srv.center()
    spec, p = OPTIMIZERS["easgd"], resolve_params("easgd")
    w1, e1 = spec.worker_commit([np.array([2, 4], np.float32)], C, params=p)
    w2, e2 = spec.worker_commit([np.array([-2, 8], np.float32)], C, params=p)
    results, errors = _run_sync(srv, {0: e1, 1: e2}, template=init)
    assert not errors, errors
    for k in (0, 1):
        np.testing.assert_array_equal(results[k][0], [0, 6])  # E1=[1,2], E2=[-1,4]
    np.testing.assert_array_equal(w1[0], [1, 2])
    assert_center(srv, [[0, 6]])
    assert srv.stats()["sync_rounds"] == 1 and srv.clock == 1


def test_sync_averaging_and_wrong_round(make_server, make_client):
    srv = make_server("averaging", num_workers=2)
    results, errors = _run_sync(srv, {0: ones(1), 1: ones(5)})
    assert not errors, errors
    np.testing.assert_array_equal(results[1][1], [3, 3, 3])
    c = make_client(srv, 0)
    with pytest.raises(PSError, match="round 5, but the server is at round 1"):
        c.sync(ones(1), 5)
    # re-sending the completed round (a retried task) returns its result, applies nothing
    np.testing.assert_array_equal(c.sync(ones(9), 0)[1], [3, 3, 3])
    assert srv.clock == 1
    with pytest.raises(PSError, match="synchronous; expected SYNC"):
        c.commit(ones(1), 0, 0)


def test_sync_round_times_out_naming_missing_worker(make_server):
    srv = make_server("averaging", num_workers=2, sync_timeout_s=0.5)
    t0 = time.monotonic()
    results, errors = _run_sync(srv, {0: ones(1)})
    assert time.monotonic() - t0 < 4
    assert isinstance(errors[0], PSError) and "missing [1]" in str(errors[0])
    assert_center(srv, INIT)


def test_a_worker_that_leaves_releases_its_peers_at_the_barrier_at_once(make_server, make_client):
    # a replica that diverged sends DONE instead of its contribution: the others must not wait
    # for the sync timeout (minutes) but stop with kind "left"
    srv = make_server("averaging", num_workers=2, sync_timeout_s=60)
    c1 = make_client(srv, 1)
    t = threading.Timer(0.5, c1.done)
    t.start()
    t0 = time.monotonic()
    results, errors = _run_sync(srv, {0: ones(1)})
    t.join()
    assert time.monotonic() - t0 < 10
    assert isinstance(errors[0], PSError) and errors[0].kind == "left" and "worker(s) [1] left the run" in str(errors[0])
    c0 = make_client(srv, 0)
    with pytest.raises(PSError, match="left the run") as e:  # a later round is refused at once too
        c0.sync(ones(1), 0)
    assert e.value.kind == "left"
    assert_center(srv, INIT)


def test_start_barrier_welcomes_every_worker_together(make_server, make_client):
    # Spark's task barrier released each replica on its own 1 s poll: up to 1 s of start skew on
    # the synchronous optimizers' clock; the server's start barrier holds each WELCOME instead
    srv = make_server("averaging", num_workers=2, start_barrier=True)
    done: dict[int, float] = {}

    def connect(wid):
        make_client(srv, wid, timeout_s=10)
        done[wid] = time.monotonic()

    t = threading.Thread(target=connect, args=(0,))
    t.start()
    time.sleep(0.6)
    assert not done  # worker 0 authenticated, but waits for worker 1
    connect(1)
    t.join(10)
    assert set(done) == {0, 1} and abs(done[0] - done[1]) < 0.2
    make_client(srv, 1)  # released once: a later handshake (a retried task) passes at once
    with pytest.raises(ValueError, match="start_barrier needs num_workers"):
        ParameterServer(INIT, "downpour", SECRET, start_barrier=True)


def test_client_timeout_when_barrier_never_completes(make_server):
    srv = make_server("averaging", num_workers=2)
    results, errors = _run_sync(srv, {0: ones(1)}, timeout_s=0.5)
    assert isinstance(errors[0], PSTimeout)


# ----------------------------------------------------------------------------- stop
def _zmtp_stuck_peer(port):
    """Raw TCP peer: valid ZMTP 3.0 greeting + READY, then half of a 40 kB message frame."""
    s = socket.create_connection(("127.0.0.1", port))
    greeting = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" * 32
    s.sendall(greeting)
    body = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
    s.sendall(b"\x04" + bytes([len(body)]) + body)
    s.sendall(b"\x02" + struct.pack(">Q", 40_000) + b"\0" * 20_000)  # partial frame
    return s


def test_stop_returns_with_client_stuck_mid_message(make_server, make_client):
    srv = make_server()
    stuck = _zmtp_stuck_peer(srv.port)
    garbage = socket.create_connection(("127.0.0.1", srv.port))
    garbage.sendall(b"\xff\0\0")  # partial greeting
    time.sleep(0.2)
    c = make_client(srv)  # still serving others meanwhile
    assert c.commit(ones(1), 0, 0).clock == 1
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 3
    stuck.close(), garbage.close()


def test_stop_while_worker_waits_in_barrier(make_server):
    srv = make_server("averaging", num_workers=2)
    out = {}
    th = threading.Thread(target=lambda: out.update(_run_sync(srv, {0: ones(1)}, timeout_s=2)[1]))
    th.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 3
    th.join(5)
    assert isinstance(out[0], PSError)


# ----------------------------------------------------------------------------- session helper
@pytest.mark.parametrize("name, expected", [
    ("downpour", 6.0), ("dynsgd", 6.0), ("adag", 2.0), ("aeasgd", 3.0), ("eamsgd", 3.0),
])
def test_worker_session_async(make_server, make_client, name, expected):
    init = [np.zeros(2, np.float32)]
    srv = make_server(name, init=init, num_workers=1)
    session = WorkerSession(make_client(srv, template=init), name)
    w = session.start()
    np.testing.assert_array_equal(w[0], [0, 0])
    w = session.exchange([np.full(2, 6, np.float32)], steps=3)
    # delta methods adopt C (= 6, or 6/3 for ADAG); elastic: E = 0.5 * (6 - 0), W = 6 - 3
    np.testing.assert_array_equal(w[0], [expected, expected])
    c_expected = 3.0 if name in ("aeasgd", "eamsgd") else expected
    assert_center(srv, [[c_expected, c_expected]])
    assert session.staleness == [0]
    session.finish()
    assert srv.wait_done(1)


def test_worker_session_sync_easgd_single_worker(make_server, make_client):
    init = [np.zeros(2, np.float32)]
    srv = make_server("easgd", init=init, num_workers=1)
    session = WorkerSession(make_client(srv, template=init), "easgd")
    session.start()
    w = session.exchange([np.array([2, 4], np.float32)], steps=32)
    np.testing.assert_array_equal(w[0], [1, 2])
    assert_center(srv, [[1, 2]])
    w = session.exchange([np.array([3, 2], np.float32)], steps=32)  # E = 0.5*([3,2]-[1,2])
    np.testing.assert_array_equal(w[0], [2, 2])
    assert_center(srv, [[2, 2]])
    assert session.round == 2 and srv.stats()["sync_rounds"] == 2


# ------------------------------------------------------------- non-trainable state (BatchNorm statistics)

def test_non_trainable_positions_hold_the_mean_of_the_workers_latest_values(make_server, make_client):
    # position 0: trainable (DOWNPOUR: C += delta); position 1: moving statistics (mean of latest values)
    srv = make_server("downpour", num_workers=2, non_trainable=[1])
    a, b = WorkerSession(make_client(srv, 0), "downpour", non_trainable=[1]), \
        WorkerSession(make_client(srv, 1), "downpour", non_trainable=[1])
    a.start(), b.start()
    w_a = [INIT[0] + 1, np.full(3, 10, np.float32)]  # delta 1 on the weights; statistics 10
    new_a = a.exchange(w_a, steps=1)
    assert_center(srv, [INIT[0] + 1, np.full(3, 10, np.float32)])  # one worker so far: its statistics
    np.testing.assert_array_equal(new_a[1], w_a[1])  # the worker keeps its own statistics
    b.exchange([INIT[0] + 2, np.full(3, 20, np.float32)], steps=1)
    assert_center(srv, [INIT[0] + 3, np.full(3, 15, np.float32)])  # deltas summed; statistics averaged
    a.exchange([new_a[0] + 1, np.full(3, 30, np.float32)], steps=1)  # a's latest statistics replace its first
    assert_center(srv, [INIT[0] + 4, np.full(3, 25, np.float32)])


def test_synchronous_rounds_average_the_non_trainable_positions(make_server, make_client):
    srv = make_server("easgd", num_workers=2, non_trainable=[1], params={"rho": 1.0, "learning_rate": 0.5})
    sessions = [WorkerSession(make_client(srv, k), "easgd", {"rho": 1.0, "learning_rate": 0.5}, non_trainable=[1])
                for k in range(2)]
    for s in sessions:
        s.start()
    weights = [[INIT[0] + 2, np.full(3, 4, np.float32)], [INIT[0] + 4, np.full(3, 8, np.float32)]]
    threads = [threading.Thread(target=s.exchange, args=(w, 1)) for s, w in zip(sessions, weights)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    # EASGD, alpha = 0.5: C += sum_k 0.5 (W_k - C) = 0 + 0.5*2 + 0.5*4 = 3 on the weights; statistics: mean(4, 8)
    assert_center(srv, [INIT[0] + 3, np.full(3, 6, np.float32)])


def test_non_trainable_positions_out_of_range_are_refused():
    with pytest.raises(ValueError, match="non_trainable positions"):
        ParameterServer(INIT, "downpour", SECRET, non_trainable=[5])

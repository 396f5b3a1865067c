"""The parameter server under load and under hostile input (no TensorFlow)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distbench.ps_async import protocol as P
from distbench.ps_async.client import PSClient
from tests.conftest import ROOT

HERE = Path(__file__).parent


class ServerProcess:
    """A ParameterServer in a child process (so its memory is measured alone)."""

    def __init__(self, params: int, workers: int, optimizer: str = "downpour") -> None:
        self.secret = secrets.token_bytes(32)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
        self.proc = subprocess.Popen([sys.executable, str(HERE / "ps_server_proc.py"), str(params), str(workers),
                                      optimizer, self.secret.hex()], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        self.address = json.loads(self.proc.stdout.readline())["address"]
        self.template = [((params - 10,), np.float32), ((10,), np.float32)]

    def finish(self) -> dict:
        self.proc.stdin.close()
        out = json.loads(self.proc.stdout.readline())
        self.proc.wait(30)
        return out

    def rss(self) -> int:
        return int(Path(f"/proc/{self.proc.pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_concurrent_clients_exact_sum(request):
    long = request.config.getoption("--long")
    clients, cycles, params = (32, 500, 1_000_000) if long else (32, 60, 100_000)
    srv = ServerProcess(params, clients)
    errors: list[BaseException] = []
    t0 = time.monotonic()

    def run(k: int) -> None:
        try:
            c = PSClient(srv.address, srv.secret, k, srv.template, timeout_s=120)
            _, clock = c.pull()
            delta = [np.full(s, (k % 7) + 1, np.float32) for s, _ in srv.template]
            for seq in range(cycles):
                c.commit(delta, seq, clock)
                _, clock = c.pull()
            c.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = srv.finish()
    elapsed = time.monotonic() - t0
    assert errors == []
    expected = cycles * sum((k % 7) + 1 for k in range(clients))  # integer-valued: exact in float32
    assert out["uniform"] == [True, True] and out["first"] == [expected, expected]
    assert out["stats"]["commits"] == clients * cycles and out["stats"]["rejected"]["total"] == 0
    model_bytes = params * 4
    # bounded: the centre, its copy-on-write copy and the messages in flight, not the traffic
    assert out["peak_rss_bytes"] < 400e6 + 12 * model_bytes, out["peak_rss_bytes"]
    print(f"\n{clients} clients x {cycles} commit+pull cycles on {params:,} parameters: exact sum {expected}, "
          f"{elapsed:.1f} s, server peak RSS {out['peak_rss_bytes'] / 1e6:.0f} MB")


# ------------------------------------------------------------------ hostile input
TEMPLATE_SHAPES = [(1000 - 10,), (10,)]


def _legit_round_trip(address: str, secret: bytes, wid: int) -> None:
    c = PSClient(address, secret, wid, [(s, np.float32) for s in TEMPLATE_SHAPES], timeout_s=10)
    try:
        c.pull()
    finally:
        c.close()


def _frames(draw: st.DrawFn, token: bytes, wid: int) -> tuple[str, list[bytes]]:
    """One adversarial message (list of frames)."""
    kind = draw(st.sampled_from(["random", "truncated", "lying", "huge", "count", "shape", "dtype", "nan",
                                 "replay", "unauth", "badtoken", "replytype"]))
    return kind, _make(draw, kind, token, wid)


def _make(draw: st.DrawFn, kind: str, token: bytes, wid: int) -> list[bytes]:
    good = P.encode(P.Message(P.MsgType.COMMIT, worker_id=wid, seq=draw(st.integers(0, 3)), clock=0,
                              token=token, tensors=[np.ones(s, np.float32) for s in TEMPLATE_SHAPES]))
    hdr = bytearray(good[0])
    body = [bytes(P.frame_view(f)) for f in good[1:]]
    if kind == "random":
        return [draw(st.binary(max_size=200)) for _ in range(draw(st.integers(1, 4)))]
    if kind == "truncated":
        return [bytes(hdr[: draw(st.integers(0, len(hdr) - 1))])] + body
    if kind == "lying":  # header promises other descriptors than the frames carry
        return [bytes(hdr)] + [b[: draw(st.integers(0, len(b) - 1))] for b in body]
    if kind == "huge":
        return [bytes(hdr)] + [b"\0" * draw(st.integers(8_000, 70_000))] * 2
    if kind == "count":
        return [bytes(hdr)] + body[:1]
    if kind == "shape":
        bad = P.encode(P.Message(P.MsgType.COMMIT, worker_id=wid, token=token,
                                 tensors=[np.ones((5, 7), np.float32), np.ones(10, np.float32)]))
        return [bytes(P.frame_view(f)) for f in bad]
    if kind == "dtype":
        bad = P.encode(P.Message(P.MsgType.COMMIT, worker_id=wid, token=token,
                                 tensors=[np.ones(s, np.float64) for s in TEMPLATE_SHAPES]))
        return [bytes(P.frame_view(f)) for f in bad]
    if kind == "nan":
        t = [np.ones(s, np.float32) for s in TEMPLATE_SHAPES]
        t[draw(st.integers(0, 1))].flat[0] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        bad = P.encode(P.Message(P.MsgType.COMMIT, worker_id=wid, token=token, tensors=t))
        return [bytes(P.frame_view(f)) for f in bad]
    if kind == "replay":  # a commit with a sequence number the fuzzer's peer already used
        return [bytes(hdr)] + body
    if kind == "unauth":
        bad = P.encode(P.Message(P.MsgType.COMMIT, worker_id=wid, token=bytes(16),
                                 tensors=[np.ones(s, np.float32) for s in TEMPLATE_SHAPES]))
        return [bytes(P.frame_view(f)) for f in bad]
    if kind == "badtoken":
        bad = P.encode(P.Message(P.MsgType.PULL, worker_id=(wid + 1) % 2, token=token))
        return [bytes(P.frame_view(f)) for f in bad]
    bad = P.encode(P.Message(P.MsgType.PULL_REPLY, worker_id=wid, token=token))
    return [bytes(P.frame_view(f)) for f in bad]


def test_hostile_frames_are_all_rejected(request):
    """Thousands of malformed frames, unauthenticated and wrongly authenticated peers and a
    slow-loris TCP peer: none is accepted, the centre stays zero, memory stays bounded, and
    a legitimate client is served throughout. (The fuzzer's own authenticated peer sends
    only invalid COMMITs; its one valid-looking commit per seq is the replay probe: the
    server sees seq 0..3 at most once each, so at most 4 may apply; we check that the
    centre changed by at most those, and that everything else was rejected.)"""
    long = request.config.getoption("--long")
    n_frames = 100_000 if long else 10_000
    srv = ServerProcess(1000, 2)
    from tests.ps_async.test_server import RawPeer

    legit_errors: list[BaseException] = []
    stop = threading.Event()
    served = [0]

    def legit() -> None:
        while not stop.is_set():
            try:
                _legit_round_trip(srv.address, srv.secret, 1)
                served[0] += 1
            except BaseException as e:  # noqa: BLE001
                legit_errors.append(e)
                return
            time.sleep(0.05)

    lt = threading.Thread(target=legit)
    lt.start()
    # slow loris: a raw TCP peer that sends half a ZMTP greeting and stalls
    host, port = srv.address[len("tcp://"):].rsplit(":", 1)
    loris = socket.create_connection((host, int(port)))
    loris.sendall(b"\xff\x00\x00\x00")
    wrong = RawPeer(srv.address, secret=b"not-the-secret-0123456789", wid=0)
    assert wrong.last[0].type == P.MsgType.ERROR  # wrong secret: no session
    peer = RawPeer(srv.address, secret=srv.secret, wid=0)
    rss0 = srv.rss()
    sent = [0]
    huge = [0]
    ctx = zmq.Context()

    @settings(max_examples=n_frames // 20, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        for _ in range(20):
            kind, frames = _frames(data.draw, peer.token, 0)
            if kind == "huge":  # ZeroMQ drops an oversized message and the connection with it:
                big = ctx.socket(zmq.DEALER)  # send it on a throwaway connection
                big.setsockopt(zmq.LINGER, 0)
                big.connect(srv.address)
                big.send_multipart(frames)
                big.close(linger=100)
                huge[0] += 1
            else:
                peer.send(frames)
            sent[0] += 1
            if peer.sock.poll(0):
                while peer.sock.poll(0):
                    peer.sock.recv_multipart()

    fuzz()
    time.sleep(0.5)
    while peer.sock.poll(200):
        peer.sock.recv_multipart()
    rss1 = srv.rss()
    stop.set()
    lt.join()
    loris.close()
    peer.close()
    wrong.close()
    ctx.term()
    out = srv.finish()
    assert legit_errors == [] and served[0] > 0
    stats = out["stats"]
    assert sent[0] >= n_frames
    # the only messages that can apply are the 4 distinct well-formed "replay" commits
    # (seq 0..3, delta 1 each); every other frame was rejected
    assert stats["commits"] <= 4 and out["uniform"] == [True, True]
    assert out["first"][0] == stats["commits"]
    # every other message was rejected with a reason, except the oversized ones, which
    # ZeroMQ itself drops (MAXMSGSIZE) before they reach the server
    assert stats["rejected"]["total"] + stats["commits"] + stats["duplicate_commits"] >= sent[0] - huge[0]
    assert rss1 - rss0 < 50e6, (rss0, rss1)
    print(f"\n{sent[0]} adversarial messages: {stats['rejected']['total']} rejected "
          f"({stats['rejected']['by_reason']}), {stats['commits']} distinct valid commits applied once, "
          f"{stats['duplicate_commits']} replays ignored; legit round trips during fuzzing: {served[0]}; "
          f"server RSS {rss0 / 1e6:.0f} -> {rss1 / 1e6:.0f} MB")


def test_server_never_binds_all_interfaces_by_default():
    srv = ServerProcess(100, 1)
    try:
        assert srv.address.startswith("tcp://127.0.0.1:")
    finally:
        srv.finish()
    for f in (ROOT / "src" / "distbench").rglob("*.py"):
        text = f.read_text()
        assert "pickle.loads" not in text and "import pickle" not in text, f

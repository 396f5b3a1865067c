"""One TCP stream for the shaped-link tests.

``python tcp_probe.py listen ADDR``: listen on ADDR (any port), print ``PORT <p>``, receive
until EOF, print ``MBPS <MB/s>`` (10^6 bytes per second, from the first byte received).
``python tcp_probe.py send ADDR PORT MB``: connect and send MB megabytes (2^20 bytes each).
Both give up after 60 s.
"""

from __future__ import annotations

import socket
import sys
import time


def main() -> None:
    if sys.argv[1] == "listen":
        srv = socket.socket()
        srv.settimeout(60)
        srv.bind((sys.argv[2], 0))
        srv.listen(1)
        print("PORT", srv.getsockname()[1], flush=True)
        conn, _ = srv.accept()
        conn.settimeout(60)
        got, t0 = 0, None
        while True:
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            if t0 is None:
                t0 = time.perf_counter()
            got += len(chunk)
        print("MBPS", got / (time.perf_counter() - t0) / 1e6, flush=True)
    else:
        conn = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=60)
        block = b"x" * (1 << 20)
        for _ in range(int(sys.argv[4])):
            conn.sendall(block)
        conn.close()


if __name__ == "__main__":
    main()

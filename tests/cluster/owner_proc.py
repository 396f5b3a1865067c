"""Owns an emulated cluster until killed (the clean-up tests): ``owner_proc.py SUBNET``
creates a 2-host cluster on SUBNET, prints its id, and sleeps."""

from __future__ import annotations

import sys
import time

from distbench.cluster.emulated import EmulatedCluster

if __name__ == "__main__":
    with EmulatedCluster(2, bandwidth="100mbit", subnet=sys.argv[1]) as c:
        print(c.id, flush=True)
        while True:
            time.sleep(0.5)

"""Owns an emulated cluster until killed (the clean-up tests): ``owner_proc.py SUBNET
[LAUNCHER]`` creates a 2-host cluster on SUBNET (launcher ``agent`` or ``ssh``), prints
its id, and sleeps."""

from __future__ import annotations

import sys
import time

from distbench.cluster.emulated import EmulatedCluster

if __name__ == "__main__":
    launcher = sys.argv[2] if len(sys.argv) > 2 else "agent"
    with EmulatedCluster(2, bandwidth="100mbit", subnet=sys.argv[1], launcher=launcher) as c:
        print(c.id, flush=True)
        while True:
            time.sleep(0.5)

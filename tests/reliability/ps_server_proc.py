"""A parameter server in its own process, for load and fuzz tests: prints its address,
serves until stdin closes, then prints stats, the centre's checksum and its peak RSS."""

import json
import resource
import sys

import numpy as np

from distbench.ps_async.server import ParameterServer

def peak_rss() -> int:
    """This process's peak resident set (VmHWM), bytes. Not getrusage's ru_maxrss: Linux
    carries that across execve from the forking parent (a big pytest process)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


params, workers, optimizer, secret_hex = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
init = [np.zeros(params - 10, np.float32), np.zeros(10, np.float32)]
srv = ParameterServer(init, optimizer, bytes.fromhex(secret_hex), num_workers=workers).start()
print(json.dumps({"address": srv.address}), flush=True)
sys.stdin.read()  # the test closes stdin when done
stats, centre = srv.stats(), srv.center()
srv.stop()
print(json.dumps({"stats": stats, "sums": [float(c.astype(np.float64).sum()) for c in centre],
                  "uniform": [bool((c == c.flat[0]).all()) for c in centre],
                  "first": [float(c.flat[0]) for c in centre],
                  "peak_rss_bytes": peak_rss()}), flush=True)

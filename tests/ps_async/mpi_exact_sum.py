"""Run under `mpirun -np 3`: rank 0 serves DOWNPOUR over MPI, ranks 1 and 2 each commit
known integer-valued deltas; rank 0 prints the final centre's check as JSON."""

import json
import sys

import numpy as np
from mpi4py import MPI

from distbench.ps_async import mpi
from distbench.ps_async.protocol import new_secret

CYCLES = 50
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
template = [np.zeros((1000, 10), np.float32), np.zeros(10, np.float32)]
secret = mpi.broadcast_secret(new_secret() if rank == 0 else None)
if rank == 0:
    server = mpi.MPIParameterServer(template, "downpour", secret, num_workers=size - 1).start()
    done = server.wait_done(120)
    server.stop()
    stats, centre = server.stats(), server.center()
    expected = sum(w * CYCLES for w in range(1, size))  # worker k adds k+1 per cycle
    ok = done and all(np.array_equal(c, np.full_like(c, expected)) for c in centre)
    print(json.dumps({"ok": bool(ok), "commits": stats["commits"], "duplicates": stats["duplicate_commits"],
                      "expected": expected, "got": float(centre[0][0, 0])}), flush=True)
    sys.exit(0 if ok else 1)
wid = rank - 1
client = mpi.MPIClient(mpi.ADDRESS, secret, wid, template, timeout_s=60)
centre, clock = client.pull()
for seq in range(CYCLES):
    delta = [np.full_like(t, wid + 1) for t in template]
    client.commit(delta, seq, clock)
    if seq == 10:
        client.commit(delta, seq, clock)  # a replayed commit must not be applied twice
    centre, clock = client.pull()
client.done()

"""Run under `mpirun -np 2`: rank 0's server transport sends rank 1 a 4 MB reply that rank 1
takes only after rank 0 says (a small message) that its send returned. A blocking
``MPI_Send`` of 4 MB waits for the receiver to match it (rendezvous), so rank 0 would never
say so; rank 1 gives up after 60 s. Rank 1 prints the result as JSON."""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

from distbench.ps_async import mpi

SAID = 99
comm = MPI.COMM_WORLD
payload = np.arange(1 << 20, dtype=np.float32)  # 4 MiB
if comm.Get_rank() == 0:
    transport = mpi.MPIServerTransport()
    transport.open(max_bytes=1 << 23)
    transport.send((1).to_bytes(4, "little"), [b"header", payload])
    comm.Send([np.ones(1, np.int64), 1, MPI.INT64_T], dest=1, tag=SAID)
    transport.close()
    sys.exit(0)
deadline, said = time.monotonic() + 60, False
while time.monotonic() < deadline and not (said := comm.Iprobe(source=0, tag=SAID)):
    time.sleep(0.01)
if said:
    comm.Recv([np.empty(1, np.int64), 1, MPI.INT64_T], source=0, tag=SAID)
frames = mpi.recv_frames(comm, 0, mpi.REP_META, mpi.REP_DATA, 1 << 23)
print(json.dumps({"send_returned_first": bool(said), "header": frames[0].tobytes().decode(),
                  "payload_equal": bool(np.array_equal(frames[1].view(np.float32), payload))}), flush=True)

"""What every replica's loop shares: the batch schedule, timing, weight snapshots and
the training output handed back to the harness."""

from distbench.training.output import Snapshot, SnapshotRecorder, TrainOutput
from distbench.training.schedule import epoch_batches, replica_slice

__all__ = ["Snapshot", "SnapshotRecorder", "TrainOutput", "epoch_batches", "replica_slice"]

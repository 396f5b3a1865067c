"""What each Horovod rank runs (under ``horovodrun`` or ``mpirun``): the rank side of
the ``horovod`` / ``horovod_mpi`` strategies (:mod:`distbench.strategies.horovod` has
the launch side and the whole story).

:func:`run_worker` is one rank's life: ``hvd.init()`` and the intra-op thread pool
(:func:`init_rank`), the workload from rank 0 (:func:`share_workload`), the training
loop with ``hvd.DistributedGradientTape`` on the shared batch schedule
(:func:`train_rank`), the allgathered weight hashes, and rank 0's result callback.
Entry points: ``distbench worker horovod`` (:mod:`distbench.harness.horovod_app`).

Fault injection for tests: ``DISTBENCH_HOROVOD_PLAIN_TAPE=1`` uses a plain
``tf.GradientTape`` (no allreduce), so the ranks diverge and the weight-hash check must
say so. A rank that dies or stalls after an epoch is injected through the loop core's
epoch hooks (``DISTBENCH_EPOCH_HOOKS``), not here.
"""

from __future__ import annotations

import io
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from distbench import gpu
from distbench.config import ConfigError
from distbench.training import TrainOutput
from distbench.workload import Workload, cached_dataset
from distbench.procinfo import current_namespace

PLAIN_TAPE_ENV = "DISTBENCH_HOROVOD_PLAIN_TAPE"


@dataclass
class RankInfo:
    """Who this process is in the Horovod job.

    Attributes:
        rank, size, local_rank, local_size: Horovod's numbering.
        controller: ``gloo`` or ``mpi``.
        threads: intra-op threads set for this rank.
        hostnames: every rank's hostname, in rank order.
        start_unix: Unix time this rank's process started.
        netns: every rank's network namespace (:func:`~distbench.cluster.netns.current_namespace`),
            in rank order: on an emulated cluster each host is its own namespace.
        devices: what every rank trains on, in rank order (``GPU 0: <name>`` by local rank,
            :func:`distbench.gpu.place`; ``CPU`` without GPUs).
    """

    rank: int
    size: int
    local_rank: int
    local_size: int
    controller: str
    threads: int
    hostnames: list[str]
    start_unix: float
    netns: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)

    @property
    def strategy(self) -> str:
        """The strategy name of this controller: ``horovod`` (gloo) or ``horovod_mpi``."""
        return "horovod_mpi" if self.controller == "mpi" else "horovod"


def init_rank(threads: int = 0) -> tuple[Any, RankInfo]:
    """``hvd.init()`` and set this rank's intra-op threads before any TensorFlow op.

    Args:
        threads: intra-op threads; 0 = cores // local ranks (at least 1).

    Returns:
        ``(hvd, info)``: the ``horovod.tensorflow`` module and :class:`RankInfo`.
    """
    import horovod.tensorflow as hvd

    from distbench.training.loop import configure_threads, threads_per_process

    hvd.init()
    n = threads_per_process(threads, hvd.local_size())
    configure_threads(n)
    device = gpu.place(hvd.local_rank())[0]  # one GPU per rank by local rank, before any op
    controller = "mpi" if hvd.mpi_enabled() else "gloo"
    try:
        import psutil

        start = psutil.Process().create_time()
    except Exception:  # psutil is optional here; the time of init is close enough
        start = time.time()
    hosts = allgather_text(hvd, socket.gethostname(), "distbench_hostnames")
    netns = allgather_text(hvd, current_namespace(), "distbench_netns")
    devices = allgather_text(hvd, device, "distbench_devices")
    return hvd, RankInfo(hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), controller, n,
                         list(hosts), start, netns, list(devices))




def broadcast_bytes(hvd: Any, data: bytes | None, name: str) -> bytes:
    """Rank 0's ``data`` on every rank, moved as tensors (a length, then the bytes): Horovod's
    ``broadcast_object`` would unpickle what arrives, which distbench never does.

    Args:
        data: the bytes on rank 0 (ignored elsewhere).
        name: a collective name unique to this exchange (Horovod matches ranks by name).
    """
    import tensorflow as tf

    size = hvd.broadcast(tf.constant([len(data) if hvd.rank() == 0 and data else 0], tf.int64), root_rank=0,
                         name=f"{name}.size")
    buf = np.frombuffer(data, np.uint8) if hvd.rank() == 0 and data else np.zeros(int(size.numpy()[0]), np.uint8)
    if buf.size == 0:
        return b""
    return hvd.broadcast(tf.constant(buf), root_rank=0, name=name).numpy().tobytes()


def allgather_text(hvd: Any, text: str, name: str) -> list[str]:
    """Every rank's ``text``, in rank order, moved as UTF-8 byte tensors (no pickle).

    Raises:
        ValueError: a rank sent bytes that are not UTF-8.
    """
    import tensorflow as tf

    mine = np.frombuffer(text.encode(), np.uint8)
    sizes = hvd.allgather(tf.constant([mine.size], tf.int64), name=f"{name}.sizes").numpy()
    data = hvd.allgather(tf.constant(mine), name=name).numpy().tobytes()
    ends = np.cumsum(sizes)
    return [data[e - n:e].decode() for n, e in zip(sizes, ends)]


def share_workload(hvd: Any, run_dir: Path, load_on_root: Callable[[], Workload]) -> Workload:
    """Rank 0 loads the workload with ``load_on_root()``; every rank gets it from rank 0.

    Rank 0 broadcasts the config and both hashes (JSON) and the initial weights (an
    ``.npz`` read with ``allow_pickle=False``), as byte tensors: nothing received is ever
    unpickled. The other ranks rebuild the dataset from the config and check its
    fingerprint and the weights' SHA-256, so the run directory need not be on a shared
    filesystem (only rank 0 writes there). An error on rank 0 is broadcast too, so no
    rank waits forever.

    Raises:
        ConfigError: rank 0 could not load the workload (its message, on every rank), or
            this rank's dataset differs from rank 0's, or the batch does not split evenly.
    """
    from distbench import config as config_mod
    from distbench.data import fingerprint, load_dataset
    from distbench.workload import weights_sha256

    wl: Workload | None = None
    header: dict[str, Any]
    weights_npz = b""
    if hvd.rank() == 0:
        try:
            wl = load_on_root()
            header = {"status": "ok", "config": wl.config.to_dict(), "weights_sha256": wl.initial_weights_sha256,
                      "data_sha256": wl.data_sha256}
            buf = io.BytesIO()
            np.savez(buf, *wl.initial_weights)
            weights_npz = buf.getvalue()
        except Exception as e:
            header = {"status": "error", "message": f"{type(e).__name__}: {e}"}
            broadcast_bytes(hvd, json.dumps(header).encode(), "distbench_workload")
            raise
    raw = broadcast_bytes(hvd, json.dumps(header).encode() if hvd.rank() == 0 else None, "distbench_workload")
    try:
        header = json.loads(raw)
    except ValueError:
        raise ConfigError(f"rank {hvd.rank()}: the workload header from rank 0 is not JSON") from None
    if header.get("status") != "ok":
        raise ConfigError(f"rank 0 could not load the workload: {header.get('message')}")
    weights_npz = broadcast_bytes(hvd, weights_npz if hvd.rank() == 0 else None, "distbench_initial_weights")
    if wl is not None:
        workload = wl
    else:
        cfg = config_mod.from_dict(header["config"])
        wsha, dsha = str(header["weights_sha256"]), str(header["data_sha256"])
        # the sweep's cached splits where this host sees them (one host), else the source
        ds = cached_dataset(run_dir, cfg.data.name)
        if ds is None:
            ds = load_dataset(cfg.data, cfg.training.seed)
        if fingerprint(ds) != dsha:
            raise ConfigError(f"rank {hvd.rank()} on {socket.gethostname()}: dataset {cfg.data.name!r} differs from "
                              "rank 0's (fingerprint mismatch): every host needs the same data files")
        try:
            with np.load(io.BytesIO(weights_npz), allow_pickle=False) as z:
                weights = [np.asarray(z[f"arr_{i}"], np.float32) for i in range(len(z.files))]
        except (ValueError, OSError, KeyError) as e:
            raise ConfigError(f"rank {hvd.rank()}: the initial weights from rank 0 are unreadable ({e})") from None
        if weights_sha256(weights) != wsha:
            raise ConfigError(f"rank {hvd.rank()}: initial weights received from rank 0 fail their SHA-256 check")
        workload = Workload(cfg, ds, weights, wsha, dsha, Path(run_dir))
    g = workload.config.training.global_batch_size
    if g % hvd.size():
        raise ConfigError(f"training.global_batch_size = {g} is not divisible by the {hvd.size()} Horovod ranks: "
                          "every rank must get the same per-rank batch")
    return workload


def train_rank(hvd: Any, info: RankInfo, workload: Workload, scenario: Any = None) -> TrainOutput:
    """Train this rank's share of every global batch with gradients averaged by Horovod.

    Each epoch is one call of one traced graph (the steps in a ``tf.while_loop`` over the
    input iterator). Under the harness the rank writes the steps it has started to the
    progress board (:func:`~distbench.launch.ranks.open_progress_board`) at each epoch's
    start and end.

    Args:
        hvd: the initialised ``horovod.tensorflow`` module (:func:`init_rank`).
        info: this rank's :class:`RankInfo`.
        workload: the workload every rank received from rank 0 (:func:`share_workload`).
        scenario: the straggler :class:`~distbench.config.scenario.Scenario` (None: none): the
            loop core's step delay of this rank runs between its local gradients and the
            allreduce (the tape ``hvd.DistributedGradientTape`` wraps is the delayed one).

    Returns:
        On every rank a :class:`TrainOutput` with its final weights; rank 0's also has
        the epoch-end snapshots. ``extra`` holds the controller, ranks, hosts, threads,
        bytes allreduced per step, every rank's weights hash, ``replicas_in_sync_check``, ``batchnorm``
        and ``last_train_loss`` (the last step's loss over the whole global batch, as
        for ``single``: the ranks' local means averaged by one allreduce).
    """
    import tensorflow as tf

    from distbench.launch.ranks import open_progress_board
    from distbench.training.loop import TrainLoop
    from distbench.training.step import replica_step, while_steps
    from distbench.training.tf_loop import input_pipeline

    cfg = workload.config.training
    ds = workload.dataset
    rank, size = info.rank, info.size
    G = cfg.global_batch_size
    plain_tape = os.environ.get(PLAIN_TAPE_ENV, "") not in ("", "0")
    progress = open_progress_board(rank, size)

    model, optimizer, sync = _rank_model(hvd, workload, rank, size)
    loss_obj = workload.loss_fn()
    tvalues = [v.value for v in model.trainable_variables]
    loop = TrainLoop(cfg.epochs, model.get_weights if rank == 0 else None, replica=rank, label=f"rank {rank}: ",
                     sync=sync, scenario=scenario)
    delay = loop.step_delay()
    step = replica_step(model, optimizer, lambda y, logits: tf.reduce_mean(loss_obj(y, logits)),  # local mean
                        lambda: delay, sources=tvalues, strict=True,
                        wrap_tape=None if plain_tape else hvd.DistributedGradientTape)  # Average over ranks

    steps_per_epoch = len(ds.train) // G

    # The whole epoch runs inside one graph, the allreduce inside every step, as the
    # tf.distribute loop does (distbench.training.tf_loop): with a Python call and a Python
    # next() on the input iterator per step, a one-rank job reached 0.88 of single's steady
    # samples/s (benchmarks/step_time.py). autograph=False, with an explicit tf.while_loop: the
    # step has no tensor-dependent Python control flow, and AutoGraph would transpile
    # Horovod's tape and allreduce code (~70 functions): 3-15 s of tracing on a 2-core
    # machine instead of ~0.1 s.
    @tf.function(autograph=False)
    def train_epoch(iterator: Any) -> Any:
        return while_steps(step, iterator, steps_per_epoch)

    # One input pipeline over all epochs, its iterator created before the clock starts.
    pipeline = input_pipeline(ds.train, cfg.epochs, cfg.seed, G, [rank], size)
    data = iter(pipeline)
    loop.trace(lambda: train_epoch.get_concrete_function(data))
    state = {"steps": 0, "loss": tf.constant(float("nan"))}

    def run_epoch(epoch: int) -> tuple[int, float | None]:
        if progress is not None:  # under the harness: the launcher names a rank the others wait for.
            progress(state["steps"] + 1)  # Per epoch: the ranks meet at every step's allreduce, so a
            # rank that stops between epochs (the stalls this board is for) is the one behind.
        state["loss"] = train_epoch(data)
        state["steps"] += steps_per_epoch
        if progress is not None:
            progress(state["steps"])
        return state["steps"], None

    res = loop.run(run_epoch)
    return _rank_output(hvd, info, model, res, state["loss"], G, steps_per_epoch, plain_tape, scenario)


def _rank_model(hvd: Any, workload: Workload, rank: int, size: int) -> tuple[Any, Any, Any]:
    """This rank's model (rank 0's initial weights broadcast), its built optimizer, and the
    synchronous rule for its non-trainable state (the mean over the ranks; ``None`` on one
    rank or without such state), as :class:`~distbench.training.loop.TrainLoop`'s ``sync``."""
    import keras

    from distbench.training import batchnorm

    # Horovod matches collectives across ranks by tensor name, and Keras names layers
    # and variables with a per-process counter ("dense", "dense_1"...). A rank that built
    # a model before (rank 0 creating the workload) would use other names and every
    # rank would wait forever: start every rank from fresh name counters. (free_memory=False:
    # the counters are all this needs, and the full garbage collection it would run over a
    # process with TensorFlow loaded took 0.2-0.4 s of every rank's start on 2 cores.)
    keras.backend.clear_session(free_memory=False)
    model = workload.build_model(rank)
    if size > 1:  # BatchNormalization(synchronized=True): the moments over the global batch, as under Mirrored
        batchnorm.synchronize_with_horovod(hvd, model)
    optimizer = workload.make_optimizer(size)
    optimizer.build(model.trainable_variables)  # slots exist before the tf.function traces
    # Keras 3 variables are not tf.Variables: Horovod needs the backing ones (.value).
    # inplace=True: one eager in-place broadcast per device; the default wraps the broadcasts
    # in a tf.function traced with AutoGraph on first use (0.15-0.2 s of every rank's start).
    hvd.broadcast_variables([v.value for v in model.variables], root_rank=0, inplace=True)
    stats = [v.value for v in model.non_trainable_variables if v.value.dtype.is_floating]  # not seed states

    def sync() -> None:  # the synchronous rule for non-trainable state: the mean over the ranks, on every rank
        for i, v in enumerate(stats):
            v.assign(hvd.allreduce(v, op=hvd.Average, name=f"distbench_stats_{i}"))

    return model, optimizer, sync if stats and size > 1 else None


def _rank_output(hvd: Any, info: RankInfo, model: Any, res: Any, loss: Any, G: int, steps_per_epoch: int,
                 plain_tape: bool, scenario: Any) -> TrainOutput:
    """The rank's :class:`TrainOutput` after its loop (``res``: the loop core's result,
    ``loss``: the last step's local loss): the collectives every rank calls once after the
    clock stopped (the last loss, the weights hashes, the step delays) and ``extra``
    (see :func:`train_rank`)."""
    import horovod

    from distbench.training import batchnorm
    from distbench.workload import weights_sha256

    size, tvars = info.size, model.trainable_variables
    steps, train_s = res.steps, res.train_s
    # The record's loss means what it means for single: the mean over the last step's global
    # batch, i.e. the mean of the ranks' equal-sized local means. One allreduce, after the
    # clock stopped, so the steps pay nothing for it.
    last_loss = float(hvd.allreduce(loss, op=hvd.Average, name="distbench_last_train_loss"))
    final = [np.asarray(w, dtype=np.float32) for w in model.get_weights()]
    hashes = allgather_text(hvd, weights_sha256(final), "distbench_weights_sha256")
    delays: dict[str, Any] = {}
    if scenario is not None:  # every rank has the scenario: the collective is called by all or none
        for text in allgather_text(hvd, json.dumps(res.step_delays), "distbench_step_delays"):
            delays.update(json.loads(text))
    grad_bytes = sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in tvars)
    ring_share = 2 * (size - 1) / size * grad_bytes  # bytes each rank sends (and receives) per step
    extra = {
        "controller": info.controller,
        "ranks": size,
        "hosts": info.hostnames,
        "rank_netns": info.netns,
        "rank_devices": info.devices,
        "gpu_operations": "NCCL" if hvd.nccl_built() else "none",  # none: GPU tensors via host memory
        "local_size": info.local_size,
        "intra_op_threads": info.threads,
        "inter_op_threads": 0,
        "horovod_version": horovod.__version__,
        "gradient_averaging": "none (test hook: plain tape)" if plain_tape else "hvd.DistributedGradientTape (Average)",
        "allreduce_bytes_per_step": grad_bytes,
        "ring_bytes_per_rank_per_step": ring_share,
        "bytes_communicated": ring_share * size * steps,  # sent by all ranks over the run
        "rank_weights_sha256": hashes,
        "replicas_in_sync_check": "passed" if len(set(hashes)) == 1 else "failed",
        "last_train_loss": last_loss,
        "steps_per_epoch": steps_per_epoch,
        "trace_s": res.trace_s,
        "per_replica_batch_size": G // size,
        "batchnorm": batchnorm.describe(model, "Horovod allreduce"),
        **({"step_delays": delays} if delays else {}),
    }
    return TrainOutput(final, res.snapshots, train_s, res.first_step_unix, steps, steps * G, size, extra)


def configured_threads(run_dir: Path, config_file: str | None = None) -> int:
    """``training.threads`` as this host sees it before ``hvd.init()`` (TensorFlow's
    pools must be sized before its first op): from ``run_dir/config.json`` if present,
    else from ``config_file``, else 0 (= cores // local ranks). Unreadable files give 0;
    the workload rank 0 broadcasts is the authority, and the record states the threads
    actually used."""
    import json

    from distbench import config as config_mod
    from distbench.workload import CONFIG_FILE

    try:
        return int(json.loads((Path(run_dir) / CONFIG_FILE).read_text())["training"]["threads"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if config_file:
        try:
            return config_mod.load(config_file).training.threads
        except ConfigError:
            return 0
    return 0


def run_worker(run_dir: Path, load_on_root: Callable[[], Workload],
               on_root_result: Callable[[TrainOutput, Workload, RankInfo], None], threads: int = 0,
               scenario: Any = None) -> int:
    """One rank's whole life: init, share the workload, train, then on rank 0 hand the
    output to ``on_root_result`` (save it; or save, evaluate and record it).

    Args:
        run_dir: the run directory.
        load_on_root: called on rank 0 only; returns the workload (may create it).
        on_root_result: called on rank 0 after training with ``(output, workload, info)``.
        threads: intra-op threads per rank (0 = cores // local ranks); see
            :func:`configured_threads`.
        scenario: the straggler :class:`~distbench.config.scenario.Scenario` (None: none).

    Returns:
        0. Errors propagate as exceptions: the rank exits non-zero and the launcher
        stops the others.
    """
    import tensorflow as tf

    hvd, info = init_rank(threads)
    workload = share_workload(hvd, run_dir, load_on_root)
    info.threads = tf.config.threading.get_intra_op_parallelism_threads()  # what really runs
    out = train_rank(hvd, info, workload, scenario)
    if info.rank == 0:
        on_root_result(out, workload, info)
    hvd.shutdown()
    return 0

"""The training loop of ``keras_jax``: the run's model under Keras 3's own distribution
API on the JAX backend (``keras.distribution.DataParallel`` over a 1-D device mesh).

Runs in a process started with ``KERAS_BACKEND=jax`` (and, without accelerators, N CPU
devices from ``XLA_FLAGS=--xla_force_host_platform_device_count=N``); TensorFlow is never
imported there. The fairness contract is the one of every synchronous strategy
(docs/architecture.md): the model is built from the run's ``[model]`` and loaded with the
saved initial weights (:meth:`~distbench.workload.Workload.build_model`), the local
optimizer is :meth:`~distbench.workload.Workload.make_optimizer`, the loss the workload's
:class:`~distbench.models.output.LossSpec`, averaged over the global batch; each step
takes the global batch ``single`` takes (:func:`~distbench.training.schedule.replica_batches`
with one replica), and the mesh splits it: device ``r`` of ``N`` holds the ``r``-th
``G/N`` rows, as replica ``r`` of ``mirrored`` does.

The step is Keras' stateless API under ``jax.jit`` (``model.stateless_call``,
``optimizer.stateless_apply``, ``jax.value_and_grad``): the variables are replicated over
the mesh (``DataParallel``'s variable layout), the batch sharded on its first axis, and
XLA's SPMD partitioner inserts the all-reduces of the gradients (and of BatchNormalization's
batch moments: jit computes on the global array, so every BatchNormalization normalises
with the global batch's moments). It is compiled before the clock starts
(:meth:`~distbench.training.loop.TrainLoop.trace`), and the epochs run through the loop
core (clock, snapshots, hooks, straggler delays).

Source: the Keras distribution API guide (keras-io ``guides/distribution.py``: "Distributed
training with Keras 3") and Keras' JAX trainer (``keras/src/backend/jax/trainer.py``),
whose ``train_step`` this step follows without ``model.fit``'s callbacks and metrics.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from typing import Any, Callable, Iterator

import numpy as np

from distbench.contracts import StrategyUnavailable
from distbench.training import batchnorm
from distbench.training.loop import TrainLoop
from distbench.training.output import TrainOutput
from distbench.training.schedule import replica_batches
from distbench.workload import Workload, weights_sha256

PROCESS_FILE = "process{}.json"
"""Under several processes, what process k leaves in the configuration's artifacts
directory: its network namespace, host name and final weights' SHA-256
(``{"netns", "hostname", "weights_sha256"}``)."""

BATCH_AXIS = "batch"
"""The name of the mesh's one axis (Keras' ``DataParallel`` default)."""
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
"""The XLA flag that splits the host CPU into N JAX devices (the CPU platform only)."""


def xla_flags(devices: int, current: str = "") -> str:
    """``XLA_FLAGS`` for a process that needs ``devices`` host-platform (CPU) devices:
    ``current`` with any device-count flag replaced by ``--xla_force_host_platform_device_count=N``.

    Args:
        devices: JAX CPU devices wanted (>= 1).
        current: the ``XLA_FLAGS`` the process would inherit (other flags are kept).

    Raises:
        ValueError: ``devices`` < 1.
    """
    if devices < 1:
        raise ValueError(f"a JAX process needs at least 1 device, got {devices}")
    kept = [f for f in current.split() if not f.startswith(DEVICE_COUNT_FLAG)]
    return " ".join(kept + [f"{DEVICE_COUNT_FLAG}={devices}"])


def jax_process_count() -> int:
    """Processes of this JAX job (1 unless :func:`join_processes` joined several)."""
    import jax

    return jax.process_count()


def mesh_devices(workers: int) -> tuple[list[str], str]:
    """The devices of the data-parallel mesh: the first ``min(workers, count)`` accelerators
    (GPUs or TPU cores) when JAX has any, else the first ``workers`` CPU devices.

    Args:
        workers: replicas asked for.

    Returns:
        ``(Keras device names such as "cpu:0", kind)``; ``kind`` names what they are.

    Raises:
        StrategyUnavailable: fewer CPU devices than ``workers`` (the process was started
            without the matching ``XLA_FLAGS`` device count).
    """
    import keras

    for kind, label in (("tpu", "TPU cores"), ("gpu", "GPUs")):
        try:
            found = keras.distribution.list_devices(kind)
        except RuntimeError:  # JAX has no such backend here
            found = []
        if found:
            return found[:workers], label
    cpus = keras.distribution.list_devices("cpu")
    if jax_process_count() > 1:
        return cpus[:workers], "CPU devices, one per process"
    if len(cpus) < workers:
        raise StrategyUnavailable(f"JAX sees {len(cpus)} CPU device(s) but {workers} replicas were asked for: start "
                                  f"the process with XLA_FLAGS={DEVICE_COUNT_FLAG}={workers}")
    return cpus[:workers], "host-platform CPU devices (XLA_FLAGS device count)"


def data_parallel(devices: list[str]) -> Any:
    """``keras.distribution.DataParallel`` over a 1-D mesh of ``devices`` (axis
    :data:`BATCH_AXIS`), set as Keras' global distribution: variables created from now on
    are replicated over the mesh, and inputs laid out by it are split on their first axis."""
    import keras

    mesh = keras.distribution.DeviceMesh(shape=(len(devices),), axis_names=[BATCH_AXIS], devices=devices)
    dist = keras.distribution.DataParallel(device_mesh=mesh)
    keras.distribution.set_distribution(dist)
    return dist


MODEL_AXIS = "model"
"""The second axis of ``keras_jax:model_parallel``'s 2-D mesh, over which the sharded Dense
kernels are split."""
SHARD_SHARE = 0.125
"""A Dense kernel is sharded when it holds at least this share of the largest kernel's
parameters (the largest kernels: the smaller ones are not worth their collectives)."""


def model_parallel_plan(weights: list[tuple[str, tuple[int, ...]]], devices: int) -> tuple[tuple[int, int],
                                                                                             dict[str, tuple]]:
    """The mesh shape and the variable layouts of ``keras_jax:model_parallel``: a 2-D mesh
    ``(batch, model)`` with a model axis of 2 devices (all of them when their count is odd),
    the batch axis the rest; each large Dense kernel (2-D, at least :data:`SHARD_SHARE` of
    the largest one's parameters) split on its output dimension over the model axis, its
    bias likewise (Megatron-style column parallelism: Shoeybi et al. 2019, section 3), every
    other variable replicated.

    Args:
        weights: ``(variable path, shape)`` of every model variable.
        devices: devices of the mesh.

    Returns:
        ``((batch size, model size), {variable path: layout axes})``.

    Raises:
        StrategyUnavailable: fewer than 2 devices, or no kernel whose output dimension the
            model axis divides (the reason names the kernels).
    """
    if devices < 2:
        raise StrategyUnavailable(f"ModelParallel needs at least 2 devices for its model axis, got {devices}: "
                                  "run it with --workers 2 or more")
    model = 2 if devices % 2 == 0 else devices
    kernels = [(path, shape) for path, shape in weights if len(shape) == 2 and path.endswith("kernel")]
    largest = max((int(np.prod(shape)) for _, shape in kernels), default=0)
    chosen = [(path, shape) for path, shape in kernels if np.prod(shape) >= SHARD_SHARE * largest
              and shape[1] % model == 0]
    if not chosen:
        large = [(path, shape) for path, shape in kernels if np.prod(shape) >= SHARD_SHARE * largest]
        shown = ", ".join(f"{path} {list(shape)}" for path, shape in large) or "none"
        raise StrategyUnavailable(f"ModelParallel: no large Dense kernel (at least 1/{round(1 / SHARD_SHARE)} of the "
                                  f"largest one's parameters) has an output dimension that divides over a model axis "
                                  f"of {model} devices (the large kernels: {shown}); give those layers widths "
                                  f"divisible by {model}")
    layouts: dict[str, tuple] = {}
    paths = {path for path, _ in weights}
    for path, _ in chosen:
        layouts[path] = (None, MODEL_AXIS)
        bias = path[: -len("kernel")] + "bias"
        if bias in paths:
            layouts[bias] = (MODEL_AXIS,)
    return (devices // model, model), layouts


def model_parallel(devices: list[str], workload: Workload) -> tuple[Any, dict[str, tuple]]:
    """``keras.distribution.ModelParallel`` over a 2-D mesh of ``devices`` with the
    :func:`model_parallel_plan` of the workload's model, set as Keras' global distribution.

    The variable paths come from a model built once before (and cleared with
    ``keras.utils.clear_session``, which resets Keras' layer-name counters, so the model built
    under the distribution gets the same paths and the ``LayoutMap`` matches them).

    Returns:
        ``(the distribution, {variable path: layout axes} of the sharded variables)``.

    Raises:
        StrategyUnavailable: as :func:`model_parallel_plan`.
    """
    import keras

    with synchronized_batchnorm_accepted():  # as the model built under the distribution will be
        probe = workload.build_model()
    weights = [(v.path, tuple(v.shape)) for v in probe.weights]
    del probe
    keras.utils.clear_session()
    shape, layouts = model_parallel_plan(weights, len(devices))
    mesh = keras.distribution.DeviceMesh(shape=shape, axis_names=[BATCH_AXIS, MODEL_AXIS], devices=devices)
    layout_map = keras.distribution.LayoutMap(mesh)
    for path, axes in layouts.items():
        layout_map[path] = axes
    dist = keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name=BATCH_AXIS)
    keras.distribution.set_distribution(dist)
    return dist, layouts


def describe_mesh(dist: Any, kind: str) -> dict[str, Any]:
    """The record's ``mesh``: shape, axis names, the Keras device names and JAX's, their kind."""
    mesh = dist.device_mesh
    jax_mesh = mesh.backend_mesh
    return {"shape": list(mesh.shape), "axis_names": list(mesh.axis_names),
            "devices": [str(d) for d in np.asarray(mesh.devices).ravel()],
            "jax_devices": [str(d) for d in np.asarray(jax_mesh.devices).ravel()], "device_kind": kind,
            "batch_dim": dist.batch_dim_name}


def versions() -> dict[str, str | None]:
    """Installed versions of ``jax``, ``jaxlib`` and ``keras`` (package metadata; ``None`` if absent)."""
    out: dict[str, str | None] = {}
    for name in ("jax", "jaxlib", "keras"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def collective_ops(hlo_text: str) -> dict[str, int]:
    """How many of each cross-device collective a compiled step's HLO text holds
    (``all-reduce``, ``all-gather``, ``reduce-scatter``, ``all-to-all``, ``collective-permute``;
    the asynchronous ``-start`` forms counted with their op). Empty on one device."""
    counts: dict[str, int] = {}
    for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"):
        n = len(re.findall(rf"\s{op}(?:-start)?\(", hlo_text))
        if n:
            counts[op] = n
    return counts


def collective_implementation(kind: str, devices: int, processes: int = 1) -> str:
    """Words for the record: which runtime carries the step's collectives."""
    if devices == 1:
        return "none (one device: no cross-device collective)"
    cpu = (f"Gloo across {processes} processes (jax_cpu_collectives_implementation = gloo, over TCP)"
           if processes > 1 else "XLA:CPU in-process collectives (one process, device buffers in host memory)")
    where = {"GPUs": "NCCL (XLA:GPU)", "TPU cores": "the TPU interconnect (XLA:TPU)"}.get(kind, cpu)
    return (f"XLA collectives (step_collectives) inserted by the SPMD partitioner (jax.jit over the mesh), "
            f"run by {where}")


def weights_reader(model: Any) -> Callable[[Any], list[np.ndarray]]:
    """A function from the training state ``(trainable, non_trainable, optimizer)`` to the
    model's weights as float32 NumPy arrays in ``model.get_weights()`` order, which is the
    order of the TensorFlow-backend model built from the same spec (what the harness loads).

    Raises:
        ValueError: a weight of the model is in neither variable list.
    """
    where: dict[int, tuple[int, int]] = {}
    for part, variables in enumerate((model.trainable_variables, model.non_trainable_variables)):
        for i, v in enumerate(variables):
            where[id(v)] = (part, i)
    try:
        order = [where[id(w)] for w in model.weights]
    except KeyError:
        raise ValueError("a model weight is neither trainable nor non-trainable variable of the model") from None

    def read(state: Any) -> list[np.ndarray]:
        return [local_value(state[part][i]) for part, i in order]

    return read


def local_value(array: Any) -> np.ndarray:
    """A JAX array's value as a float32 NumPy array: gathered from its shards when this
    process holds them all, else (an array replicated over the devices of several
    processes, which is not fully addressable: ``np.asarray`` of it raises) this process's
    own copy."""
    return np.asarray(array if array.is_fully_addressable else array.addressable_data(0), dtype=np.float32)


def make_train_step(model: Any, optimizer: Any, loss_obj: Any, state_shardings: Any) -> Any:
    """The jitted stateless train step ``(state, x, y) -> (loss, state)``: Keras' JAX train
    step without ``model.fit``'s callbacks and metrics.

    ``state`` is ``(trainable values, non-trainable values, optimizer values)`` (lists of
    JAX arrays, donated); ``x`` the global batch, float32 ``(G, *sample_shape)``, and ``y``
    its int32 labels ``(G,)``, both sharded on their first axis over the mesh. The step is
    ``model.stateless_call`` in training mode, the mean per-sample loss over the global
    batch (``tf.nn.compute_average_loss``'s, as every synchronous strategy's),
    ``jax.value_and_grad`` and ``optimizer.stateless_apply``; the new state keeps
    ``state_shardings`` (replicated), as Keras' JAX trainer asks with ``out_shardings``.

    One call per step, as ``model.fit`` on JAX makes by default (``steps_per_execution=1``):
    running an epoch's steps in one call (``jax.lax.scan``, as the tf.distribute loop runs an
    epoch in one graph) ran the digits MLP 1.5-2.5x faster, but the BatchNormalization CNN
    of examples/my_model.py 20x slower (65 against 3 ms a step: XLA:CPU runs a while loop's
    body far slower), and unrolling it grew the compile time with the steps.
    """
    import jax
    import keras

    def loss_of(trainable: Any, non_trainable: Any, x: Any, y: Any) -> Any:
        y_pred, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
        return keras.ops.mean(loss_obj(y, y_pred)), non_trainable

    grad_fn = jax.value_and_grad(loss_of, has_aux=True)

    def train_step(state: Any, x: Any, y: Any) -> Any:
        trainable, non_trainable, opt_vars = state
        (loss, non_trainable), grads = grad_fn(trainable, non_trainable, x, y)
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return loss, (trainable, non_trainable, opt_vars)

    return jax.jit(train_step, donate_argnums=0, out_shardings=(None, state_shardings))


def describe_batchnorm(model: Any, declared_synchronized: int = 0) -> str:
    """What the record's ``details.batchnorm`` says: under ``DataParallel`` every
    BatchNormalization layer normalises with the moments of the whole global batch.

    Args:
        model: the model trained.
        declared_synchronized: how many of its layers were declared ``synchronized=True``
            (built as ``synchronized=False``: :func:`synchronized_batchnorm_accepted`).
    """
    layers = batchnorm.batchnorm_layers(model)
    if not layers:
        return "none"
    declared = (f" ({declared_synchronized} declared synchronized=True, built without the flag, which Keras takes "
                "on TensorFlow only: the moments are global anyway)" if declared_synchronized else "")
    return (f"{len(layers)} layers{declared}: batch moments over the global batch (jit computes on the global array; "
            "XLA all-reduces each device's partial moments), as single and BatchNormalization(synchronized=True) "
            "under tf.distribute do")


@contextlib.contextmanager
def synchronized_batchnorm_accepted() -> Iterator[list[Any]]:
    """While the model is built: a ``BatchNormalization(synchronized=True)`` is built as
    ``synchronized=False`` (Keras refuses the flag outside its TensorFlow backend, and its
    JAX ``moments`` has no synchronized form), and the layer is listed in what this yields.

    The flag asks for the moments of the global batch, which is what every
    BatchNormalization computes under ``DataParallel`` on JAX: the jitted step computes on
    the global (sharded) batch, so ``jnp.mean``/``jnp.var`` over its batch axis are
    all-reduced across the mesh by XLA. So a model written for ``mirrored`` with
    synchronized layers (examples/my_model.py) trains here with the same statistics.
    """
    import keras

    cls = keras.layers.BatchNormalization
    original = cls.__init__
    declared: list[Any] = []

    def init(self: Any, *args: Any, synchronized: bool = False, **kwargs: Any) -> None:
        original(self, *args, synchronized=False, **kwargs)
        if synchronized:
            declared.append(self)

    # not functools.wraps: Keras' Operation.__new__ reads the signature both through
    # inspect.signature (which would follow __wrapped__) and getfullargspec (which does not)
    cls.__init__ = init  # type: ignore[method-assign]
    try:
        yield declared
    finally:
        cls.__init__ = original  # type: ignore[method-assign]


def build_on_mesh(workload: Workload, replicas: int) -> tuple[Any, Any, int]:
    """The workload's model (initial weights loaded) and its optimizer (built), created
    under the global distribution so that every variable is laid out on the mesh.

    Returns:
        ``(model, optimizer, number of BatchNormalization layers declared synchronized=True)``.
    """
    with synchronized_batchnorm_accepted() as declared:
        model = workload.build_model()
    optimizer = workload.make_optimizer(replicas)
    optimizer.build(model.trainable_variables)
    return model, optimizer, len(declared)


def pin_threads(threads: int) -> dict[str, Any]:
    """Restrict this process to ``threads`` CPUs (its affinity) when fewer than it may use:
    XLA:CPU has no thread-count setting (its pools size themselves to the machine), so
    ``training.threads`` is applied as the set of cores the process runs on.

    Args:
        threads: ``training.threads`` for this process (0: every core it may use).

    Returns:
        The record's ``threads`` fields: ``cpu_affinity`` (the CPUs used) and ``intra_op_threads``.
    """
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if threads and allowed and threads < len(allowed):
        allowed = allowed[:threads]
        os.sched_setaffinity(0, allowed)
    return {"intra_op_threads": len(allowed) or None, "cpu_affinity": allowed,
            "threads_note": "XLA:CPU sizes its own thread pools; the process runs on cpu_affinity"}


def step_delayer(loop: TrainLoop, replicas: range | list[int]) -> Callable[[float], None] | None:
    """Under a straggler scenario, the host-side delay after each step: the replicas share
    one jitted step, so a slowed replica slows the whole step; each delayed replica's
    :class:`~distbench.training.loop.StepDelay` sleeps for its own delay, at once, and the
    step waits for the longest (as a synchronous all-reduce waits for its slowest device).
    ``replicas`` are the replica indices of this process's devices (all of them in one
    process; under several processes each delays its own, and the others wait for it in
    the all-reduce). None without a scenario (or when no replica here is delayed)."""
    delays = [loop.step_delay(r) for r in replicas] if loop.scenario is not None else []
    delayed = [d for d in delays if d.delays]
    if not delayed:
        return None
    pool = ThreadPoolExecutor(max_workers=len(delayed), thread_name_prefix="step-delay")

    def delay(compute_s: float) -> None:
        list(pool.map(lambda d: d.sleep(compute_s), delayed))

    return delay


class _NoTensorFlow:
    """Stands in for Keras' lazy ``tensorflow`` module in its seeding code: not available."""

    available = False


def skip_tensorflow_seeding() -> None:
    """Keep Keras' ``set_random_seed`` from importing TensorFlow in this JAX process.

    It imports TensorFlow whenever it is installed, to seed it too (the module-level lazy
    ``tf`` of ``keras/src/utils/rng_utils.py``, Keras 3.15), which a JAX process does not
    use: seconds of start-up. Only that seeding is skipped: a user's model module may still
    ``import tensorflow`` (it did fail when the import was blocked outright: user test), and
    the record says whether TensorFlow was imported (``details.tensorflow_imported``).
    Call it after Keras is imported.
    """
    from keras.src.utils import rng_utils

    if getattr(rng_utils, "tf", None) is not None:
        rng_utils.tf = _NoTensorFlow()


def import_jax_keras() -> tuple[Any, Any]:
    """Import ``jax`` and ``keras`` (which must be on its JAX backend) and return them.

    Raises:
        StrategyUnavailable: JAX cannot be imported here (the reason names the error and the fix).
        RuntimeError: Keras runs on another backend (the process was started without
            ``KERAS_BACKEND=jax``, or Keras was imported before it was set).
    """
    try:
        import jax
        import keras
    except ImportError as e:
        raise StrategyUnavailable(f"JAX cannot be imported here ({type(e).__name__}: {e}); install it with "
                                  "pip install 'jax[cpu]' (make setup does)") from None
    if keras.backend.backend() != "jax":
        raise RuntimeError(f"Keras runs on the {keras.backend.backend()!r} backend in this process; keras_jax needs "
                           "KERAS_BACKEND=jax set before Keras is first imported")
    return jax, keras


def join_processes(coordinator: str, processes: int, process_id: int) -> None:
    """Join this process to a JAX job of ``processes`` processes through Keras
    (``keras.distribution.initialize``, which calls ``jax.distributed.initialize``), with
    Gloo for the collectives between the processes' CPU devices (JAX's default on CPU is
    none across processes). Call it before JAX first looks at its devices.

    Args:
        coordinator: ``host:port`` of process 0's coordination service (every process
            gives the same address; process 0 listens on it).
        processes: processes of the job (each brings one device to the mesh).
        process_id: this process's index, 0..processes-1.
    """
    import jax
    import keras

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    keras.distribution.initialize(job_addresses=coordinator, num_processes=processes, process_id=process_id)


def mesh_for(workers: int, global_batch: int, scenario: Any = None,
             workload: Workload | None = None) -> tuple[Any, str, dict[str, tuple]]:
    """Form the mesh of ``workers`` devices (:func:`mesh_devices`) and set ``DataParallel``
    over it, or ``ModelParallel`` (:func:`model_parallel`) when ``workload`` is given.

    Returns:
        ``(the distribution, the devices' kind, the sharded variables' layouts)`` (no layouts
        under ``DataParallel``: every variable is replicated).

    Raises:
        StrategyUnavailable: too few devices; ``global_batch`` does not split over them; the
            ``scenario`` slows a replica the mesh does not have.
    """
    devices, kind = mesh_devices(workers)
    n = len(devices)
    if workload is not None:
        dist, layouts = model_parallel(devices, workload)
        n = dist.device_mesh.shape[0]  # the batch is split over the batch axis only
    if global_batch % n:
        raise StrategyUnavailable(f"the global batch {global_batch} does not split over the {n} devices of the mesh "
                                  f"({kind})")
    if scenario is not None and scenario.worker is not None and scenario.worker >= n:
        raise StrategyUnavailable(f"the straggler scenario slows worker {scenario.worker}, but the mesh has {n} "
                                  "devices: lower the scenario's worker index")
    return (dist, kind, layouts) if workload is not None else (data_parallel(devices), kind, {})


def train_data_parallel(workload: Workload, workers: int, scenario: Any = None,
                        threads: dict[str, Any] | None = None, model_parallel: bool = False) -> TrainOutput:
    """Train ``workload``'s model under ``keras.distribution.DataParallel`` (or
    ``ModelParallel``) on this process's JAX devices (see the module docstring).

    Args:
        workload: the run's workload (data, model spec, initial weights, optimizer).
        workers: replicas asked for: devices of the mesh (CPU devices, or at most this many
            accelerators).
        scenario: the configuration's straggler :class:`~distbench.config.scenario.Scenario`
            (``None``: none); a delayed replica delays the step on the host (:func:`step_delayer`).
        threads: the record's thread fields (:func:`pin_threads`, applied by the caller
            before JAX started its thread pools).
        model_parallel: train under ``ModelParallel`` over a 2-D mesh (:func:`model_parallel_plan`)
            instead of ``DataParallel``.

    Returns:
        :class:`TrainOutput`: final weights and per-epoch snapshots in ``model.get_weights()``
        order; ``steps`` optimizer steps, ``samples`` = steps x global batch.

    Raises:
        StrategyUnavailable: JAX is missing, the mesh cannot be formed for ``workers``, or the
            scenario slows a replica the mesh does not have.
        ValueError: the weights read back before training are not the run's initial weights
            (they would reach the harness in another order than ``model.get_weights()``'s).
    """
    jax, keras = import_jax_keras()
    cfg = workload.config.training
    G = cfg.global_batch_size
    dist, kind, sharded = mesh_for(workers, G, scenario, workload if model_parallel else None)
    n = int(np.asarray(dist.device_mesh.devices).size)
    replicas = dist.device_mesh.shape[0] if model_parallel else n  # data-parallel replicas: the batch axis
    processes, here = jax.process_count(), jax.process_index()
    local = list(range(n)) if processes == 1 else [here]  # one device per process under several
    model, optimizer, synced = build_on_mesh(workload, replicas)
    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])
    step = make_train_step(model, optimizer, workload.loss_fn(), jax.tree.map(lambda a: a.sharding, state))
    shapes = ((G, *workload.dataset.train.sample_shape), (G,))
    layouts = tuple(dist.get_data_layout(shape) for shape in shapes)
    specs = [jax.ShapeDtypeStruct(shape, dtype, sharding=layout.backend_layout)
             for shape, dtype, layout in zip(shapes, (np.float32, np.int32), layouts)]
    read = weights_reader(model)
    if weights_sha256(read(state)) != workload.initial_weights_sha256:  # the order the harness loads them in
        raise ValueError("the JAX model's weights, read in model.get_weights() order, are not the run's initial "
                         "weights: the weights would come back to the harness in another order")
    box = [state]
    loop = TrainLoop(cfg.epochs, lambda: read(box[0]), label="", scenario=scenario)
    compiled = loop.trace(lambda: step.lower(state, *specs).compile())
    mesh = describe_mesh(dist, kind)
    res = loop.run(epoch_runner(compiled, box, layouts, workload, step_delayer(loop, local)))
    return TrainOutput(
        final_weights=read(box[0]), snapshots=res.snapshots, train_s=res.train_s,
        first_step_unix=res.first_step_unix, steps=res.steps, samples=res.steps * G, replicas=replicas,
        extra={"last_train_loss": res.loss, "steps_per_epoch": workload.steps_per_epoch(), "trace_s": res.trace_s,
               "batchnorm": describe_batchnorm(model, synced), **(threads or {}), "backend": keras.backend.backend(),
               "versions": versions(), "distribution": f"keras.distribution.{type(dist).__name__}",
               "mesh": mesh, "devices": mesh["devices"],
               "device_kind": kind, "collective": collective_implementation(kind, n, processes),
               "processes": processes, **({"sharded_variables": {k: list(v) for k, v in sharded.items()}}
                                          if sharded else {}),
               "step_collectives": collective_ops(compiled.as_text()),
               "tensorflow_imported": sys.modules.get("tensorflow") is not None,
               **({"step_delays": res.step_delays} if res.step_delays else {})},
    )


def epoch_runner(compiled: Any, box: list[Any], layouts: tuple[Any, ...], workload: Workload,
                 delay: Callable[[float], None] | None) -> Callable[[int], tuple[int, float]]:
    """The ``run_epoch`` of :meth:`~distbench.training.loop.TrainLoop.run`: one epoch of
    ``workload.steps_per_epoch()`` calls of the compiled step on the global batches of the
    shared schedule (the whole run's batches in one stream, as ``single``'s pipeline feeds
    them). The next step's batch is gathered and laid out on the mesh while the current
    step runs (JAX dispatches asynchronously), as a ``tf.data`` prefetch does. Every
    process gathers the whole global batch from the schedule and lays out the rows of its
    own devices (``jax.make_array_from_callback``): one code path for one process and for
    several.

    Args:
        compiled: the compiled train step (:func:`make_train_step`).
        box: one-element list holding the training state (replaced after every step).
        layouts: the ``TensorLayout`` of a batch's samples and of its labels (split on the
            mesh's batch axis: ``DataParallel.get_data_layout``).
        workload: the run's workload.
        delay: the host-side straggler delay after each step (:func:`step_delayer`), or None.
    """
    import jax

    cfg = workload.config.training
    steps = workload.steps_per_epoch()
    batches = replica_batches(workload.dataset.train, cfg.epochs, cfg.seed, cfg.global_batch_size, 0, 1)
    pending: list[tuple[Any, Any]] = []

    def put(batch: np.ndarray, layout: Any) -> Any:
        return jax.make_array_from_callback(batch.shape, layout.backend_layout, lambda index: batch[index])

    def load_next() -> None:
        got = next(batches, None)  # None after the run's last batch
        if got is not None:
            pending.append((put(np.asarray(got[0], np.float32), layouts[0]),
                            put(np.asarray(got[1], np.int32), layouts[1])))

    def run_epoch(epoch: int) -> tuple[int, float]:
        loss = None
        for _ in range(steps):
            if not pending:
                load_next()
            x, y = pending.pop(0)
            t0 = time.perf_counter()
            loss, box[0] = compiled(box[0], x, y)
            if delay is not None:  # the step's own time (it runs asynchronously otherwise), then the delay
                loss.block_until_ready()
                delay(time.perf_counter() - t0)
            load_next()  # the next step's batch, gathered while this step runs
        return (epoch + 1) * steps, float(local_value(loss))

    return run_epoch

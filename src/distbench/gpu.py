"""NVIDIA GPUs: the ones this machine has, whether TensorFlow can use them, and the refusal
that keeps a GPU machine from being benchmarked on its CPU without saying so.

TensorFlow's Linux wheels use a GPU only with CUDA's libraries beside them: the NVIDIA pip
packages that ``tensorflow[and-cuda]`` installs (``make setup`` installs it where
``nvidia-smi -L`` lists GPUs), or a system CUDA. Without them TensorFlow logs one line and
runs every op on the CPU, so ``mirrored`` would train on logical CPU devices and ``single``
on the CPU while the record names the GPU machine. :func:`problem` finds that case without
importing TensorFlow (package metadata and the dynamic linker's search), and the harness
records every configuration ``unavailable`` with it unless ``[run] device = "cpu"`` asks
for the CPU.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
from functools import lru_cache

CUDA_PACKAGES = ("nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12", "nvidia-cudnn-cu12")
"""The pip packages of CUDA's libraries that ``tensorflow[and-cuda]`` installs (CUDA 12)."""

CUDA_RUNTIME = "libcudart.so.12"
"""The CUDA runtime TensorFlow 2.21 loads (CUDA 12; a system CUDA 13 does not serve it)."""

DEVICES = ("auto", "cpu", "gpu")
"""``[run] device``: ``auto`` (the GPUs where there are any TensorFlow can use; refused where
there are GPUs it cannot), ``cpu`` (the CPU, GPUs hidden: ``CUDA_VISIBLE_DEVICES=-1``),
``gpu`` (refused where no GPU can be used)."""


def listed() -> list[str]:
    """The GPUs ``nvidia-smi -L`` lists, one line each (empty: no driver or no GPU)."""
    from distbench.results.provenance import gpus

    return gpus()


def cuda_libraries() -> list[str]:
    """Where TensorFlow would find CUDA's libraries: the installed :data:`CUDA_PACKAGES`
    (``name version``), else a system :data:`CUDA_RUNTIME` the dynamic linker loads; empty: none."""
    found = []
    for name in CUDA_PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    if len(found) == len(CUDA_PACKAGES):
        return found
    try:
        ctypes.CDLL(CUDA_RUNTIME)
    except OSError:
        return []
    return [f"system {CUDA_RUNTIME}"]


@lru_cache(maxsize=None)
def _state() -> tuple[tuple[str, ...], tuple[str, ...]]:
    gpus = tuple(listed())
    return gpus, tuple(cuda_libraries()) if gpus else ()


JAX_CUDA = "jax-cuda12-plugin"
"""The package of JAX's CUDA 12 backend (``pip install 'jax[cuda12]'``); ``jax[cpu]`` has none."""


def jax_problem(device: str = "auto") -> str | None:
    """As :func:`problem`, for ``keras_jax``: JAX trains on the CPU unless its CUDA plugin is
    installed (:data:`JAX_CUDA`)."""
    if device == "cpu" or (device == "auto" and hidden_by_user()):
        return None
    gpus, _ = _state()
    if gpus and not hidden_by_user():
        try:
            importlib.metadata.version(JAX_CUDA)
        except importlib.metadata.PackageNotFoundError:
            return (f"this machine has {len(gpus)} NVIDIA GPU(s) but JAX cannot use them: {JAX_CUDA} is not "
                    "installed (jax[cpu] trains on the CPU); make setup installs it on a machine whose "
                    "nvidia-smi -L lists GPUs (or pip install 'jax[cuda12]'), or set "
                    '[run] device = "cpu" (--device cpu) to benchmark the CPU')
        return None
    return problem(device)


def hidden_by_user() -> bool:
    """``CUDA_VISIBLE_DEVICES`` is set and hides every GPU (``-1`` or empty): the CPU is
    asked for, as with ``[run] device = "cpu"`` (which sets it so)."""
    return "CUDA_VISIBLE_DEVICES" in os.environ and not visible_ids()


def problem(device: str = "auto") -> str | None:
    """Why TensorFlow would not train on the device ``[run] device`` asks for, or ``None``.

    Args:
        device: one of :data:`DEVICES`.

    Returns:
        ``None`` when nothing is wrong: ``cpu``; ``auto`` on a machine without NVIDIA GPUs,
        with GPUs and CUDA's libraries, or with every GPU hidden by the user's
        ``CUDA_VISIBLE_DEVICES`` (:func:`hidden_by_user`); ``gpu`` with both. Else one line
        naming what was found, what is missing and the fix.
    """
    if device == "cpu" or (device == "auto" and hidden_by_user()):
        return None
    gpus, libs = _state()
    if device == "gpu" and gpus and hidden_by_user():
        return (f'run.device = "gpu" but CUDA_VISIBLE_DEVICES={os.environ["CUDA_VISIBLE_DEVICES"]!r} hides every '
                "GPU; unset it, or use --device cpu")
    if gpus and not libs:
        return (f"this machine has {len(gpus)} NVIDIA GPU(s) ({gpus[0]}{', ...' if len(gpus) > 1 else ''}) but "
                f"TensorFlow cannot use them: CUDA's libraries are missing (none of {', '.join(CUDA_PACKAGES)} is "
                f"installed and no system {CUDA_RUNTIME} loads), so it would train on the CPU; install them with "
                "'make setup' (it installs tensorflow[and-cuda] where nvidia-smi lists GPUs) or "
                "pip install 'tensorflow[and-cuda]', or set [run] device = \"cpu\" (--device cpu) to benchmark the CPU")
    if device == "gpu" and not gpus:
        return ('run.device = "gpu" but nvidia-smi lists no GPU here (no NVIDIA driver, or no GPU); '
                'use device = "auto" or "cpu" (--device cpu) on this machine')
    return None


def for_strategy(name: str, device: str = "auto") -> str | None:
    """:func:`jax_problem` for the ``keras_jax`` strategies, none for ``tpu``, else :func:`problem`."""
    if name == "tpu":
        return None
    return jax_problem(device) if name.startswith("keras_jax") else problem(device)


def describe() -> list[str]:
    """Lines for ``distbench env``: the GPUs listed, and whether TensorFlow can use them."""
    gpus, libs = _state()
    if not gpus:
        return ["GPUs: none (nvidia-smi lists none or is not installed): every strategy trains on the CPU"]
    lines = [f"GPUs: {len(gpus)} listed by nvidia-smi -L"] + [f"  {g}" for g in gpus]
    if hidden_by_user():
        return lines + [f"  hidden by CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r}: every strategy "
                        "trains on the CPU"]
    why = problem("auto")
    lines.append(f"  TensorFlow: {why}" if why else f"  TensorFlow: CUDA libraries {', '.join(libs)}")
    jax_why = jax_problem("auto")
    lines.append(f"  JAX (keras_jax): {jax_why}" if jax_why else f"  JAX (keras_jax): {JAX_CUDA} installed")
    return lines


def hide_gpus() -> None:
    """``[run] device = "cpu"``: hide every GPU from this process and its children
    (``CUDA_VISIBLE_DEVICES=-1``), so that a CUDA TensorFlow trains on the CPU as asked."""
    os.environ["CUDA_VISIBLE_DEVICES"] = "-1"


def visible_ids(env: dict[str, str] | None = None) -> list[str]:
    """The GPU ids processes started from ``env`` (default ``os.environ``) may use: the
    user's ``CUDA_VISIBLE_DEVICES`` list where set (``-1`` or empty: none), else one per
    GPU ``nvidia-smi -L`` lists (``0``, ``1``, ...); empty without GPUs."""
    env = os.environ if env is None else env
    given = env.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        ids = [s.strip() for s in given.split(",") if s.strip()]
        return [] if not ids or ids[0].startswith("-") else ids
    return [str(i) for i in range(len(_state()[0]))]


def process_envs(hosts: list[str], servers: int = 0, env: dict[str, str] | None = None) -> list[dict[str, str]]:
    """``CUDA_VISIBLE_DEVICES`` of each process a launcher starts as its own process (the
    ``multi_worker_mirrored`` workers, the ``tf_ps`` worker and ps tasks): worker ``i``
    gets one GPU, the ``k``-th of :func:`visible_ids` for the ``k``-th worker on its host
    (round robin when a host has more workers than GPUs: they share one, with TensorFlow's
    memory growth); the ``servers`` processes after the workers get none (the CPU).
    Without GPUs every entry is empty (the environment is left as it is).

    Args:
        hosts: the host of each worker, in worker order.
        servers: processes after the workers that hold variables, not steps.
        env: the environment the processes start from (default ``os.environ``).

    Returns:
        One ``{"CUDA_VISIBLE_DEVICES": ...}`` (or ``{}``) per worker, then per server.
    """
    ids = visible_ids(env)
    if not ids:
        return [{} for _ in range(len(hosts) + servers)]
    seen: dict[str, int] = {}
    out = []
    for h in hosts:
        k = seen.get(h, 0)
        seen[h] = k + 1
        out.append({"CUDA_VISIBLE_DEVICES": ids[k % len(ids)]})
    return out + [{"CUDA_VISIBLE_DEVICES": "-1"} for _ in range(servers)]


_PLACED: list[str] = []


def place(slot: int | None, count: int = 1) -> list[str]:
    """Put this process on its GPU(s) before TensorFlow initialises its devices: ``count``
    of the GPUs TensorFlow lists from the ``slot``-th on (round robin), the others hidden
    from it, each with memory growth (processes sharing a GPU do not each reserve all of
    its memory); ``slot=None`` hides every GPU (a parameter server: the CPU). The
    in-process form of :func:`process_envs` for ranks that one launcher starts together
    (Horovod's ranks by local rank, as Horovod documents; the parameter servers' replicas
    by replica index).

    Args:
        slot: this process's index among the GPU users on its host, or ``None``.
        count: GPUs for this process (``mirrored``: ``min(workers, GPUs)``).

    Returns:
        What it trains on, for the record: ``["GPU 0: <name>", ...]`` or ``["CPU"]``. A
        process whose TensorFlow had already set up its devices keeps them (a shared
        engine's rank from its first configuration): the same answer again.
    """
    if _PLACED:
        return list(_PLACED)
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    chosen = [] if slot is None or not gpus else [gpus[(slot + i) % len(gpus)] for i in range(min(count, len(gpus)))]
    chosen = list(dict.fromkeys(chosen))
    try:
        if gpus:
            tf.config.set_visible_devices(chosen, "GPU")
        for g in chosen:
            tf.config.experimental.set_memory_growth(g, True)
    except RuntimeError:  # devices already initialised in this process: they stay as they are
        chosen = tf.config.get_visible_devices("GPU")
    labels = []
    for g in chosen:
        name = (tf.config.experimental.get_device_details(g) or {}).get("device_name", "GPU")
        labels.append(f"GPU {g.name.rsplit(':', 1)[-1]}: {name}")
    _PLACED[:] = labels or ["CPU"]
    return list(_PLACED)

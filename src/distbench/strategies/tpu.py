"""``tpu``: ``tf.distribute.TPUStrategy`` when a TPU is reachable.

The probe is TensorFlow's own: ``TPUClusterResolver`` (from ``TPU_NAME`` or the
environment of a Cloud TPU VM), then ``initialize_tpu_system``. Where it fails the
configuration is recorded as ``unavailable`` with the resolver's message; nothing is
ever trained on another device under this name.
"""

from __future__ import annotations

import os
import subprocess
import sys

from distbench.config import ExperimentConfig
from distbench.strategies.base import Availability, LaunchContext, Strategy, StrategyUnavailable
from distbench.launch.process import last_error_line
from distbench.text import clip
from distbench.strategies.registry import register
from distbench.training import TrainOutput


_PROBE = """
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
try:
    r = tf.distribute.cluster_resolver.TPUClusterResolver()
    print("OK", r.master())
except Exception as e:
    print("NO", type(e).__name__ + ": " + " ".join(str(e).split()))
"""


#: Environment variables through which TPUClusterResolver finds a TPU (Cloud TPU, GKE, Colab).
TPU_ENV = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "COLAB_TPU_ADDR", "TPU_WORKER_HOSTNAMES",
           "TPU_ACCELERATOR_TYPE")


def tpu_signs(root: str = "/") -> list[str]:
    """What could let ``TPUClusterResolver()`` find a TPU here, read without TensorFlow: a
    set :data:`TPU_ENV` variable, a TPU device (``/dev/accel*``, ``/dev/vfio/<n>``), or a
    Google Compute Engine machine (its metadata server names Cloud TPUs).

    Args:
        root: the file-system root to look under (tests).

    Returns:
        the signs found (empty: the resolver has nothing to connect to).
    """
    from pathlib import Path

    signs = [v for v in TPU_ENV if os.environ.get(v)]
    dev = Path(root) / "dev"
    signs += [str(p) for p in sorted(dev.glob("accel*"))]
    signs += [str(p) for p in sorted((dev / "vfio").glob("[0-9]*"))]
    try:
        product = (Path(root) / "sys/class/dmi/id/product_name").read_text()
    except OSError:
        product = ""
    if "Google" in product:
        signs.append("Google Compute Engine")
    return signs


def probe_tpu(timeout_s: float = 120.0) -> Availability:
    """Run ``TPUClusterResolver()`` in a fresh interpreter (TensorFlow state cannot be
    reset in this one) and report whether it found a TPU, with its message if not."""
    try:
        cp = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                            timeout=timeout_s, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    except subprocess.TimeoutExpired:
        return Availability(False, f"no TPU found: TPUClusterResolver did not answer within {timeout_s:g} s")
    lines = [ln for ln in cp.stdout.splitlines() if ln.startswith(("OK", "NO"))]
    if not lines:
        return Availability(False, f"TPU probe crashed (exit {cp.returncode}): {last_error_line(cp.stderr)}")
    if lines[-1].startswith("OK"):
        return Availability(True)
    return Availability(False, clip("no TPU found: TPUClusterResolver: " + lines[-1][3:], 500))


@register
class TPU(Strategy):
    """TPUStrategy over the TPU cores the cluster resolver finds."""

    name = "tpu"
    description = "tf.distribute.TPUStrategy (needs a reachable TPU)"
    needs = "a Cloud TPU (a TPU VM or a TPU reachable by TPUClusterResolver); the steps must be TPU-compilable"
    uses_network = False

    def is_available(self, config: ExperimentConfig, workers: int) -> Availability:
        """TensorFlow's own probe (:func:`probe_tpu`, in a subprocess) where :func:`tpu_signs`
        finds anything it could connect to; else unavailable at once, saying what was
        checked (importing TensorFlow to be told the same takes 5-20 s)."""
        if not tpu_signs():
            return Availability(False, "no TPU found: TPUClusterResolver has nothing to connect to here (no "
                                       f"{', '.join(TPU_ENV)} set, no /dev/accel* or /dev/vfio device, not a "
                                       "Google Compute Engine machine)")
        return probe_tpu()

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Resolve and initialise the TPU, then train with the shared loop.

        Raises:
            StrategyUnavailable: no TPU; or a straggler scenario (its step timing and delay
                are a host-side Python function, which a TPU step cannot run).
        """
        if ctx.scenario is not None:
            raise StrategyUnavailable("tpu does not support straggler scenarios: the step delay is a host-side "
                                      "sleep (tf.numpy_function), which cannot run inside a TPU step")
        import tensorflow as tf

        from distbench.training.tf_loop import train_with_strategy

        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, RuntimeError, tf.errors.OpError) as e:
            raise StrategyUnavailable("no TPU found: TPUClusterResolver: " + " ".join(str(e).split())) from e
        strategy = tf.distribute.TPUStrategy(resolver)
        out = train_with_strategy(strategy, ctx.workload, ctx.scenario)
        out.extra["devices"] = [d.name for d in tf.config.list_logical_devices("TPU")]
        return out

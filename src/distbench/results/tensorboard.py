"""TensorBoard scalars of every configuration's accuracy/loss curve (``--tensorboard``).

Layout: ``<dir>/<config_id>[_hw<letter>][_wl<n>]/r<repeat>/`` holds one event file per
repeat, so TensorBoard lists each repeat as a run grouped by configuration (the suffixes
appear only when records of several machines or workloads are merged). Tags:

- ``test/accuracy``, ``test/loss`` against the training step of the snapshot;
- ``test_vs_time/accuracy``, ``test_vs_time/loss`` against milliseconds of training
  time (TensorBoard's x axis needs integer steps, so the step is
  ``round(elapsed_s * 1000)``; TensorBoard's own "wall" axis would show when this
  report was written, not when training happened).

Scalars are written with ``tf.summary.write`` and the scalars plugin's metadata (what
``tf.summary.scalar`` does when the ``tensorboard`` package is installed), so writing
needs TensorFlow only; viewing needs ``pip install tensorboard``. TensorFlow is imported
only here, only when asked, with its C++ start-up notices silenced and GPUs hidden
(writing a few scalars must not claim an accelerator).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distbench.results.stats import hardware_labels, record_groups, workload_labels
from distbench.tfquiet import import_tensorflow_off_gpus


def _scalar_metadata(tf: Any) -> Any:
    """The metadata TensorBoard's scalars plugin reads (what ``tensorboard.summary.scalar``
    attaches), built from TensorFlow's own protos so the ``tensorboard`` package is not
    needed to write: plugin ``scalars``, data class scalar."""
    meta = tf.compat.v1.SummaryMetadata(plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))
    meta.data_class = 1  # DATA_CLASS_SCALAR in tensorflow/core/framework/summary.proto
    return meta


def run_dirs(records: list[dict[str, Any]]) -> dict[int, str]:
    """Relative log directory of each ok record with a curve, keyed by index in ``records``:
    ``<config_id>[_hw<letter>][_wl<n>]/r<repeat>`` (suffixes only when merged records come
    from several machines or workloads)."""
    hw_labels, wl_labels = hardware_labels(records), workload_labels(records)
    out = {}
    for i, (r, (hw, wk)) in enumerate(zip(records, record_groups(records))):
        if r.get("status") != "ok" or not r.get("curve"):
            continue
        suffix = (f"_hw{hw_labels[hw]}" if len(hw_labels) > 1 else "") + \
            (f"_wl{wl_labels[wk]}" if len(wl_labels) > 1 else "")
        out[i] = f"{r['config_id']}{suffix}/r{r.get('repeat', 0)}"
    return out


def write_scalars(records: list[dict[str, Any]], out_dir: Path) -> Path:
    """Write the curves of ``records`` as TensorBoard scalars under ``out_dir``.

    Args:
        records: run records (only ``ok`` ones with a curve are written).
        out_dir: the ``tensorboard`` directory (created). Event files left in a
            repeat's directory by an earlier report are replaced, so re-rendering does not
            duplicate points.

    Returns:
        ``out_dir``.
    """
    tf = import_tensorflow_off_gpus()
    meta = _scalar_metadata(tf)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, rel in run_dirs(records).items():
        rec = records[i]
        for old in (out_dir / rel).glob("events.out.tfevents.*"):
            old.unlink()
        writer = tf.summary.create_file_writer(str(out_dir / rel))
        with writer.as_default():
            for p in rec["curve"]:
                step = int(p.get("step") or p.get("epoch") or 0)
                ms = int(round(float(p["elapsed_s"]) * 1000))
                for name in ("accuracy", "loss"):
                    v = p.get(f"test_{name}")
                    if v is None:
                        continue
                    tf.summary.write(f"test/{name}", tf.constant(float(v), tf.float32), step=step, metadata=meta)
                    tf.summary.write(f"test_vs_time/{name}", tf.constant(float(v), tf.float32), step=ms,
                                     metadata=meta)
        writer.flush()
        writer.close()
    return out_dir

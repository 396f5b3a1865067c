"""``horovodrun`` without its per-launch build check (``python -m distbench.launch.horovodrun``).

``horovodrun --gloo`` checks, on every launch and before any rank starts, that Horovod was
built with the Gloo controller by importing ``horovod.tensorflow`` (and so TensorFlow) in a
forked child: 6-9 s of a core on a 2-core machine, about as long as the ranks' own start
(``benchmarks/startup_floor.py``; docs/engines.md). distbench has checked exactly that
already, once per Horovod build (:func:`distbench.strategies.horovod.probe`: a Horovod
without Gloo is ``unavailable`` before anything launches), so this entry point runs
Horovod's own command line (``horovod.runner.launch.run_commandline``: the same options,
ssh checks, rendezvous and rank launch) with that one check answered by distbench's.

Where Horovod no longer has the check under that name, nothing is replaced and
``horovodrun`` runs as it always does.
"""

from __future__ import annotations

import sys


def main() -> int | None:
    """Run ``horovodrun`` with ``sys.argv[1:]`` as its arguments, Gloo's build check skipped.

    Returns:
        what ``run_commandline`` returns (``None`` on success); a failed launch raises or exits
        as ``horovodrun`` does.
    """
    from horovod.runner import launch

    if callable(getattr(launch, "gloo_built", None)):
        launch.gloo_built = lambda verbose=False: True  # checked by distbench's probe, not per launch
    sys.argv[0] = "horovodrun"  # its usage and error lines name the command users know
    return launch.run_commandline()


if __name__ == "__main__":
    sys.exit(main())

"""Beyond one machine: the ``[cluster]`` spec, an emulated cluster of Linux network
namespaces with rate-limited links, and the agent that runs a command on one of its hosts.

- :mod:`~distbench.config.cluster`: ``host:slots`` lists, tc link rates, and the checks of
  ``[cluster]`` (called by :func:`distbench.config.validate`).
- :mod:`~distbench.cluster.netns`: ``ip``/``tc`` plumbing, the state files that record what
  each emulated cluster created, :func:`~distbench.cluster.netns.available` and
  :func:`~distbench.cluster.netns.cleanup_leftovers`.
- :mod:`~distbench.cluster.emulated`: :class:`~distbench.cluster.emulated.EmulatedCluster`.
- :mod:`~distbench.cluster.agent`: the remote-exec agent (Open MPI's rsh agent, a fake
  ``ssh`` for ``horovodrun``).
- :mod:`~distbench.cluster.hostcheck`: ``distbench env --cluster`` (every host reachable,
  same versions, free port).
- :mod:`~distbench.cluster.cli`: ``distbench cluster up|down|status``.

This package sits between ``launch`` and ``strategies``: it imports ``config``, ``text``,
``results`` and ``launch`` only.
"""

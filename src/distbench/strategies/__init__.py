"""Distributed-training strategies: a small interface (:mod:`.base`), a registry
(:mod:`.registry`), pure launch-command builders and the process-group runner
(:mod:`.launchers`), and one module per strategy."""

"""Parameter-server optimizer rules as pure NumPy functions.

Every function here works on *weight lists*: a list of ``numpy.ndarray`` in the
order of ``model.get_weights()``, one array per variable, any shapes.  Nothing
here does I/O, holds state, or imports TensorFlow, so the same rules drive any
engine (Spark today, MPI later) and are tested against hand-computed values.

Notation (as in docs/architecture.md, section "Parameter servers"):

* ``W``          the worker's local weights,
* ``W_pulled``   the centre weights the worker pulled last,
* ``C``          the centre variable held by the parameter server,
* ``w``          the communication window (local mini-batches between commits),
* ``tau``        staleness: number of updates applied to ``C`` since the
                 committing worker's last pull,
* ``alpha``      the elastic moving rate, ``alpha = eta * rho`` (learning rate
                 times elastic strength).

| optimizer | worker every w steps                    | server fold          |
|-----------|-----------------------------------------|----------------------|
| downpour  | delta = W - W_pulled; commit; pull       | C += delta           |
| adag      | delta = (W - W_pulled) / w; commit; pull | C += delta           |
| dynsgd    | delta = W - W_pulled; commit; pull       | C += delta/(tau + 1) |
| aeasgd    | pull C; E = alpha (W - C); W -= E; commit| C += E               |
| eamsgd    | as aeasgd, local Nesterov momentum       | C += E               |
| easgd     | (sync) E_k = alpha (W_k - C); W_k -= E_k | C += sum_k E_k       |
| averaging | (sync) send W_k                          | C = mean_k W_k       |

Engines should not branch on the optimizer name: they read an
:class:`OptimizerSpec` from :data:`OPTIMIZERS` and call its
:meth:`OptimizerSpec.worker_commit` / :meth:`OptimizerSpec.server_fold`
(async) or :meth:`OptimizerSpec.sync_fold` (sync), following the spec's
``pull_before_commit`` and ``adopt_center`` flags (see
:class:`distbench.ps_async.client.WorkerSession`, which does exactly that).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from distbench.contracts import SyncKind

Weights = list  # list[np.ndarray], in model.get_weights() order

__all__ = [
    "Weights", "OptimizerSpec", "OPTIMIZERS", "DEFAULTS", "DISPLAY", "get_optimizer", "resolve_params",
    "elastic_alpha", "downpour_delta", "adag_delta", "dynsgd_delta", "elastic_difference",
    "additive_fold", "dynsgd_fold", "easgd_sync_fold", "averaging_sync_fold",
    "nesterov_lookahead", "nesterov_step",
]


# --------------------------------------------------------------------------- helpers
def _check_pair(a: Sequence[np.ndarray], b: Sequence[np.ndarray], what: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{what}: got {len(a)} arrays and {len(b)} arrays; the weight lists "
                         "must have one array per model variable, in the same order")
    for i, (x, y) in enumerate(zip(a, b)):
        if np.shape(x) != np.shape(y):
            raise ValueError(f"{what}: array {i} has shape {np.shape(x)} vs {np.shape(y)}")


def elastic_alpha(learning_rate: float, rho: float) -> float:
    """Elastic moving rate ``alpha = eta * rho`` (Zhang, Choromanska, LeCun 2015, Sec. 3).

    Args:
        learning_rate: ``eta``, the worker learning rate (> 0).
        rho: elastic strength ``rho`` (> 0).
    Returns:
        ``alpha`` as a float.  The paper's stability condition for the
        asynchronous round-robin scheme needs ``0 < alpha < 1``; this is not
        enforced here, only ``alpha > 0``.
    Raises:
        ValueError: if either argument is not a positive finite number.
    """
    for name, v in (("learning_rate", learning_rate), ("rho", rho)):
        if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    return float(learning_rate) * float(rho)


# --------------------------------------------------------------------------- worker side
def downpour_delta(weights: Sequence[np.ndarray], pulled: Sequence[np.ndarray]) -> Weights:
    """DOWNPOUR worker commit: ``delta = W - W_pulled``.

    Dean et al., "Large Scale Distributed Deep Networks", NIPS 2012 (Downpour
    SGD; here the accumulated update of ``w`` local steps is pushed at once).

    Args:
        weights: ``W``, the worker's weights after ``w`` local steps (arrays of any shapes).
        pulled: ``W_pulled``, the centre weights pulled at the start of the window (same shapes).
    Returns:
        A new list of arrays ``W - W_pulled`` (same shapes and dtypes as ``weights``).
    Raises:
        ValueError: if the lists differ in length or shapes.
    """
    _check_pair(weights, pulled, "downpour_delta")
    return [np.subtract(w, p) for w, p in zip(weights, pulled)]


def adag_delta(weights: Sequence[np.ndarray], pulled: Sequence[np.ndarray], steps: int) -> Weights:
    """ADAG worker commit (accumulated gradient normalization): ``delta = (W - W_pulled) / w``.

    Hermans, Spanakis, Möckel, "Accumulated Gradient Normalization", ACML 2017
    (dist-keras ADAG).  ``w`` is the number of local steps *actually taken* in
    this window: the final, partial window of an epoch divides by its own step
    count, not by the configured window.

    Args:
        weights: ``W`` after the window's local steps.
        pulled: ``W_pulled`` at the start of the window.
        steps: number of local mini-batches in this window (int >= 1).
    Returns:
        New list ``(W - W_pulled) / steps``.
    Raises:
        ValueError: if ``steps < 1`` or the lists do not match.
    """
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"adag_delta: steps must be an integer >= 1 (local steps in this "
                         f"window), got {steps!r}")
    _check_pair(weights, pulled, "adag_delta")
    return [np.subtract(w, p) / np.asarray(steps, dtype=np.asarray(w).dtype)
            for w, p in zip(weights, pulled)]


def dynsgd_delta(weights: Sequence[np.ndarray], pulled: Sequence[np.ndarray]) -> Weights:
    """DynSGD worker commit: ``delta = W - W_pulled`` (sent with the worker's pull clock).

    Jiang, Cui, Zhang, Yu, "Heterogeneity-aware Distributed Parameter Servers",
    SIGMOD 2017.  The staleness scaling happens on the server
    (:func:`dynsgd_fold`).

    Args / Returns / Raises: as :func:`downpour_delta`.
    """
    _check_pair(weights, pulled, "dynsgd_delta")
    return [np.subtract(w, p) for w, p in zip(weights, pulled)]


def elastic_difference(weights: Sequence[np.ndarray], center: Sequence[np.ndarray],
                       alpha: float) -> tuple[Weights, Weights]:
    """Elastic step of (A)EASGD / EAMSGD: ``E = alpha (W - C)``; ``W <- W - E``.

    Zhang, Choromanska, LeCun, "Deep learning with Elastic Averaging SGD",
    NIPS 2015: Algorithm 1 (asynchronous EASGD) and Algorithm 2 (asynchronous
    EAMSGD) on the worker every ``tau`` (= window) steps, after reading ``C``;
    for synchronous EASGD (eqs. 5-6) every worker does the same each round
    with the common ``C``.  The server then applies ``C <- C + E`` (async) or
    ``C <- C + sum_k E_k`` (sync).

    Args:
        weights: ``W``, the worker's weights.
        center: ``C``, the centre just pulled (async) or the round's centre (sync).
        alpha: elastic moving rate ``eta * rho`` (see :func:`elastic_alpha`).
    Returns:
        ``(new_weights, E)``: ``W - E`` and ``E``, both new lists.
    Raises:
        ValueError: on mismatched lists or a non-finite ``alpha``.
    """
    if not np.isfinite(alpha):
        raise ValueError(f"elastic_difference: alpha must be finite, got {alpha!r}")
    _check_pair(weights, center, "elastic_difference")
    elastic = [np.asarray(alpha, dtype=np.asarray(w).dtype) * np.subtract(w, c)
               for w, c in zip(weights, center)]
    return [np.subtract(w, e) for w, e in zip(weights, elastic)], elastic


def nesterov_lookahead(weights: Sequence[np.ndarray], velocity: Sequence[np.ndarray],
                       momentum: float) -> Weights:
    """EAMSGD: point where the local gradient is evaluated, ``x + delta * v``.

    Zhang, Choromanska, LeCun 2015, Algorithm 2 (asynchronous EAMSGD), local
    Nesterov momentum: ``g = grad f(x + delta v)``.

    Args:
        weights: ``x`` (the worker's weights).
        velocity: ``v`` (same shapes; zeros at start).
        momentum: ``delta`` in [0, 1).
    Returns:
        New list ``x + momentum * v``.
    """
    _check_pair(weights, velocity, "nesterov_lookahead")
    return [w + momentum * v for w, v in zip(weights, velocity)]


def nesterov_step(weights: Sequence[np.ndarray], velocity: Sequence[np.ndarray],
                  grads_at_lookahead: Sequence[np.ndarray], learning_rate: float,
                  momentum: float) -> tuple[Weights, Weights]:
    """EAMSGD local momentum update: ``v <- delta v - eta g``; ``x <- x + v``.

    Zhang, Choromanska, LeCun 2015, Algorithm 2, where ``g`` is the gradient at
    :func:`nesterov_lookahead` ``(x + delta v)``.  The elastic step
    (:func:`elastic_difference`) is applied every window before the local step.

    Args:
        weights: ``x``.
        velocity: ``v``.
        grads_at_lookahead: ``g`` evaluated at ``x + momentum * v`` (same shapes).
        learning_rate: ``eta``.
        momentum: ``delta``.
    Returns:
        ``(new_weights, new_velocity)``.
    Raises:
        ValueError: on mismatched lists.
    """
    _check_pair(weights, velocity, "nesterov_step")
    _check_pair(weights, grads_at_lookahead, "nesterov_step")
    new_v = [momentum * v - learning_rate * g for v, g in zip(velocity, grads_at_lookahead)]
    return [w + v for w, v in zip(weights, new_v)], new_v


# --------------------------------------------------------------------------- server side
def additive_fold(center: Sequence[np.ndarray], delta: Sequence[np.ndarray], *,
                  out: Sequence[np.ndarray] | None = None) -> Weights:
    """Server fold of DOWNPOUR, ADAG, AEASGD and EAMSGD: ``C <- C + delta``.

    (Dean et al. 2012; Hermans et al. 2017; Zhang et al. 2015 Alg. 1-2.)

    Args:
        center: ``C``.
        delta: the committed ``delta`` (or elastic difference ``E``), same shapes.
        out: optional destination list (may be ``center`` itself for in-place).
    Returns:
        ``C + delta`` (``out`` if given, else new arrays).
    """
    _check_pair(center, delta, "additive_fold")
    if out is None:
        return [np.add(c, d) for c, d in zip(center, delta)]
    for c, d, o in zip(center, delta, out):
        np.add(c, d, out=o)
    return list(out)


def dynsgd_fold(center: Sequence[np.ndarray], delta: Sequence[np.ndarray], staleness: int, *,
                out: Sequence[np.ndarray] | None = None) -> Weights:
    """DynSGD server fold: ``C <- C + delta / (tau + 1)``.

    Jiang et al., SIGMOD 2017: the update is scaled down by the number of
    centre updates applied since the committing worker pulled.

    Args:
        center: ``C``.
        delta: ``W - W_pulled`` from the worker.
        staleness: ``tau >= 0``, centre updates since that worker's pull.
        out: optional destination (may be ``center``).
    Returns:
        ``C + delta / (tau + 1)``.
    Raises:
        ValueError: if ``staleness`` is negative or not an integer.
    """
    if isinstance(staleness, bool) or not isinstance(staleness, (int, np.integer)) or staleness < 0:
        raise ValueError(f"dynsgd_fold: staleness must be an integer >= 0, got {staleness!r}")
    _check_pair(center, delta, "dynsgd_fold")
    dsts = out if out is not None else [None] * len(center)
    res = []
    for c, d, o in zip(center, delta, dsts):
        scaled = np.divide(d, np.asarray(staleness + 1, dtype=np.asarray(c).dtype))
        res.append(np.add(c, scaled, out=o) if o is not None else np.add(c, scaled))
    return res


def easgd_sync_fold(center: Sequence[np.ndarray],
                    contributions: Sequence[Sequence[np.ndarray]]) -> Weights:
    """Synchronous EASGD centre update: ``C <- C + sum_k E_k`` (barrier over all workers).

    Zhang, Choromanska, LeCun 2015, eqs. (5)-(6): ``x~ <- x~ + alpha sum_i (x_i - x~)``
    where every worker sent ``E_k = alpha (W_k - C)`` computed with the same ``C``.

    Args:
        center: ``C``.
        contributions: one ``E_k`` list per worker (summed in the given order).
    Returns:
        New list ``C + sum_k E_k``.
    Raises:
        ValueError: with no contributions or mismatched lists.
    """
    if not contributions:
        raise ValueError("easgd_sync_fold: needs at least one worker contribution")
    new = [np.array(c, copy=True) for c in center]
    for k, e in enumerate(contributions):
        _check_pair(center, e, f"easgd_sync_fold (worker contribution {k})")
        for n, ek in zip(new, e):
            n += ek
    return new


def averaging_sync_fold(center: Sequence[np.ndarray],
                        contributions: Sequence[Sequence[np.ndarray]]) -> Weights:
    """Synchronous model averaging: ``C <- (1/N) sum_k W_k``.

    McMahan et al., "Communication-Efficient Learning of Deep Networks from
    Decentralized Data" (FedAvg with equal weights), AISTATS 2017; elephas
    synchronous mode.  ``center`` only fixes shapes/dtypes; its values are
    replaced.

    Args:
        center: ``C`` (for shapes and dtypes).
        contributions: one weight list ``W_k`` per worker.
    Returns:
        New list ``mean_k W_k`` in the dtype of ``center``.
    Raises:
        ValueError: with no contributions or mismatched lists.
    """
    if not contributions:
        raise ValueError("averaging_sync_fold: needs at least one worker contribution")
    acc = [np.zeros(np.shape(c), dtype=np.float64) for c in center]
    for k, wk in enumerate(contributions):
        _check_pair(center, wk, f"averaging_sync_fold (worker contribution {k})")
        for a, x in zip(acc, wk):
            a += x
    n = float(len(contributions))
    return [(a / n).astype(np.asarray(c).dtype) for a, c in zip(acc, center)]


# --------------------------------------------------------------------------- specs
#: Default hyper-parameters per optimizer (dist-keras defaults).  A window of
#: ``None`` means "once per epoch" (model averaging).  ``alpha`` is derived as
#: ``learning_rate * rho`` for the elastic optimizers.
DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "downpour": MappingProxyType({"communication_window": 5}),
    "adag": MappingProxyType({"communication_window": 12}),
    "dynsgd": MappingProxyType({"communication_window": 5}),
    "aeasgd": MappingProxyType({"communication_window": 32, "rho": 5.0, "learning_rate": 0.1}),
    "eamsgd": MappingProxyType({"communication_window": 32, "rho": 5.0, "learning_rate": 0.1,
                                "momentum": 0.9}),
    "easgd": MappingProxyType({"communication_window": 32, "rho": 5.0, "learning_rate": 0.1}),
    "averaging": MappingProxyType({"communication_window": None}),
})


def resolve_params(name: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Merge ``overrides`` into the optimizer's :data:`DEFAULTS`; add ``alpha`` for elastic ones.

    Args:
        name: optimizer name (a key of :data:`OPTIMIZERS`).
        overrides: values to replace; unknown keys are an error.
    Returns:
        A new dict of parameters (``alpha = learning_rate * rho`` added when relevant).
    Raises:
        KeyError: unknown optimizer name.
        ValueError: unknown parameter key or bad value (window not a positive int or None).
    """
    if name not in DEFAULTS:
        raise KeyError(f"unknown optimizer {name!r}; known: {sorted(DEFAULTS)}")
    params = dict(DEFAULTS[name])
    for key, value in (overrides or {}).items():
        if key not in params:
            raise ValueError(f"optimizer {name!r} has no parameter {key!r} (value {value!r}); "
                             f"allowed: {sorted(params)}")
        params[key] = value
    win = params["communication_window"]
    if win is not None and (isinstance(win, bool) or not isinstance(win, int) or win < 1):
        raise ValueError(f"communication_window must be an integer >= 1 or None (once per "
                         f"epoch), got {win!r}")
    if "rho" in params:
        params["alpha"] = elastic_alpha(params["learning_rate"], params["rho"])
    return params


@dataclass(frozen=True)
class OptimizerSpec:
    """What an engine needs to drive one PS optimizer without knowing which it is.

    Attributes:
        name: registry key, e.g. ``"adag"``.
        kind: :class:`~distbench.contracts.SyncKind`: ``async`` (commit/pull at any time)
            or ``sync`` (barrier rounds).
        sends: what the worker sends: ``"delta"`` (``W - W_pulled``, maybe
            normalised), ``"elastic"`` (``E = alpha (W - C)``) or ``"weights"``.
        pull_before_commit: async only; True for the elastic methods (read ``C``,
            compute ``E``, commit ``E``), False for delta methods (commit, then pull).
        adopt_center: True if the worker replaces ``W`` by the centre after an
            exchange (DOWNPOUR, ADAG, DynSGD, averaging); False for the elastic
            methods, whose worker keeps ``W - E``.
        uses_staleness: the server fold needs ``tau`` (DynSGD).
        paper: citation with equation/algorithm.
        equation: one-line summary of worker and server rules.
        local_sgd: for optimizers whose paper prescribes the replica's local step, a
            function of the resolved parameters returning the keyword arguments of a
            ``keras.optimizers.SGD`` (EAMSGD: Nesterov momentum, Alg. 2); ``None``: the
            replica uses the workload's local optimizer.
    """

    name: str
    kind: SyncKind
    sends: Literal["delta", "elastic", "weights"]
    pull_before_commit: bool
    adopt_center: bool
    uses_staleness: bool
    paper: str
    equation: str
    _commit: Callable[..., tuple[Weights, Weights]] = field(repr=False)
    _fold: Callable[..., Weights] = field(repr=False)
    local_sgd: Callable[[Mapping[str, Any]], dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def defaults(self) -> Mapping[str, Any]:
        """The optimizer's default parameters (read-only view of :data:`DEFAULTS`)."""
        return DEFAULTS[self.name]

    def worker_commit(self, weights: Sequence[np.ndarray], reference: Sequence[np.ndarray], *,
                      steps: int = 1, params: Mapping[str, Any] | None = None
                      ) -> tuple[Weights, Weights]:
        """Compute the worker's new weights and the payload to send.

        Args:
            weights: ``W`` after the window.
            reference: ``W_pulled`` for delta methods; the just-pulled (async) or
                round's (sync) centre ``C`` for elastic methods; ignored by averaging.
            steps: local steps actually taken in this window (ADAG divides by it).
            params: resolved parameters (:func:`resolve_params`); defaults if None.
        Returns:
            ``(new_weights, payload)``; ``new_weights`` is ``weights`` itself when
            the rule does not change them locally.
        """
        p = params if params is not None else resolve_params(self.name)
        return self._commit(list(weights), list(reference), steps, p)

    def server_fold(self, center: Sequence[np.ndarray], payload: Sequence[np.ndarray], *,
                    staleness: int = 0, out: Sequence[np.ndarray] | None = None) -> Weights:
        """Async fold of one commit into ``C`` (see the table in the module docstring).

        Args:
            center: ``C``.
            payload: the worker's commit.
            staleness: ``tau`` (only DynSGD uses it).
            out: optional destination list (may be ``center`` for in-place).
        Returns:
            The new centre.
        Raises:
            TypeError: for a sync optimizer (use :meth:`sync_fold`).
        """
        if self.kind != SyncKind.ASYNC:
            raise TypeError(f"{self.name} is synchronous: use sync_fold, not server_fold")
        return self._fold(center, payload, staleness, out)

    def sync_fold(self, center: Sequence[np.ndarray],
                  payloads: Sequence[Sequence[np.ndarray]]) -> Weights:
        """Barrier fold of one round's payloads (ordered by worker id) into a new ``C``.

        Raises:
            TypeError: for an async optimizer (use :meth:`server_fold`).
        """
        if self.kind != SyncKind.SYNC:
            raise TypeError(f"{self.name} is asynchronous: use server_fold, not sync_fold")
        return self._fold(center, payloads)


def _c_delta(w, ref, steps, p):
    return w, downpour_delta(w, ref)


def _c_adag(w, ref, steps, p):
    return w, adag_delta(w, ref, steps)


def _c_elastic(w, ref, steps, p):
    return elastic_difference(w, ref, p["alpha"])


def _c_weights(w, ref, steps, p):
    return w, [np.asarray(x) for x in w]


def _f_add(c, d, tau, out):
    return additive_fold(c, d, out=out)


def _f_dyn(c, d, tau, out):
    return dynsgd_fold(c, d, tau, out=out)


_DOWNPOUR = "Dean et al., Large Scale Distributed Deep Networks, NIPS 2012"
_EASGD = "Zhang, Choromanska, LeCun, Deep learning with Elastic Averaging SGD, NIPS 2015"

#: Registry of every PS optimizer, keyed by name.
OPTIMIZERS: Mapping[str, OptimizerSpec] = MappingProxyType({
    "downpour": OptimizerSpec("downpour", SyncKind.ASYNC, "delta", False, True, False, _DOWNPOUR,
                              "delta = W - W_pulled; C += delta", _c_delta, _f_add),
    "adag": OptimizerSpec("adag", SyncKind.ASYNC, "delta", False, True, False,
                          "Hermans, Spanakis, Moeckel, Accumulated Gradient Normalization, "
                          "ACML 2017", "delta = (W - W_pulled) / w; C += delta", _c_adag, _f_add),
    "dynsgd": OptimizerSpec("dynsgd", SyncKind.ASYNC, "delta", False, True, True,
                            "Jiang, Cui, Zhang, Yu, Heterogeneity-aware Distributed Parameter "
                            "Servers, SIGMOD 2017",
                            "delta = W - W_pulled; C += delta / (tau + 1)", _c_delta, _f_dyn),
    "aeasgd": OptimizerSpec("aeasgd", SyncKind.ASYNC, "elastic", True, False, False,
                            _EASGD + ", Algorithm 1",
                            "pull C; E = alpha (W - C); W -= E; C += E", _c_elastic, _f_add),
    "eamsgd": OptimizerSpec("eamsgd", SyncKind.ASYNC, "elastic", True, False, False,
                            _EASGD + ", Algorithm 2 (local Nesterov momentum)",
                            "as aeasgd; locally v = m v - eta g(W + m v); W += v",
                            _c_elastic, _f_add,
                            lambda p: {"learning_rate": p["learning_rate"], "momentum": p["momentum"],
                                       "nesterov": True}),
    "easgd": OptimizerSpec("easgd", SyncKind.SYNC, "elastic", False, False, False,
                           _EASGD + ", synchronous EASGD eqs. (5)-(6)",
                           "E_k = alpha (W_k - C); W_k -= E_k; C += sum_k E_k (barrier)",
                           _c_elastic, easgd_sync_fold),
    "averaging": OptimizerSpec("averaging", SyncKind.SYNC, "weights", False, True, False,
                               "McMahan et al., Communication-Efficient Learning of Deep "
                               "Networks from Decentralized Data, AISTATS 2017",
                               "C = mean_k W_k (barrier)", _c_weights, averaging_sync_fold),
})


DISPLAY: Mapping[str, str] = MappingProxyType({
    "downpour": "DOWNPOUR", "adag": "ADAG", "dynsgd": "DynSGD", "aeasgd": "AEASGD", "eamsgd": "EAMSGD",
    "easgd": "EASGD", "averaging": "model averaging"})
"""Each optimizer's name as the literature writes it."""


def get_optimizer(name: str) -> OptimizerSpec:
    """Return the :class:`OptimizerSpec` for ``name``.

    Raises:
        KeyError: naming the unknown value and the allowed names.
    """
    try:
        return OPTIMIZERS[name]
    except KeyError:
        raise KeyError(f"unknown PS optimizer {name!r}; allowed: {sorted(OPTIMIZERS)}") from None

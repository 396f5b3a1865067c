"""Hand-computed checks of every PS optimizer rule (no TensorFlow, no network)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distbench.ps_async import rules as R

f32 = np.float32


def arr(*v, shape=None):
    a = np.array(v, dtype=f32)
    return a.reshape(shape) if shape else a


def assert_list_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.asarray(w, dtype=g.dtype))
        assert g.shape == np.shape(w)


# ----------------------------------------------------------------------------- DOWNPOUR
def test_downpour_delta_and_fold():
    W = [arr(1, 2, 3, 4, shape=(2, 2)), arr(5)]
    pulled = [arr(0.5, 1, 1, 1, shape=(2, 2)), arr(2)]
    delta = R.downpour_delta(W, pulled)
    assert_list_equal(delta, [[[0.5, 1], [2, 3]], [3]])
    C = [arr(10, 10, 10, 10, shape=(2, 2)), arr(-1)]
    assert_list_equal(R.additive_fold(C, delta), [[[10.5, 11], [12, 13]], [2]])
    assert C[1][0] == -1  # not modified without out=


def test_additive_fold_in_place():
    C = [arr(1, 2)]
    out = R.additive_fold(C, [arr(3, 4)], out=C)
    assert out[0] is C[0]
    assert_list_equal(C, [[4, 6]])


# ----------------------------------------------------------------------------- ADAG
def test_adag_full_window_divides_by_window():
    W, pulled = [arr(12, 24), arr(-12)], [arr(0, 0), arr(0)]
    assert_list_equal(R.adag_delta(W, pulled, 12), [[1, 2], [-1]])


def test_adag_final_partial_window_divides_by_actual_steps():
    # window 12, but the epoch's last window only had 3 local steps
    W, pulled = [arr(12, 24)], [arr(0, 6)]
    assert_list_equal(R.adag_delta(W, pulled, 3), [[4, 6]])
    spec = R.OPTIMIZERS["adag"]
    new_w, payload = spec.worker_commit(W, pulled, steps=3)
    assert_list_equal(payload, [[4, 6]])
    assert new_w[0] is W[0]
    assert payload[0].dtype == np.float32


@pytest.mark.parametrize("steps", [0, -1, 2.5, True])
def test_adag_rejects_bad_steps(steps):
    with pytest.raises(ValueError, match="steps"):
        R.adag_delta([arr(1)], [arr(0)], steps)


# ----------------------------------------------------------------------------- DynSGD
@pytest.mark.parametrize("tau, expected", [(0, [5, 10]), (1, [3, 6]), (3, [2, 4]), (7, [1.5, 3])])
def test_dynsgd_fold_scales_by_staleness(tau, expected):
    C, delta = [arr(1, 2)], [arr(4, 8)]
    assert_list_equal(R.dynsgd_fold(C, delta, tau), [expected])
    assert_list_equal(R.OPTIMIZERS["dynsgd"].server_fold(C, delta, staleness=tau), [expected])


def test_dynsgd_delta_is_plain_difference():
    assert_list_equal(R.dynsgd_delta([arr(3, 3)], [arr(1, 4)]), [[2, -1]])


@pytest.mark.parametrize("tau", [-1, 1.0, None])
def test_dynsgd_rejects_bad_staleness(tau):
    with pytest.raises(ValueError, match="staleness"):
        R.dynsgd_fold([arr(1)], [arr(1)], tau)


def test_non_dynsgd_folds_ignore_staleness():
    for name in ("downpour", "adag", "aeasgd", "eamsgd"):
        assert_list_equal(R.OPTIMIZERS[name].server_fold([arr(1)], [arr(4)], staleness=3), [[5]])


# ----------------------------------------------------------------------------- elastic
def test_aeasgd_elastic_step():
    p = R.resolve_params("aeasgd")
    assert p["alpha"] == pytest.approx(0.5)  # 0.1 * 5.0
    W, C = [arr(2, 4)], [arr(1, 1)]
    new_w, E = R.OPTIMIZERS["aeasgd"].worker_commit(W, C, params=p)
    assert_list_equal(E, [[0.5, 1.5]])
    assert_list_equal(new_w, [[1.5, 2.5]])
    assert_list_equal(R.OPTIMIZERS["aeasgd"].server_fold(C, E), [[1.5, 2.5]])
    assert_list_equal(W, [[2, 4]])  # input not modified


def test_eamsgd_nesterov_momentum():
    x, v = [arr(1, 2)], [arr(0.5, -1)]
    np.testing.assert_allclose(R.nesterov_lookahead(x, v, 0.9)[0], [1.45, 1.1], rtol=1e-6)
    new_x, new_v = R.nesterov_step(x, v, [arr(1, 2)], learning_rate=0.1, momentum=0.9)
    np.testing.assert_allclose(new_v[0], [0.35, -1.1], rtol=1e-6)  # 0.9 v - 0.1 g
    np.testing.assert_allclose(new_x[0], [1.35, 0.9], rtol=1e-6)   # x + v_new
    assert R.resolve_params("eamsgd")["momentum"] == 0.9


def test_easgd_sync_round():
    alpha = R.elastic_alpha(0.1, 5.0)
    C = [arr(0, 0)]
    w1, e1 = R.elastic_difference([arr(2, 4)], C, alpha)
    w2, e2 = R.elastic_difference([arr(-2, 8)], C, alpha)
    assert_list_equal(e1, [[1, 2]])
    assert_list_equal(e2, [[-1, 4]])
    assert_list_equal(w1, [[1, 2]])
    assert_list_equal(w2, [[-1, 4]])
    assert_list_equal(R.OPTIMIZERS["easgd"].sync_fold(C, [e1, e2]), [[0, 6]])
    assert_list_equal(C, [[0, 0]])


def test_model_averaging():
    spec = R.OPTIMIZERS["averaging"]
    C = [arr(100, 100), arr(7)]
    ws = [[arr(1, 3), arr(0)], [arr(3, 5), arr(3)], [arr(5, 1), arr(3)]]
    _, payload = spec.worker_commit(ws[0], C)
    assert_list_equal(payload, ws[0])
    out = spec.sync_fold(C, ws)
    assert_list_equal(out, [[3, 3], [2]])
    assert out[0].dtype == np.float32


def test_sync_folds_need_contributions():
    with pytest.raises(ValueError, match="at least one"):
        R.easgd_sync_fold([arr(1)], [])
    with pytest.raises(ValueError, match="at least one"):
        R.averaging_sync_fold([arr(1)], [])


# ----------------------------------------------------------------------------- specs / params
def test_defaults_table():
    want = {"downpour": 5, "adag": 12, "dynsgd": 5, "aeasgd": 32, "eamsgd": 32, "easgd": 32,
            "averaging": None}
    assert {k: v["communication_window"] for k, v in R.DEFAULTS.items()} == want
    for name in ("aeasgd", "eamsgd", "easgd"):
        assert R.DEFAULTS[name]["rho"] == 5.0 and R.DEFAULTS[name]["learning_rate"] == 0.1
    assert set(R.OPTIMIZERS) == set(R.DEFAULTS)


def test_spec_flags():
    kinds = {n: s.kind for n, s in R.OPTIMIZERS.items()}
    assert kinds == {"downpour": "async", "adag": "async", "dynsgd": "async", "aeasgd": "async",
                     "eamsgd": "async", "easgd": "sync", "averaging": "sync"}
    assert [n for n, s in R.OPTIMIZERS.items() if s.pull_before_commit] == ["aeasgd", "eamsgd"]
    assert [n for n, s in R.OPTIMIZERS.items() if s.uses_staleness] == ["dynsgd"]
    assert R.OPTIMIZERS["averaging"].sends == "weights"
    assert not R.OPTIMIZERS["easgd"].adopt_center
    with pytest.raises(TypeError, match="sync_fold"):
        R.OPTIMIZERS["easgd"].server_fold([arr(1)], [arr(1)])
    with pytest.raises(TypeError, match="server_fold"):
        R.OPTIMIZERS["adag"].sync_fold([arr(1)], [[arr(1)]])


def test_resolve_params_errors():
    assert R.resolve_params("adag", {"communication_window": 3})["communication_window"] == 3
    with pytest.raises(ValueError, match="'rho'.*allowed"):
        R.resolve_params("adag", {"rho": 1.0})
    with pytest.raises(ValueError, match="communication_window"):
        R.resolve_params("downpour", {"communication_window": 0})
    with pytest.raises(KeyError, match="unknown"):
        R.get_optimizer("sgd")
    with pytest.raises(ValueError, match="rho"):
        R.resolve_params("aeasgd", {"rho": -1.0})


def test_mismatched_lists_raise():
    with pytest.raises(ValueError, match="shape"):
        R.downpour_delta([arr(1, 2)], [arr(1)])
    with pytest.raises(ValueError, match="arrays"):
        R.additive_fold([arr(1)], [arr(1), arr(2)])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=8), st.integers(0, 20))
def test_dynsgd_equals_downpour_scaled(values, tau):
    C, d = [np.zeros(len(values), f32)], [np.array(values, f32)]
    np.testing.assert_allclose(R.dynsgd_fold(C, d, tau)[0],
                               R.additive_fold(C, [d[0] / f32(tau + 1)])[0], rtol=1e-6)

"""The smoke test of ``benchmarks/emulated_links.py`` (see tests/test_benchmarks_smoke.py for
the others): an emulated cluster, so it runs with the emulated-cluster tests."""

from __future__ import annotations

import pytest

from tests.cluster.conftest import NETNS_OK, NETNS_REASON
from tests.test_benchmarks_smoke import run_quick, section

pytestmark = pytest.mark.integration


def test_emulated_links_quick(tmp_path, request):
    """``benchmarks/emulated_links.py --quick`` (its smoke test lives here, with the other
    emulated-cluster tests, so that ``make test`` runs it alone)."""
    if not request.config.getoption("--long"):
        pytest.skip("about 100 s (4 configurations on an emulated cluster): runs with --long and in make bench")
    if not NETNS_OK:
        pytest.skip(NETNS_REASON)
    out = tmp_path / "B.md"
    run_quick("emulated_links.py", out, timeout=900)
    s = section(out, "emulated_links")
    assert "| `horovod` | 1gbit |" in s and "| `mpi_ps:adag` | unlimited |" in s


def test_predict_validation_quick(tmp_path, request):
    """``benchmarks/predict_validation.py --quick``: a one-host run, its calibration, one emulated
    cell (2 hosts at 1 Gbit/s) and the table with the cost model's ratios."""
    if not request.config.getoption("--long"):
        pytest.skip("about 3 min (a one-host run, calibration, an emulated cell): runs with --long and in make bench")
    if not NETNS_OK:
        pytest.skip(NETNS_REASON)
    out = tmp_path / "B.md"
    run_quick("predict_validation.py", out, timeout=1200)
    s = section(out, "predict_validation")
    assert "| small | 2x1gbit | `horovod` |" in s and "| small | 2x1gbit | `mpi_ps:adag` |" in s
    assert "Epoch time |predicted/measured - 1|: median" in s and "Pairwise ranking agreement" in s

"""End to end: report.html from the fixture runs, opened in headless Chromium.

The page carries a tiny script that, only when the URL ends in ``#selftest``, writes how
many of its images decoded (``naturalWidth > 0``) into the DOM; ``--dump-dom`` returns the
DOM after the load event, so the test sees the page's text and the image count.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

from distbench.results.report import write_report
from distbench.results.store import read_records
from tests.conftest import requires

FIXTURES = Path(__file__).with_name("fixtures")
CHROMIUM = "chromium"


def _dump_dom(url: str, profile: Path) -> str:
    exe = shutil.which(CHROMIUM) or shutil.which("chromium-browser")
    cp = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync",
                         f"--user-data-dir={profile}", "--dump-dom", url],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return cp.stdout


def _text(dom: str) -> str:
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


@requires(executable=CHROMIUM)
def test_report_html_renders_in_chromium_with_every_image(tmp_path):
    records = read_records(FIXTURES / "run_a") + read_records(FIXTURES / "run_b")
    out = tmp_path / "report"
    write_report(records, out, formats=["html"])
    url = (out / "report.html").resolve().as_uri()

    dom = _dump_dom(url + "#selftest", tmp_path / "profile")
    m = re.search(r'id="selftest-result">selftest: (\d+) of (\d+) images loaded<', dom)
    assert m, dom[-3000:]
    assert m.group(1) == m.group(2) == "5"  # every plot decoded from its data: URI

    text = _text(dom)
    for expected in (
        "distbench report", "Runs fixture-a, fixture-b", "14 records",
        "Hardware A: Fastest to 0.9 test accuracy (the ranking criterion, as in the recommendation): "
        "spark_ps:adag (2 workers, window 1), 2.00 s",
        "Hardware B: Most accurate: single (1 worker), median test accuracy 0.960",
        "hardware B host beta: 4 x Test CPU B", "Comparison",
        "0.920 [0.900-0.940]", "0.920 ± 0.032", "5.00 [3.00-6.00] · 4/5 reached", "1.71x", "2.50x", "not reached",
        "Test accuracy vs wall-clock time", "Staleness histograms", "Window sweep", "Throughput vs workers",
        "Not run or failed", "worker 3 failed with exit code 1", "no TPU found",
        "Provenance", "Run fixture-a", "Run fixture-b",
    ):
        assert expected in text, expected

    # without #selftest the script does nothing
    plain = _dump_dom(url, tmp_path / "profile2")
    assert "selftest-result\">" not in plain and "Comparison" in plain

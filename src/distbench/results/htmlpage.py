"""``report.html``: one self-contained page rendered from a Jinja2 template.

The page embeds its plots as base64 PNG ``data:`` URIs and its CSS inline, and a
Content-Security-Policy forbids every network fetch, so it opens offline and can be
mailed as one file. A tiny inline script, active only when the URL ends in
``#selftest``, writes how many images decoded into the page (used by the end-to-end
test in headless Chromium); the policy allows exactly that script by its hash.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import jinja2

from distbench.results.notes import engine_starters
from distbench.results.reportdata import (STARTUP_NOTE, fmt_mean_ci, fmt_spread, fmt_staleness, fmt_ttt,
                                      has_scenarios, has_staleness, provenance_lines)

if TYPE_CHECKING:
    from distbench.results.plots import Plot
    from distbench.results.reportdata import ReportData

TEMPLATE_DIR = Path(__file__).with_name("templates")
TEMPLATE = "report.html.j2"

SELFTEST_JS = """\
if (location.hash === "#selftest") {
  window.addEventListener("load", function () {
    var imgs = Array.prototype.slice.call(document.images);
    var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
    var el = document.createElement("p");
    el.id = "selftest-result";
    el.textContent = "selftest: " + ok + " of " + imgs.length + " images loaded";
    document.body.appendChild(el);
  });
}
"""


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["spread"] = fmt_spread
    env.filters["mean_ci"] = fmt_mean_ci
    env.filters["ttt"] = fmt_ttt
    env.filters["ttt_parts"] = ttt_parts
    env.filters["staleness"] = fmt_staleness
    env.filters["num"] = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"
    env.filters["times"] = lambda v: "-" if v is None else f"{v:.2f}x"
    return env


def ttt_parts(s: Any) -> tuple[str, str]:
    """Time-to-target cell split in two lines: the MLPerf score (or ``not reached``), and
    the range of the runs that reached the target with ``k/n reached`` when some missed."""
    if not s.ttt.runs:
        return "-", ""
    main = "not reached" if s.ttt.value is None else f"{s.ttt.value:.2f}"
    sub = []
    t = s.time_to_target_s
    if s.ttt.value is not None and t.n > 1 and t.min != t.max:
        sub.append(f"[{t.min:.2f}-{t.max:.2f}]")
    if 0 < s.ttt.reached < s.ttt.runs:
        sub.append(f"{s.ttt.reached}/{s.ttt.runs} reached")
    return main, " · ".join(sub)


def _row_class(s: Any) -> str:
    if s.ok == 0:
        return "bad"
    return "partial" if s.ok < s.repeats else ""


def render_html(data: "ReportData", plots: Sequence["Plot"], title: str = "distbench report") -> str:
    """Render the page.

    Args:
        data: the report's data (:func:`distbench.results.report.build`).
        plots: figures to embed (as base64 PNG data URIs, in this order).
        title: page title.

    Returns:
        the HTML document (UTF-8 text) with no external reference.
    """
    csp_hash = base64.b64encode(hashlib.sha256(SELFTEST_JS.encode()).digest()).decode()
    figures = [{"name": p.name, "title": p.title, "caption": p.caption,
                "src": "data:image/png;base64," + base64.b64encode(p.png).decode("ascii")} for p in plots]
    best = {h.fastest.summary.config_id + h.hardware.key for h in data.headlines if h.fastest}
    top = {s.config_id + h.hardware.key for h in data.headlines if h.accurate  # (no star where every row ties)
           and (h.accurate.runner_up or not h.accurate.ties) for s in [h.accurate.summary, *h.accurate.ties]}
    engine = engine_starters(data.summaries)  # start-ups that include a shared engine's (marked *)
    rows = [{"s": s, "cls": _row_class(s), "fastest": s.config_id + s.hardware_key in best,
             "accurate": s.config_id + s.hardware_key in top, "engine": s.config_id in engine}
            for s in data.summaries]
    failures = []
    for s in data.failures:
        tails = [r.get("log_tail") for r in s.records if r.get("status") != "ok" and r.get("log_tail")]
        failures.append({"s": s, "statuses": ", ".join(sorted(set(s.statuses))), "reasons": s.reasons,
                         "log_tail": tails[0] if tails else ""})
    provenance = [{**g, "lines": provenance_lines(g["provenance"])} for g in data.provenance]
    stragglers = None
    if data.stragglers:
        from distbench.results.stragglers import STRAGGLER_TABLE_COLUMNS, bound_sentences, straggler_table

        stragglers = {"columns": STRAGGLER_TABLE_COLUMNS, "rows": straggler_table(data.stragglers),
                      "sentences": bound_sentences(data.stragglers)}
    return _environment().get_template(TEMPLATE).render(
        title=title, d=data, rows=rows, stale=has_staleness(data.summaries), swept=has_scenarios(data.summaries),
        figures=figures, failures=failures, stragglers=stragglers, provenance=provenance,
        repeated=any(s.ok > 1 for s in data.summaries), startup_note=STARTUP_NOTE,
        selftest_js=SELFTEST_JS, csp_hash=csp_hash,
    )

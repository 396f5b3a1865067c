"""The per-strategy cost model (``distbench predict --target``) against measured emulated
clusters: predicted and measured seconds per epoch and time to target, cell by cell.

For each model size (``small``: an MLP of one 64-unit layer on digits, 4,810 parameters,
19 KB of float32 weights; ``large``: two 1,024-unit layers, 1,125,386 parameters, 4.5 MB)
the script runs:

1. a **one-host run** (``distbench run``, loopback, no emulation) of ``single`` and every
   multi-process strategy at 2, 3 and 4 workers; then ``distbench calibrate`` on it (the
   compute time of one step against the per-worker batch and the threads);
2. for every **cell** (hosts x link rate), the same sweep on an emulated cluster of that
   many hosts (one worker per host, ``launcher = "agent"``), at that link rate, with
   ``single`` (one process on the launching host) so that ``advise`` can be read on it;

then ``distbench predict ONE_HOST_DIR --target CELL`` (the one-host run's calibration only;
the emulated run is not read) next to the cell's measured rows: per strategy, predicted /
measured steady seconds per epoch, and time to the target accuracy where both reach it.
It writes per cell the ratios, the median and largest |ratio - 1|, and the pairwise
ranking agreement: for every pair of strategies whose measured epoch times differ by more
than their run-to-run spread (the two ranges over repeats do not overlap), whether the
prediction orders them the same way. Then, per cell, the strategy ``distbench advise
ONE_HOST_DIR --target CELL`` recommends against the one ``distbench advise CELL_DIR``
recommends from the measured cell (``single`` included on both sides).

Every run is a ``distbench run --resume`` into ``--dir``: a stopped script picks up where it
stopped, cell by cell. The repeats are interleaved (round r adds repeat r of the one-host run
and of every cell), so a transient slowdown of the machine falls on one repeat of many
configurations, where the median over repeats removes it. The full grid (2 models x 6 cells,
2 repeats) takes hours on two cores; ``--quick`` runs one small cell (2 hosts, 1 Gbit/s,
2 strategies, 1 repeat, 2 epochs) for the smoke test. Needs root for the emulated cluster (``ip netns``, ``tc``).

Usage::

    python benchmarks/predict_validation.py [--quick] [--dir DIR] [--models small,large]
        [--cells 2x100mbit,2x1gbit,...] [--repeats 2] [--no-run] [--write BENCHMARKS.md]
    python benchmarks/predict_validation.py --dir DIR --models large --fit

``--fit`` prints, for the calibration cells (:data:`CALIBRATION_CELLS`, the large model on 2
hosts at 100 Mbit/s and at 1 Gbit/s) already measured in ``DIR``, the link factor per
strategy at which the one-host prediction equals the measured epoch: the figures of
``distbench.costmodel.WIRE_FACTOR``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

sys.path.insert(0, str(C.ROOT / "src"))
from distbench.cluster import netns  # noqa: E402

MODELS = {"small": [64], "large": [1024, 1024]}
STRATEGIES = ["multi_worker_mirrored", "horovod", "horovod_mpi", "tf_ps", "spark_ps:adag", "mpi_ps:adag",
              "mpi_ps:easgd"]
CELLS = ["2x100mbit", "2x1gbit", "2x10gbit", "3x1gbit", "4x100mbit", "4x1gbit"]
QUICK_STRATEGIES = ["horovod", "mpi_ps:adag"]
CALIBRATION_CELLS = (("large", "2x100mbit"), ("large", "2x1gbit"))
"""The cells distbench.costmodel.WIRE_FACTOR was fitted on (``--fit``): shown, left out of the summary figures."""
CONFIG = """\
[data]
name = "digits"
[model]
name = "mlp"
hidden = {hidden}
[training]
epochs = {epochs}
global_batch_size = 120
optimizer = "sgd"
learning_rate = 0.2
target_accuracy = {target}
[ps]
communication_window = 2
[run]
strategies = {strategies}
workers = {workers}
repeats = {repeats}
timeout_s = 1800.0
{cluster}"""


def _toml_list(items: list[Any]) -> str:
    return "[" + ", ".join(f'"{x}"' if isinstance(x, str) else str(x) for x in items) + "]"


def parse_cell(cell: str) -> tuple[int, str]:
    """``"3x1gbit"`` -> ``(3, "1gbit")``: hosts (one worker each) and the link rate."""
    hosts, _, rate = cell.partition("x")
    if not hosts.isdigit() or int(hosts) < 2 or not rate:
        raise SystemExit(f"--cells: {cell!r} is not HOSTSxRATE (e.g. 2x100mbit, 4x1gbit)")
    return int(hosts), rate


def target_text(cell: str) -> str:
    """The ``--target`` text of an emulated cell: its hosts, one worker each, its rate,
    the cores shared as on the emulated cluster."""
    hosts, rate = parse_cell(cell)
    return f"{hosts} nodes x 1, {rate}, emulated"


def run_sweep(out: Path, config: str, log: Path) -> None:
    """``distbench run`` (or ``--resume`` when ``out`` exists) of ``config``; raises on failure."""
    cfg = out.with_suffix(".toml")
    cfg.write_text(config)
    args = ["run", str(cfg), "--out", str(out)] + (["--resume"] if (out / "results.jsonl").exists() else [])
    proc = C.run_distbench(args, log, timeout_s=6 * 3600)
    if proc.returncode != 0:
        raise RuntimeError(f"distbench {' '.join(args)} exited {proc.returncode}; see {log}")


def collect(args: argparse.Namespace, root: Path) -> dict[str, dict[str, Path]]:
    """Run (or resume) the one-host run and every cell of every model; the run directories.

    The repeats are interleaved: round r resumes every run of a model (the one-host run, then
    each cell) with ``repeats = r``, so it adds repeat r of every configuration before any gets
    repeat r + 1. A slowdown of this machine lasting a few minutes then falls on one repeat of
    many configurations, which the median over repeats removes, instead of on every repeat of
    one configuration, which it would not.
    """
    dirs: dict[str, dict[str, Path]] = {}
    strategies = QUICK_STRATEGIES if args.quick else STRATEGIES
    for model in args.models:
        dirs[model] = {"onehost": root / f"{model}-onehost"}
        dirs[model].update({cell: root / f"{model}-{cell}" for cell in args.cells})
    for r in range(1, args.repeats + 1):
        for model in args.models:
            common = dict(hidden=MODELS[model], epochs=args.epochs, target=args.target, repeats=r)
            one = dirs[model]["onehost"]
            workers = sorted({parse_cell(c)[0] for c in args.cells})
            print(f"[{C.utc_now()}] {model}: one host, workers {workers}, repeat {r} of {args.repeats}", flush=True)
            run_sweep(one, CONFIG.format(strategies=_toml_list(["single"] + strategies), workers=workers,
                                         cluster="", **common), root / f"{model}-onehost.log")
            if not (one / "calibration.json").exists():
                proc = C.run_distbench(["calibrate", str(one)], root / f"{model}-calibrate.log", timeout_s=1800)
                if proc.returncode != 0:
                    raise RuntimeError(f"distbench calibrate {one} failed; see {root / f'{model}-calibrate.log'}")
            for cell in args.cells:
                hosts, rate = parse_cell(cell)
                print(f"[{C.utc_now()}] {model}: {cell}, repeat {r} of {args.repeats}", flush=True)
                cluster = f'[cluster]\nemulate = {{ hosts = {hosts}, slots = 1, bandwidth = "{rate}" }}\n'
                # single too: advise on the cell (advise_agreement) compares the strategies with it, as on one host
                run_sweep(dirs[model][cell], CONFIG.format(strategies=_toml_list(["single"] + strategies),
                                                           workers=[hosts], cluster=cluster, **common),
                          root / f"{model}-{cell}.log")
    return dirs


def predicted(one: Path, cell: str, log: Path) -> dict[str, dict[str, Any]]:
    """``distbench predict ONE --target CELL --json``: the per-strategy predictions by name."""
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "distbench", "predict", str(one), "--target", target_text(cell),
                           "--json"], capture_output=True, text=True, timeout=600, env=C.child_env(), cwd=C.ROOT)
    log.write_text(proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"distbench predict {one} --target {target_text(cell)!r} failed: {proc.stderr[-500:]}")
    doc = json.loads(proc.stdout)
    return {p["strategy"]: p for p in doc["strategies"]}


def measured(run: Path) -> dict[str, dict[str, list[float]]]:
    """Per strategy of an emulated run: steady seconds per epoch and time to target, one value per ok repeat."""
    from distbench.predict import epoch_s

    out: dict[str, dict[str, list[float]]] = {}
    for r in C.read_records(run):
        if r.get("status") != "ok":
            continue
        m = out.setdefault(r["strategy"], {"epoch_s": [], "ttt_s": []})
        e = epoch_s(r)
        if e:
            m["epoch_s"].append(e)
        if r.get("time_to_target_s") is not None:
            m["ttt_s"].append(float(r["time_to_target_s"]))
    return out


def pair_agreement(pred: dict[str, float], meas: dict[str, list[float]]) -> tuple[int, int, list[str]]:
    """Pairs whose measured ranges do not overlap, how many the prediction orders the same
    way, and the pairs it orders wrongly (``a<b`` as measured)."""
    names = sorted(n for n in pred if meas.get(n))
    agree = total = 0
    wrong = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ra, rb = meas[a], meas[b]
            if max(ra) < min(rb) or max(rb) < min(ra):
                total += 1
                faster_measured = a if max(ra) < min(rb) else b
                faster_pred = a if pred[a] < pred[b] else b
                if faster_measured == faster_pred:
                    agree += 1
                else:
                    wrong.append(f"{faster_measured}<{b if faster_measured == a else a}")
    return agree, total, wrong


def _advise_json(args: list[str], log: Path) -> dict[str, Any]:
    """``distbench advise ARGS --json`` as a dict; raises with the tail of stderr on failure."""
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "distbench", "advise", *args, "--json"], capture_output=True,
                          text=True, timeout=600, env=C.child_env(), cwd=C.ROOT)
    log.write_text(proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"distbench advise {' '.join(args)} failed: {proc.stderr[-500:]}")
    return json.loads(proc.stdout)


def advise_agreement(root: Path, dirs: dict[str, dict[str, Path]]) -> list[str]:
    """Per cell whose sweep has ``single``: the strategy ``distbench advise ONE_HOST --target
    CELL`` recommends (predicted fastest to target) against the one ``distbench advise CELL``
    recommends from the measured emulated run; the table's rows and its summary sentence.

    A cell whose advice is ``overlap`` (two leaders within run-to-run noise) agrees "within
    noise" when the prediction names either; ``too_few``/``warmup`` verdicts are shown, not counted.
    """
    rows = ["| model | cell | one host + --target recommends (then) | emulated run: advise's verdict | agrees |",
            "|---|---|---|---|---|"]
    strict = noise = counted = 0
    seconds: list[bool] = []
    for model, runs in dirs.items():
        for cell, run in runs.items():
            if cell == "onehost" or "single" not in measured(run):
                continue
            pred = _advise_json([str(runs["onehost"]), "--target", target_text(cell)],
                                root / f"{model}-{cell}-advise-target.log")
            meas = _advise_json([str(run)], root / f"{model}-{cell}-advise.log")
            ranked = sorted((pred.get("target_predictions") or {}).get("strategies", []),
                            key=lambda p: p.get("rank") or 1e9)
            picks = [p["strategy"] for p in ranked[:2]]
            named = [c["strategy"] for c in meas.get("compared", [])]
            if meas["verdict"] in ("clear", "single"):
                counted += 1
                ok = bool(named) and pred.get("target_recommended") == named[0]
                strict += ok
                if len(named) > 1 and len(picks) > 1:  # the runner-up too: where single leads, the best distributed
                    seconds.append(picks[1] == named[1])
                verdict, agrees = f"recommends {named[0]} (runner-up {', '.join(named[1:]) or '-'})", \
                    "yes" if ok else "no"
            elif meas["verdict"] == "overlap":
                counted += 1
                ok = pred.get("target_recommended") in named
                noise += ok
                verdict, agrees = f"no clear winner: {' and '.join(named)} within noise", \
                    "within noise" if ok else "no"
            else:
                verdict, agrees = f"{meas['verdict']}: {meas['headline']}", "not counted"
            calib = " (calibration)" if (model, cell) in CALIBRATION_CELLS else ""  # of WIRE_FACTOR, not of advise
            rows.append(f"| {model} | {cell}{calib} | {' (then '.join(picks)}{')' if len(picks) > 1 else ''} | "
                        f"{verdict} | {agrees} |")
    if not counted:
        return []
    return ["", "`advise` on the one-host run with `--target` (predicted) against `advise` on the cell's emulated run "
            "(measured), both sweeps with `single`:", "", *rows, "",
            f"Same recommended strategy: {strict + noise} of {counted} cells ({strict} with a clear measured winner, "
            f"{noise} where the emulated run's two leaders were within run-to-run noise and the prediction named one "
            f"of them). Runner-up (where `single` leads: the fastest distributed strategy) the same where advise named "
            f"one: {sum(seconds)} of {len(seconds)} cells."]


def _synchronous(strategy: str) -> bool:
    """Whether ``strategy`` steps in lock-step (allreduce, synchronous EASGD): its registry class says."""
    from distbench.strategies import registry

    return bool(registry.strategy_class(strategy).synchronous)


def lead_agreement(pred: dict[str, dict[str, Any]], meas: dict[str, dict[str, list[float]]]
                   ) -> tuple[bool, str, str] | None:
    """Whether the strategy predicted fastest to target among those the cell measured is the
    one measured fastest (median time to target); ``None`` when none reached it."""
    reached = {n: statistics.median(m["ttt_s"]) for n, m in meas.items() if m["ttt_s"]}
    cands = {n: p["time_to_target_s"] for n, p in pred.items() if n in meas and p.get("time_to_target_s")}
    if not reached or not cands:
        return None
    p, m = min(cands, key=cands.get), min(reached, key=reached.get)
    return p == m, p, m


def fit_wire_factors(root: Path) -> dict[str, dict[str, float]]:
    """Per calibration cell (:data:`CALIBRATION_CELLS`) and strategy, the link factor at
    which ``distbench predict`` from the one-host run gives the cell's measured epoch
    (bisection; the predicted epoch grows with the factor). These are the figures of
    :data:`distbench.costmodel.WIRE_FACTOR`."""
    from distbench import costmodel as CM
    from distbench.results.advice import parse_target

    out: dict[str, dict[str, float]] = {}
    original = CM.wire_factor
    try:
        for model, cell in CALIBRATION_CELLS:
            one, run = root / f"{model}-onehost", root / f"{model}-{cell}"
            if not (run / "results.jsonl").exists():
                continue
            cluster = parse_target(target_text(cell)).cluster()
            for name, m in sorted(measured(run).items()):
                if not m["epoch_s"] or name == "single":
                    continue
                want, lo, hi = statistics.median(m["epoch_s"]), 0.05, 8.0
                for _ in range(40):
                    mid = (lo + hi) / 2
                    CM.wire_factor = lambda _n, _r=0.0, f=mid: f  # type: ignore[assignment]
                    preds, _ = CM.predict_strategies(one, cluster)
                    got = next((p.epoch_s for p in preds if p.strategy == name), None)
                    if got is None:
                        break
                    lo, hi = (mid, hi) if got < want else (lo, mid)
                else:
                    out.setdefault(name, {})[cell] = round((lo + hi) / 2, 2)
    finally:
        CM.wire_factor = original
    return out


def _shapes(dirs: dict[str, dict[str, Path]]) -> str:
    """Epochs and repeats per configuration of each model, as its stored runs were made
    (``--no-run`` may table runs made with other ``--epochs``/``--repeats`` than its own)."""
    out = []
    for model, runs in dirs.items():
        cfg = json.loads((runs["onehost"] / "config.json").read_text())
        out.append(f"{model} model {cfg['training']['epochs']} epochs and {cfg['run']['repeats']} repeat(s) "
                   "per configuration")
    return "; ".join(out)


def table(args: argparse.Namespace, root: Path, dirs: dict[str, dict[str, Path]], wall: float,
          argv: list[str] | None) -> str:
    """The BENCHMARKS.md section: one row per (model, cell, strategy), then the summary."""
    lines = ["## The per-strategy cost model against emulated clusters (predict_validation)", "",
             f"`{C.command_line('predict_validation.py', argv)}` on {C.utc_now()}; {C.machine_info()}; load "
             f"{C.load_average()}; {wall:.0f} s this invocation. digits (1,293 training samples per epoch, "
             "144 validation, 360 test), global batch 120, "
             f"{_shapes(dirs)}, PS window 2. Predicted: "
             "`distbench predict ONE_HOST_RUN --target 'H nodes x 1, RATE, emulated'` from the one-host run and its "
             "calibration only. Measured: the same sweep on an emulated cluster of H hosts (one worker each, "
             "`tc tbf` at RATE). Epoch: steady seconds per epoch (median over repeats); to target: seconds to "
             f"test accuracy {args.target}; ratio = predicted / measured. The term column names the predicted "
             "epoch's largest part (compute, framework, link) where a ratio misses by more than 25%. The cells "
             f"{' and '.join(' '.join(c) for c in CALIBRATION_CELLS)} are where each transport's link factor "
             "(costmodel.WIRE_FACTOR) was fitted (`--fit`): shown, left out of the summary figures below.", "",
             "| model | cell | strategy | measured s/epoch [range] | predicted | ratio | measured to target | "
             "predicted | ratio | largest term |", "|---|---|---|---|---|---|---|---|---|---|"]
    eratios: list[float] = []
    tratios: list[float] = []
    tsync: list[float] = []  # the synchronous strategies' (their epochs to target do not vary between repeats)
    agree = total = 0
    wrongs: list[str] = []
    leads: list[tuple[bool, str, str]] = []
    wrong_leads: list[str] = []
    for model, runs in dirs.items():
        for cell, run in runs.items():
            if cell == "onehost":
                continue
            pred = predicted(runs["onehost"], cell, root / f"{model}-{cell}-predict.log")
            meas = {n: m for n, m in measured(run).items() if n != "single"}  # the advise table uses single
            calib = (model, cell) in CALIBRATION_CELLS
            where = f"{model} | {cell}{' (calibration)' if calib else ''}"
            for name in sorted(meas):
                p, m = pred.get(name), meas[name]
                if not p or not m["epoch_s"] or p.get("epoch_s") is None:
                    lines.append(f"| {where} | `{name}` | {C.spread(m['epoch_s'])} | - | - | - | - | - | "
                                 f"{(p or {}).get('missing', 'no prediction')} |")
                    continue
                me = statistics.median(m["epoch_s"])
                er = p["epoch_s"] / me
                mt = statistics.median(m["ttt_s"]) if m["ttt_s"] else None
                pt = p.get("time_to_target_s")
                tr = pt / mt if (pt and mt) else None
                if not calib:
                    eratios.append(er)
                    if tr:
                        tratios.append(tr)
                        if _synchronous(name):
                            tsync.append(tr)
                terms = p.get("terms_s") or {}
                big = max(terms, key=terms.get) if terms else "-"
                miss = abs(er - 1) > 0.25 or (tr is not None and abs(tr - 1) > 0.25)
                lines.append(f"| {where} | `{name}` | {C.spread(m['epoch_s'])} | {p['epoch_s']:.2f} | "
                             f"{er:.2f} | {f'{mt:.2f}' if mt else '-'} | {f'{pt:.2f}' if pt else '-'} | "
                             f"{f'{tr:.2f}' if tr else '-'} | {big if miss else ''} |")
            leader = lead_agreement(pred, meas)
            if leader is not None and not calib:
                leads.append(leader)
                if not leader[0]:
                    tp, tm = meas[leader[1]]["ttt_s"], meas[leader[2]]["ttt_s"]
                    noise = bool(tp) and not (max(tm) < min(tp))  # their measured ranges overlap
                    wrong_leads.append(f"{model} {cell}: predicted {leader[1]}"
                                       + (f" {C.spread(tp)} s" if tp else " (not reached)")
                                       + f", measured {leader[2]} {C.spread(tm)} s"
                                       + (": within run-to-run noise" if noise else ""))
            a, t, w = pair_agreement({n: p["epoch_s"] for n, p in pred.items() if p.get("epoch_s")},
                                     {n: m["epoch_s"] for n, m in meas.items()})
            if not calib:
                agree, total = agree + a, total + t
                wrongs += [f"{model} {cell}: {x}" for x in w]

    def dev(rs: list[float]) -> str:
        if not rs:
            return "-"
        d = sorted(abs(r - 1) for r in rs)
        return f"median {100 * statistics.median(d):.0f}%, largest {100 * d[-1]:.0f}% over {len(d)} rows"

    lines += ["", f"Epoch time |predicted/measured - 1|: {dev(eratios)}.",
              f"Time to target |predicted/measured - 1|: {dev(tratios)}; of the synchronous strategies: "
              f"{dev(tsync)} (an asynchronous optimizer's epochs to target vary between repeats of one "
              "configuration with the order its commits arrive in; a synchronous one's do not).",
              f"Pairwise ranking agreement (pairs whose measured ranges do not overlap): {agree} of {total}"
              + (f" ({100 * agree / total:.0f}%)" if total else "") + "."
              + (f" Ordered wrongly: {'; '.join(wrongs)}." if wrongs else ""),
              f"Fastest to {args.target} (median over repeats) predicted from the one-host run = measured on the "
              f"emulated cluster: {sum(x[0] for x in leads)} of {len(leads)} cells"
              + (f" (missed: {'; '.join(wrong_leads)})" if wrong_leads else "") + "."]
    lines += advise_agreement(root, dirs)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the grid (resumable) and print, or write to BENCHMARKS.md, the validation table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one small cell (2x1gbit), 2 strategies, 1 repeat, 2 epochs")
    ap.add_argument("--dir", help="where the runs go (resumable) [default: a new temporary directory]")
    ap.add_argument("--models", default=None, help="comma-separated: small, large [default: both; --quick: small]")
    ap.add_argument("--cells", default=None, help=f"comma-separated HOSTSxRATE [default: {','.join(CELLS)}]")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per configuration [default: 2; --quick: 1]")
    ap.add_argument("--epochs", type=int, default=None, help="epochs [default: 6; --quick: 2]")
    ap.add_argument("--target", type=float, default=0.9, help="target test accuracy [default: 0.9]")
    ap.add_argument("--write", help="BENCHMARKS.md to update (section predict_validation)")
    ap.add_argument("--no-run", action="store_true", help="only the table, from the runs already in --dir")
    ap.add_argument("--fit", action="store_true", help="print the link factors fitted on the calibration cells in "
                    "--dir (costmodel.WIRE_FACTOR) and stop")
    args = ap.parse_args(argv)
    args.models = (args.models or ("small" if args.quick else "small,large")).split(",")
    if unknown := [m for m in args.models if m not in MODELS]:
        ap.error(f"--models: {unknown} unknown; expected some of {sorted(MODELS)}")
    args.cells = (args.cells or ("2x1gbit" if args.quick else ",".join(CELLS))).split(",")
    for c in args.cells:
        parse_cell(c)
    args.repeats = args.repeats or (1 if args.quick else 2)
    args.epochs = args.epochs or (2 if args.quick else 6)
    ok, why = netns.available()
    if not ok:
        text = f"## The per-strategy cost model against emulated clusters (predict_validation)\n\nNot run on " \
               f"{C.utc_now()}: {why}.\n"
        print(text)
        if args.write:
            C.write_section(args.write, "predict_validation", text)
        return 0
    root = Path(args.dir) if args.dir else Path(__import__("tempfile").mkdtemp(prefix="distbench-pv-"))
    root.mkdir(parents=True, exist_ok=True)
    if args.fit:
        print(json.dumps(fit_wire_factors(root), indent=1))
        return 0
    t0 = time.perf_counter()
    dirs = collect(args, root) if not args.no_run else {
        m: {c: root / f"{m}-{c}" for c in ["onehost", *args.cells] if (root / f"{m}-{c}" / "results.jsonl").exists()}
        for m in args.models if (root / f"{m}-onehost" / "calibration.json").exists()}
    text = table(args, root, dirs, time.perf_counter() - t0, argv)
    print(text)
    if args.write:
        C.write_section(args.write, "predict_validation", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

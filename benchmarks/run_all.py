"""Run every benchmark script in turn and regenerate BENCHMARKS.md (what ``make bench`` runs).

Each script is started as ``python benchmarks/<script>.py [--quick] --write <file>`` in
its own process and replaces only its own marked section of the file
(``<!-- name:start -->`` ... ``<!-- name:end -->``); this runner then writes the
``header`` section at the top: machine, date, the command, and per script its exit
status and how long it took. A script that fails does not stop the others; its
section keeps its previous figures, the header says it failed (with its output tail),
and the runner exits 1.

The scripts, in order (a missing one is listed as such, e.g. ``allreduce.py`` while it
is being written):

- ``harness_overhead.py``: distbench ``single`` vs a plain Keras ``model.fit`` (goal <= 1.05);
- ``elephas_peer.py``: ``spark_ps:downpour``/``adag`` vs elephas' sync and async models;
- ``ps_throughput.py``: parameter-server round trips vs raw loopback TCP;
- ``allreduce.py``: Horovod allreduce bus bandwidth vs raw loopback TCP;
- ``step_time.py``: samples/s of every strategy vs the compute floor, and the scaling
  model (``distbench predict``) vs the measured 1- and 2-worker runs;
- ``profile_step.py``: one-worker ``horovod``, ``spark_ps:adag``, ``mpi_ps:adag`` vs ``single``
  (goal >= 0.95) and where a step's time goes (op time, dispatch, input, exchange, copies);
- ``parquet_memory.py``: a ~3 GB Parquet training set under six strategies, each
  process's peak resident memory against the data size;
- ``resnet_synthetic.py``: synthetic ResNet-50 images/s per strategy next to a plain
  Horovod synthetic loop;
- ``emulated_links.py``: ring allreduce and a parameter server on an emulated 2-host
  cluster at 100 Mbit/s vs unshaped links, measured slow-down vs ``distbench predict``'s
  (needs root; says so and writes nothing otherwise);
- ``sweep_startup.py``: the default sweep's wall time, training share and phases, with
  a Spark application per ``spark_ps`` configuration and with one shared per sweep;
- ``startup_floor.py``: each strategy's start-up (the record's ``engine_start_s`` and spawn
  to first step) next to the bare floor of its own engine (the same processes, started by
  the same launcher, doing nothing but the engine's start), alternating.

Usage::

    python benchmarks/run_all.py [--quick] [--only a,b] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

HERE = Path(__file__).resolve().parent
SCRIPTS = ["harness_overhead", "elephas_peer", "ps_throughput", "allreduce", "step_time", "profile_step",
           "parquet_memory", "resnet_synthetic", "emulated_links", "sweep_startup", "startup_floor"]
TITLE = "# Benchmarks"
INTRO = ("Table of record for distbench's performance: each section below is written by one script in "
         "`benchmarks/` (`make bench` runs them all through `benchmarks/run_all.py`; each script can be "
         "rerun alone with `--write BENCHMARKS.md`). Every comparison is a ratio measured within one run "
         "of one script, never absolute times from different runs.")


def run_script(name: str, quick: bool, target: Path, timeout_s: float) -> dict:
    """Run ``benchmarks/<name>.py`` with ``--write target`` (and ``--quick``).

    Returns ``{"name", "status" ("ok" | "failed (exit N)" | "timeout" | "missing"),
    "seconds", "command", "tail"}``.
    """
    path = HERE / f"{name}.py"
    shown = os.path.relpath(target, C.ROOT) if target.is_relative_to(C.ROOT) else str(target)
    cmd = ["python", f"benchmarks/{name}.py", *(["--quick"] if quick else []), "--write", shown]
    if not path.exists():
        return {"name": name, "status": "missing", "seconds": 0.0, "command": " ".join(cmd), "tail": "",
                "finished": C.utc_now()}
    t0 = time.time()
    print(f"run_all: {' '.join(cmd)}", file=sys.stderr, flush=True)
    try:
        cp = subprocess.run([sys.executable, *cmd[1:]], cwd=C.ROOT, env=C.child_env(),
                            capture_output=True, text=True, timeout=timeout_s)
        status = "ok" if cp.returncode == 0 else f"failed (exit {cp.returncode})"
        tail = "\n".join((cp.stdout + cp.stderr).splitlines()[-15:]) if cp.returncode else ""
    except subprocess.TimeoutExpired:
        status, tail = f"timeout after {timeout_s:.0f} s", ""
    res = {"name": name, "status": status, "seconds": time.time() - t0, "command": " ".join(cmd), "tail": tail,
           "finished": C.utc_now()}
    print(f"run_all: {name}: {status} in {res['seconds']:.0f} s", file=sys.stderr, flush=True)
    return res


def previous_rows(path: Path) -> dict[str, str]:
    """The script rows of the header table already in ``path`` (``{name: row}``), so that a
    run with ``--only`` keeps the other scripts' rows (they still describe their sections)."""
    if not path.exists():
        return {}
    text = path.read_text()
    head = text.split("<!-- header:start -->", 1)[-1].split("<!-- header:end -->", 1)[0]
    rows = {}
    for line in head.splitlines():
        for name in SCRIPTS:
            if line.startswith(f"| `{name}.py` |"):
                cells = line.strip().strip("|").split("|")
                if len(cells) == 4:  # a header written before the "finished" column existed
                    cells.insert(3, " - ")
                if len(cells) == 5:
                    rows[name] = "|" + "|".join(cells) + "|"
    return rows


def header(results: list[dict], cmd: str, quick: bool, earlier: dict[str, str] | None = None) -> str:
    """The header section: machine, date, command, and each script's status, duration and
    finishing time (rows in ``earlier`` are kept for scripts this run did not start)."""
    lines = [f"- generated: {C.utc_now()} by `{cmd}`" + (" (`--quick`: smoke-test sizes, not figures of record)"
                                                         if quick else ""),
             f"- machine: {C.machine_info()}",
             f"- load average when the scripts finished: {C.load_average()} (other work on the machine "
             "shows up as spread; each script measures its reference in the same run)", "",
             "| script | status | seconds | finished | command |", "|---|---|---|---|---|"]
    mine = {r["name"]: r for r in results}
    for name in SCRIPTS:
        if name in mine:
            r = mine[name]
            lines.append(f"| `{name}.py` | {r['status']} | {r['seconds']:.0f} | {r['finished']} | `{r['command']}` |")
        elif earlier and name in earlier:
            lines.append(earlier[name])
    for r in results:
        if r["tail"]:
            lines += ["", f"`{r['name']}.py` output tail:", "", "```", r["tail"], "```"]
    return "\n".join(lines) + "\n"


def put_header_first(path: Path, markdown: str) -> None:
    """Write the ``header`` section right after the title (creating the file if needed)."""
    start, end = "<!-- header:start -->", "<!-- header:end -->"
    text = path.read_text() if path.exists() else ""
    if start in text and end in text:
        C.write_section(path, "header", markdown)
        return
    body = text.split("\n", 1)[1] if text.startswith(TITLE) else text
    path.write_text(f"{TITLE}\n\n{INTRO}\n\n{start}\n{markdown.rstrip()}\n{end}\n\n{body.lstrip()}")


#: Section order in the file: the header, then the scripts' sections in running order
#: (step_time.py writes two), then any other section as found.
ORDER = ["header", "harness_overhead", "elephas_peer", "ps_throughput", "allreduce", "step_time", "scaling_model",
         "profile_step"]


def reorder_sections(path: Path) -> None:
    """Rewrite ``path`` with its marked sections in :data:`ORDER` (text outside sections,
    other than the title and the intro, is dropped; section contents are untouched)."""
    text = path.read_text()
    blocks = {m.group(1): m.group(0)
              for m in re.finditer(r"<!-- (\w+):start -->.*?<!-- \1:end -->", text, flags=re.S)}
    names = [n for n in ORDER if n in blocks] + [n for n in blocks if n not in ORDER]
    path.write_text(f"{TITLE}\n\n{INTRO}\n\n" + "\n\n".join(blocks[n] for n in names) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run the scripts, then write the header; exit 1 if any script failed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="pass --quick to every script (smoke sizes)")
    ap.add_argument("--only", help=f"comma-separated subset of: {', '.join(SCRIPTS)}")
    ap.add_argument("--write", default=str(C.ROOT / "BENCHMARKS.md"), metavar="PATH",
                    help="the file to regenerate (default: BENCHMARKS.md at the repository root)")
    ap.add_argument("--timeout", type=float, default=3 * 3600, help="seconds allowed per script")
    args = ap.parse_args(argv)
    names = SCRIPTS
    if args.only:
        names = [n.strip().removesuffix(".py") for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in SCRIPTS]
        if unknown:
            ap.error(f"--only: unknown script(s) {', '.join(unknown)}; choose from {', '.join(SCRIPTS)}")
    target = Path(args.write).resolve()
    earlier = previous_rows(target)
    put_header_first(target, "- (running)\n")
    results = [run_script(n, args.quick, target, args.timeout) for n in names]
    put_header_first(target, header(results, C.command_line("run_all.py", argv), args.quick, earlier))
    reorder_sections(target)
    print(f"run_all: wrote {target}", file=sys.stderr)
    return 0 if all(r["status"] in ("ok", "missing") for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())

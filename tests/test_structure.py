"""The floors of docs/architecture.md hold in the code: every import of src/distbench (read
with ast, module-level and inside functions) goes to the importer's floor or below, and no
modules import each other round a circle. The floors are read from architecture.md's Layers
block, so the document and the test cannot drift apart."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of src/distbench (a package is its __init__)."""
    out = {}
    for f in (SRC / "distbench").rglob("*.py"):
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of src/distbench it imports (the longest known prefix of each name)."""
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        package = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                target = next((".".join(parts[:k]) for k in range(len(parts), 0, -1)
                               if ".".join(parts[:k]) in mods), None)
                if target is not None and target != m:
                    edges[m].add(target)
    return edges


def floors() -> list[list[str]]:
    """The Layers block of docs/architecture.md, top floor first: each line's names
    (``distbench.``-prefixed), before its ``|``."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text[text.index("## Layers"):]
    block = block[block.index("```\n") + 4:]
    block = block[:block.index("```")]
    return [["distbench" if n == "distbench" else f"distbench.{n}" for n in line.split("|")[0].split()]
            for line in block.splitlines() if line.strip()]


def floor_of(module: str, levels: list[list[str]]) -> int | None:
    """The floor index (0 = top) of the longest name covering ``module``, or None."""
    best = None
    for i, names in enumerate(levels):
        for n in names:
            if (module == n or module.startswith(n + ".")) and (best is None or len(n) > len(best[1])):
                best = (i, n)
    return None if best is None else best[0]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert cycles(imports(modules())) == []


def test_every_module_has_a_floor_and_nothing_imports_up():
    mods, levels = modules(), floors()
    assert len(levels) >= 10, levels  # the block was found and read
    homeless = sorted(m for m in mods if floor_of(m, levels) is None)
    assert not homeless, f"modules on no floor of docs/architecture.md's Layers block: {homeless}"
    up = sorted(f"{m} (floor {floor_of(m, levels)}) imports {t} (floor {floor_of(t, levels)})"
                for m, targets in imports(mods).items() for t in targets
                if floor_of(t, levels) < floor_of(m, levels))
    assert not up, "imports from a lower floor to a higher one:\n" + "\n".join(up)


def test_the_checks_can_fail():
    # the checkers themselves: a circle and an upward import are seen
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    levels = [["distbench.cli"], ["distbench.results"], ["distbench.results.records"]]
    assert floor_of("distbench.results.records", levels) == 2 and floor_of("distbench.results.stats", levels) == 1
    assert floor_of("distbench.other", levels) is None

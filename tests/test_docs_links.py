"""Every relative link in README.md and docs/ names a file that exists and, with ``#anchor``,
a heading of that file (GitHub's slugs): the README was split into docs/ pages (issue 32)."""

from __future__ import annotations

import re

from tests.conftest import ROOT

LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path) -> set[str]:
    out, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def test_relative_links_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    bad = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                bad.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{page.name}: {target} (no such heading)")
    assert not bad, "\n".join(bad)

"""What a configuration's process leaves behind when it exits with ``os._exit``."""

from __future__ import annotations

import sys
import types

from distbench.procinfo import remove_autograph_sources


def test_the_autograph_sources_of_this_process_are_removed_and_nothing_else(tmp_path, monkeypatch):
    # found this stop: 3,314 __autograph_generated_file*.py in /tmp after a few test runs;
    # AutoGraph deletes them in an atexit hook, which the worker's os._exit skips
    for name in [n for n in sys.modules if n.startswith("__autograph_generated_file")]:
        monkeypatch.delitem(sys.modules, name)  # converted by other tests in this process
    mine, other = tmp_path / "__autograph_generated_fileab12cd.py", tmp_path / "keep.py"
    for p in (mine, other):
        p.write_text("x = 1\n")
    for name, path in (("__autograph_generated_fileab12cd", mine), ("keep", other)):
        module = types.ModuleType(name)
        module.__file__ = str(path)
        monkeypatch.setitem(sys.modules, name, module)
    assert remove_autograph_sources() == 1
    assert not mine.exists() and other.exists()
    assert remove_autograph_sources() == 0  # already gone: no error

"""The house rules of issue 13, checked on the code itself (``scripts/module_graph.py`` reads it
with ``ast``; nothing is imported or executed).

* every internal module is private (``_``-prefixed); the public face is ``cudasplit`` itself,
  ``cudasplit.errors``, ``cudasplit.sinks`` and the ``cudasplit.cli`` entry point;
* no module over 300 lines, no class over 150;
* no import cycle, and every module belongs to a family of the architecture picture;
* the picture in ``docs/architecture.md`` is the one the code draws today.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = {"__init__", "__main__", "errors", "cli", "sinks"}


@pytest.fixture(scope="module")
def graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location("module_graph",
                                                  ROOT / "scripts" / "module_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_internal_modules_are_private(graph: ModuleType) -> None:
    public = [m.name for m in graph.modules()
              if not any(part.startswith("_") for part in m.name.split("."))
              and m.name.split(".")[0] not in PUBLIC]
    nested_public = [m.name for m in graph.modules() if "." in m.name
                     and not m.name.split(".")[-1].startswith("_")]
    assert public == [] and nested_public == []


def test_no_module_over_300_lines(graph: ModuleType) -> None:
    assert [(m.name, m.lines) for m in graph.modules() if m.lines > 300] == []


def test_no_class_over_150_lines(graph: ModuleType) -> None:
    assert [(m.name, m.largest_class) for m in graph.modules()
            if m.largest_class and m.largest_class[1] > 150] == []


def test_no_import_cycles(graph: ModuleType) -> None:
    assert graph.cycles(graph.modules()) == []


def test_every_module_has_a_family_and_a_job(graph: ModuleType) -> None:
    mods = graph.modules()
    assert [m.name for m in mods if graph.family(m.name) is None] == []
    assert [m.name for m in mods if m.job.startswith("(no docstring")] == []


def test_the_picture_is_current() -> None:
    """``docs/architecture.md`` shows what the code imports today (``--write`` redraws it)."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "module_graph.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_cycle_finder_finds_a_cycle(graph: ModuleType) -> None:
    """The check above could pass by finding nothing: show it finds a planted loop."""
    a = graph.Module("_a", 1, "a", frozenset({"_b"}), frozenset(), None)
    b = graph.Module("_b", 1, "b", frozenset({"_c"}), frozenset(), None)
    c = graph.Module("_c", 1, "c", frozenset({"_a"}), frozenset(), None)
    d = graph.Module("_d", 1, "d", frozenset({"_a"}), frozenset(), None)
    assert graph.cycles([a, b, c, d]) == [["_a", "_b", "_c"]]


def test_the_split_run_picture_names_real_modules(graph: ModuleType) -> None:
    """A module renamed or removed would silently drop out of the split run's picture."""
    names = {m.name for m in graph.modules()}
    assert [name for name in graph.SPLIT_RUN if name not in names] == []

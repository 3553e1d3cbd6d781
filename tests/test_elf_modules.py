"""The ELF reader, writer, patcher and RUNPATH planner: split into small modules, one job each,
with every name importable from the module that had it before the split."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cudasplit"
# The modules split out of _elfio, _elfwrite, _patch, _runpath and _elfedit, and those five.
SPLIT = ("_elfio", "_elfconst", "_elfraw", "_elfheaders", "_elfdyn", "_elfwalk",
         "_elfwrite", "_elfwant", "_elfinplace", "_elfroom", "_elfappend", "_elfhdrwrite",
         "_patch", "_patchwant", "_patchverify", "_patchtiers",
         "_runpath", "_runpathpolicy", "_runpathentries", "_runpathnames",
         "_elfedit", "_elfeditvalue")


@pytest.mark.parametrize("name", SPLIT)
def test_module_and_class_sizes(name: str) -> None:
    text = (PACKAGE / f"{name}.py").read_text()
    assert len(text.splitlines()) <= 300
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno is not None
            assert node.end_lineno - node.lineno + 1 <= 150, node.name


@pytest.mark.parametrize("name", SPLIT)
def test_first_docstring_line_says_the_job(name: str) -> None:
    module = importlib.import_module(f"cudasplit.{name}")
    assert module.__doc__ and module.__doc__.splitlines()[0].strip()


@pytest.mark.parametrize(("facade", "parts"), [
    ("_elfio", ("_elfconst", "_elfraw", "_elfheaders", "_elfdyn", "_elfwalk")),
    ("_elfwrite", ("_elfwant", "_elfinplace", "_elfroom", "_elfappend")),
    ("_runpath", ("_runpathpolicy", "_runpathentries", "_runpathnames")),
    ("_elfedit", ("_elfeditvalue",)),
])
def test_facades_re_export_the_same_objects(facade: str, parts: tuple[str, ...]) -> None:
    front = importlib.import_module(f"cudasplit.{facade}")
    modules = [importlib.import_module(f"cudasplit.{p}") for p in (*parts, "errors")]
    for name in front.__all__:
        value = getattr(front, name)
        own = name in _defined_in(facade)
        assert own or any(getattr(m, name, None) is value for m in modules), name


def _defined_in(name: str) -> set[str]:
    """Names a module defines itself (functions, classes, assignments at the top level)."""
    tree = ast.parse((PACKAGE / f"{name}.py").read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_names_used_elsewhere_stay_importable() -> None:
    from cudasplit._elf.patch import SPARE_BYTES, Plan, Want, plan_append, plan_in_place  # noqa: F401
    from cudasplit._elf.patch.patcher import (  # noqa: F401
        PATCHERS,
        PatchResult,
        apply_edit,
        rename_needed,
        set_runpath,
    )
    from cudasplit._elf.patch.patcher import SPARE_BYTES as SPARE
    from cudasplit._elf.plan.runpath import (  # noqa: F401
        DEFAULT_DRIVER_LINK,
        RunpathPlan,
        RunpathPolicy,
        RunpathPolicyError,
        is_driver_name,
        is_glibc_name,
        plan_runpath,
        split_search_path,
    )
    from cudasplit._elf.read import (  # noqa: F401
        DT_NEEDED,
        DT_RUNPATH,
        PT_INTERP,
        DynNames,
        RawElf,
        dyn_names,
        open_raw,
        read_raw,
    )
    assert SPARE == SPARE_BYTES


def test_the_writer_never_imports_the_backends() -> None:
    """``_elfedit``'s backends call the writer; the writer imports only the edit values, so the
    two never import each other (not even lazily)."""
    writer = [p for p in PACKAGE.glob("_*.py") if p.stem.startswith(("_patch", "_elf"))
              and p.stem not in ("_elfedit", "_patchstage", "_elfplan", "_elfjob", "_elfapply")]
    for path in writer:
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "cudasplit._elf.patch.backends" not in imported and "_elfedit" not in imported, path.name

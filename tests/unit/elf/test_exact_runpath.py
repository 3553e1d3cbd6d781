"""A rule's exact search path ("exactly this list, this tag"): planned without resolution and
final at once, written by the ELF writer as the tag asked for, the other tag removed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cudasplit._elf.patch import FailFastBackend
from cudasplit._elf.plan import PlacedElf, PlanContext, RunpathPolicy, plan_elf
from cudasplit._elf.read import read_elf_info
from tests.support.builders import compile_shared, dynamic_entries


def _facts(path: Path, **fields: object) -> PlacedElf:
    info = read_elf_info(path)
    assert info is not None
    return replace(PlacedElf("lib", "lib/libx.so", info), **fields)  # type: ignore[arg-type]


def test_exact_list_is_final_and_resolves_nothing(tmp_path: Path) -> None:
    lib = compile_shared(tmp_path, "libx.so", "int x(void) { return 1; }\n",
                         needed_libs=["libmissing.so.3"], runpath="/opt/old:$ORIGIN/../y")
    early = PlanContext(RunpathPolicy(), {}, {}, complete=False)
    plan = plan_elf(_facts(lib, exact=("$ORIGIN",), tag="RPATH"), early)
    assert plan.final and plan.unresolved == ()  # libmissing is the profile's business
    assert plan.edit.runpath == "$ORIGIN" and plan.edit.tag == "RPATH"
    assert plan.runpath is not None and plan.runpath.dropped == ("/opt/old", "$ORIGIN/../y")


def test_the_writer_turns_runpath_into_rpath_and_adds_one_where_none_was(tmp_path: Path) -> None:
    backend = FailFastBackend("auto")
    had = compile_shared(tmp_path, "libhad.so", "int h(void) { return 1; }\n",
                         runpath="/opt/old")
    bare = compile_shared(tmp_path, "libbare.so", "int b(void) { return 2; }\n")
    context = PlanContext(RunpathPolicy(tag="RUNPATH"), {}, {})
    for lib in (had, bare):
        plan = plan_elf(_facts(lib, exact=("$ORIGIN/../lib", "$ORIGIN"), tag="RPATH"), context)
        backend.apply(str(lib), plan.edit)
        entries = dynamic_entries(lib)
        assert entries.get("RPATH") == ["$ORIGIN/../lib:$ORIGIN"], lib
        assert "RUNPATH" not in entries, lib


def test_a_rule_tag_alone_keeps_the_planned_list(tmp_path: Path) -> None:
    lib = compile_shared(tmp_path, "libx.so", "int x(void) { return 1; }\n")
    plan = plan_elf(_facts(lib, tag="RPATH"), PlanContext(RunpathPolicy(driver_link=None), {}, {}))
    assert plan.edit.tag == "RPATH" and plan.edit.runpath == "$ORIGIN"

"""The report has one writer (``_reportwriter``): stages return values, it assembles them.

Two properties: no other module makes or changes report records (an AST scan), and the
report does not depend on thread timing (early-patch and final-pool workers that finish out
of order give byte-equal JSON with problems in source order).
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

import cudasplit._split.patchstage as patchstage
from cudasplit import (
    Layout,
    MemberRecord,
    OutputRecord,
    Problem,
    Report,
    SplitOptions,
    split_to_dir,
)
from cudasplit._elf.plan import EditResult, ElfEdit
from cudasplit._split.reportwriter import ElfOutcome, MemberFacts, PlaceOutcome, ReportWriter
from cudasplit.errors import PatchError
from tests.support.paths import REPO
from tests.unit.elf.test_plan_agreement import POLICY

PACKAGE = REPO / "cudasplit"
OWNERS = {"_report.py", "reportwriter.py"}
RECORDS = {"MemberRecord", "OutputRecord", "Report"}
# Fields only report records have (``path``, ``output`` ... are common words elsewhere).
RECORD_FIELDS = {name for cls in (MemberRecord, OutputRecord, Report)
                 for name in cls.__dataclass_fields__} - {"path", "source", "package",
                                                          "directory", "size", "kind",
                                                          "schema", "bytes", "files"}
REPORT_LISTS = {"members", "problems", "warnings", "rules_files", "outputs"}
MUTATORS = {"append", "extend", "insert", "sort", "remove", "pop", "clear", "reverse",
            "update", "setdefault", "__setitem__"}


def _receiver_is_self(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _violations(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        where = f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) else "")
            if name in RECORDS:
                found.append(f"{where}: constructs {name}")
            if (isinstance(func, ast.Attribute) and func.attr in MUTATORS
                    and isinstance(func.value, ast.Attribute)
                    and func.value.attr in REPORT_LISTS and not _receiver_is_self(func.value)):
                found.append(f"{where}: {func.value.attr}.{func.attr}()")
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets
                       for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if (isinstance(target, ast.Attribute) and target.attr in RECORD_FIELDS
                    and not _receiver_is_self(target)):
                found.append(f"{where}: sets .{target.attr}")
            if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute)
                    and target.value.attr in REPORT_LISTS
                    and not _receiver_is_self(target.value)):
                found.append(f"{where}: sets {target.value.attr}[...]")
    return found


def test_only_the_writer_makes_or_changes_report_records() -> None:
    modules = [p for p in sorted(PACKAGE.rglob("*.py")) if p.name not in OWNERS]
    assert len(modules) > 40
    found = [v for path in modules for v in _violations(path)]
    assert found == []


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The scan itself: each kind of change it forbids is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("r = MemberRecord('a', 'file', None, None, 'x')\n"
                   "r.runpath_after = 'x'\nr.note, r.rule = 'n', 'r'\n"
                   "report.problems.append(p)\nreport.outputs['out'] = o\n"
                   "self.problems.append(p)\n")
    original = PACKAGE
    try:
        globals()["PACKAGE"] = tmp_path
        assert len(_violations(bad)) == 6
    finally:
        globals()["PACKAGE"] = original


def test_assemble_orders_problems_by_member_and_makes_fresh_records() -> None:
    writer = ReportWriter("demo.tar.xz", dry_run=True)
    writer.start({"name": "demo"}, ["rules.toml"], Layout((("out", "/o"), ("lib", "/l"))))
    first = writer.member(MemberFacts("lib/a", "elf-shared", "lib", "lib/a", "r"))
    writer.member(MemberFacts("lib/b", "symlink", None, "lib/b", "r", link="a"))
    writer.warn("package-root-missing", None, "no member")
    writer.problem("dangling-symlink", "lib/b", "second member")
    writer.placed(PlaceOutcome("lib", 10, problems=(Problem("patch-failed", "lib/a", "1st"),)))
    writer.elf([(first, ElfOutcome(patch="planned", runpath_after="$ORIGIN"))])
    writer.revise([(1, MemberFacts("lib/b", "symlink", "lib", "lib/b", "follow", link="a"))])
    writer.declare("out")
    report = writer.assemble()
    assert [p.path for p in report.problems] == ["lib/a", "lib/b"]
    assert report.member("lib/a").runpath_after == "$ORIGIN"
    assert report.member("lib/b").output == "lib"
    assert {n: (r.files, r.bytes) for n, r in report.outputs.items()} == {
        "lib": (1, 10), "out": (0, 0)}
    report.members[0].note = "changed by a caller"
    report.problems.clear()
    again = writer.assemble()
    assert again.member("lib/a").note is None and len(again.problems) == 2


class _SlowRefusal:
    """A backend that refuses every edit; the earlier a call, the longer it takes, so pool
    workers finish in the reverse of their start order."""

    name = "slow-refusal"
    delay = 0.0
    calls = 0

    def __init__(self, patcher: str = "auto") -> None:
        pass

    def apply(self, path: str, edit: ElfEdit) -> EditResult:
        _SlowRefusal.calls += 1
        time.sleep(self.delay / _SlowRefusal.calls)
        raise PatchError(f"{Path(path).name}: refused for the test")


@pytest.mark.parametrize("jobs", [1, 4])
def test_problems_in_source_order_whatever_the_workers_timing(
        redist_tarballs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        jobs: int) -> None:
    monkeypatch.setattr(patchstage, "FailFastBackend", _SlowRefusal)
    options = SplitOptions(runpath=POLICY, jobs=jobs)
    quick = split_to_dir(redist_tarballs["xz"], tmp_path / "quick", options)
    monkeypatch.setattr(_SlowRefusal, "delay", 0.05)
    real_early = patchstage.PatchStage._patch_early
    calls = iter(range(1000))

    def late_first(self: patchstage.PatchStage, job: patchstage.ElfJob,
                   own: frozenset[str]) -> patchstage.Patched | None:
        if next(calls) == 0:
            time.sleep(0.2)   # the first early patch finishes last
        return real_early(self, job, own)
    monkeypatch.setattr(patchstage.PatchStage, "_patch_early", late_first)
    slow = split_to_dir(redist_tarballs["xz"], tmp_path / "slow", options)
    failed = [p.path for p in slow.problems if p.code == "patch-failed"]
    assert len(failed) > 2
    order = {m.path: i for i, m in enumerate(slow.members)}
    assert failed == sorted(failed, key=order.__getitem__)
    strip = str(tmp_path / "slow"), str(tmp_path / "quick")
    assert slow.to_json().replace(*strip) == quick.to_json()

"""The one writer of the report: the values stages hand it, and the report it assembles.

Every :class:`~cudasplit._report.Report`, :class:`~cudasplit._report.MemberRecord` and
:class:`~cudasplit._report.OutputRecord` of a split is made here, from the frozen values the
stages return (defined below), on the split loop's thread. Worker threads return
their results to that thread; nothing else holds a record it could change. :meth:`assemble`
builds a fresh report in source order whenever one is asked for (the end-of-run checks, an
error that carries the report, the run's result).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cudasplit._elf.read import GpuCode, VersionNeed
from cudasplit._layout import Layout
from cudasplit._report import CopyRecord, MemberRecord, OutputRecord, Problem, Report

__all__ = ["GpuCodeOutcome", "ReportWriter", "record_of"]



@dataclass(slots=True)
class _Tally:
    """Files and bytes of one output so far (private: the writer's own counter)."""

    directory: str
    files: int = 0
    bytes: int = 0


class ReportWriter:
    """Collects the stages' values for one split; :meth:`assemble` makes the report."""

    def __init__(self, source: str, *, dry_run: bool) -> None:
        self._source, self._dry_run = source, dry_run
        self._package: dict[str, str | None] = {}
        self._rules_files: tuple[str, ...] = ()
        self._layout = Layout(())
        self._facts: list[MemberFacts] = []
        self._elf: dict[int, ElfOutcome] = {}
        self._inside: dict[int, tuple[list[dict[str, Any]], list[dict[str, str | None]]]] = {}
        self._outputs: dict[str, _Tally] = {}
        self._problems: list[Problem] = []
        self._warnings: list[Problem] = []
        self._copies: list[CopyRecord] = []

    def start(self, package: dict[str, str | None], rules_files: Sequence[str],
              layout: Layout) -> None:
        """The identity, rule files and layout, fixed before the first member."""
        self._package, self._rules_files = dict(package), tuple(rules_files)
        self._layout = layout

    # -- members ------------------------------------------------------------------------------

    def member(self, facts: MemberFacts) -> int:
        """A classified member; its position in source order (how later values name it)."""
        self._facts.append(facts)
        return len(self._facts) - 1

    def revise(self, revised: Iterable[tuple[int, MemberFacts]]) -> None:
        """The link planner's facts for link members, replacing classification's."""
        for position, facts in revised:
            self._facts[position] = facts

    def elf(self, outcomes: Iterable[tuple[int, ElfOutcome]]) -> None:
        for position, outcome in outcomes:
            self._elf[position] = outcome

    def inside(self, outcomes: Iterable[tuple[int, GpuCodeOutcome]]) -> None:
        """What members carry (GPU code, version floors), by position."""
        for position, outcome in outcomes:
            if outcome.gpu or outcome.floors:
                self._inside[position] = (
                    [code.as_dict() for code in outcome.gpu],
                    [{"prefix": n.prefix, "version": n.version, "library": n.library,
                      "symbol": n.symbol} for n in outcome.floors])

    def placed(self, done: PlaceOutcome) -> None:
        """A file placed: counted in its output, with what its rewrites and patch stage said."""
        if done.superseded is not None:
            self.elf((done.superseded,))
        self._warnings.extend(done.warnings)
        self._problems.extend(done.problems)
        self.count(done.output, done.size)

    # -- outputs ------------------------------------------------------------------------------

    def count(self, output: str, size: int) -> None:
        tally = self._tally(output)
        tally.files += 1
        tally.bytes += size

    def declare(self, output: str) -> None:
        """An output that exists even if it receives nothing (declared, or made by the sink)."""
        self._tally(output)

    def _tally(self, output: str) -> _Tally:
        tally = self._outputs.get(output)
        if tally is None:
            tally = self._outputs[output] = _Tally(self._layout.root(output))
        return tally

    # -- problems and warnings ----------------------------------------------------------------

    def problem(self, code: str, path: str | None, message: str) -> None:
        self._problems.append(Problem(code, path, message))

    def warn(self, code: str, path: str | None, message: str) -> None:
        self._warnings.append(Problem(code, path, message))

    def problems(self, problems: Iterable[Problem]) -> None:
        self._problems.extend(problems)

    def warnings(self, warnings: Iterable[Problem]) -> None:
        self._warnings.extend(warnings)

    def copied(self, records: Iterable[CopyRecord]) -> None:
        """Files ``copy_packages`` brought in from another package's root."""
        self._copies.extend(records)

    def public_messages(self, public_text: Callable[[str], str]) -> None:
        """Problem texts rewritten to name final paths (the sink's staging dir goes away)."""
        self._problems = [_retext(p, public_text) for p in self._problems]
        self._warnings = [_retext(p, public_text) for p in self._warnings]

    # -- the report ---------------------------------------------------------------------------

    def assemble(self) -> Report:
        """A fresh report: members in source order, problems and warnings in the order of the
        members they name (stages report at different times), those naming none after."""
        members = [_with_inside(record_of(facts, self._elf.get(i)), self._inside.get(i))
                   for i, facts in enumerate(self._facts)]
        index = {record.path: i for i, record in enumerate(members)}

        def order(issue: Problem) -> int:
            return index.get(issue.path or "", len(index))
        return Report(
            source=self._source, package=dict(self._package),
            outputs={name: OutputRecord(t.directory, t.files, t.bytes)
                     for name, t in self._outputs.items()},
            members=members,
            problems=[_copy(p) for p in sorted(self._problems, key=order)],
            warnings=[_copy(p) for p in sorted(self._warnings, key=order)],
            dry_run=self._dry_run, rules_files=list(self._rules_files),
            copies=[replace(c) for c in self._copies])


def record_of(facts: MemberFacts, elf: ElfOutcome | None = None) -> MemberRecord:
    """The report record of one member (a new object every time)."""
    record = MemberRecord(facts.path, facts.kind, facts.output, facts.dest, facts.rule,
                          facts.size, facts.link, facts.note)
    if elf is None:
        return record
    record.note = elf.note if elf.note is not None else facts.note
    record.patch = elf.patch
    record.runpath_before, record.runpath_after = elf.runpath_before, elf.runpath_after
    record.runpath_tag = elf.runpath_tag
    record.needed_unresolved = (None if elf.needed_unresolved is None
                                else list(elf.needed_unresolved))
    record.interpreter_before, record.interpreter_after = (elf.interpreter_before,
                                                           elf.interpreter_after)
    record.dlopen = (None if elf.dlopen is None
                     else [{"name": name, "package": package} for name, package in elf.dlopen])
    return record


def _with_inside(record: MemberRecord, inside: tuple[list[dict[str, Any]],
                 list[dict[str, str | None]]] | None) -> MemberRecord:
    if inside is not None:
        gpu, glibc = inside
        record.gpu = [dict(row) for row in gpu] or None
        record.glibc = [dict(row) for row in glibc] or None
    return record


def _copy(problem: Problem) -> Problem:
    # The report's problems are its own: a caller editing them changes nothing here.
    return Problem(problem.code, problem.path, problem.message)


def _retext(problem: Problem, public_text: Callable[[str], str]) -> Problem:
    return Problem(problem.code, problem.path, public_text(problem.message))

@dataclass(frozen=True, slots=True)
class MemberFacts:
    """What classification (and, for links, the link planner) says about one member."""

    path: str                 # inside the archive, top directory stripped
    kind: str
    output: str | None        # None: dropped or not placed
    dest: str | None
    rule: str
    size: int = 0
    link: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class ElfOutcome:
    """What the patch stage found, planned and did for one ELF member."""

    patch: str | None = None
    runpath_before: str | None = None
    runpath_after: str | None = None
    runpath_tag: str | None = None
    needed_unresolved: tuple[str, ...] | None = None
    interpreter_before: str | None = None
    interpreter_after: str | None = None
    dlopen: tuple[tuple[str, str | None], ...] | None = None  # (name, providing package)
    note: str | None = None   # replaces the member's note when set


@dataclass(frozen=True, slots=True)
class GpuCodeOutcome:
    """What the inside stage read from one member (empty tuples: nothing of the kind)."""

    gpu: tuple[GpuCode, ...] = ()
    floors: tuple[VersionNeed, ...] = ()


@dataclass(frozen=True, slots=True)
class PlaceOutcome:
    """What placing one file did: the output counted, an earlier copy it replaced (no longer
    patched), and the rewrites' warnings and problems."""

    output: str
    size: int
    superseded: tuple[int, ElfOutcome] | None = None   # (earlier member's position, outcome)
    warnings: tuple[Problem, ...] = ()
    problems: tuple[Problem, ...] = ()

"""One ELF member on its way through the patch stage, what workers return, and its outcome.

An :class:`ElfJob` is frozen: it says which file to read and plan. Workers (the early-patch
thread, the final pool) return what they read and did as a :class:`Patched` value through
their future; the calling thread keeps those values and turns each job's last one into an
:class:`~cudasplit._split.reportwriter.ElfOutcome` for the report writer (:func:`elf_outcome`), in
source order. No worker writes to anything another thread reads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from cudasplit._elf.patch import EditResult
from cudasplit._elf.plan import ElfPlan
from cudasplit._elf.read import DlopenTarget, ElfInfo, read_elf_info, scan_dlopen
from cudasplit._report import Problem
from cudasplit._rulebook import Rule
from cudasplit._split.reportwriter import ElfOutcome
from cudasplit.errors import ElfError

__all__ = ["ElfJob", "ElfRead", "Patched", "elf_outcome", "read_elf", "scan_quietly"]


@dataclass(frozen=True, slots=True)
class ElfRead:
    """The facts read from one file: header facts and names it may dlopen, or why not."""

    info: ElfInfo | None = None
    dlopen: tuple[DlopenTarget, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ElfJob:
    position: int       # the member's place in source order (how the report writer names it)
    path: str           # its archive path
    output: str
    dest: str
    local: Path | None  # None in a dry run: then ``read`` came from a spooled copy
    rule: Rule | None
    read: ElfRead | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.output, self.dest


@dataclass(frozen=True, slots=True)
class Patched:
    """What a worker returns for one job: what it read, the plan it applied (if any), how."""

    read: ElfRead
    plan: ElfPlan | None = None
    result: EditResult | None = None
    error: str | None = None

    @property
    def applied(self) -> bool:
        """The plan was applied without an error (an early patch that needs no redoing)."""
        return self.plan is not None and self.error is None


def read_elf(path: Path, *, dlopen: tuple[DlopenTarget, ...] | None = None) -> ElfRead:
    """Facts of a written file; an unreadable one says why in ``error``. ``dlopen``: its
    dlopen names, found already (by the reading process); else scanned here."""
    try:
        info = read_elf_info(path)
    except ElfError as exc:
        return ElfRead(error=str(exc))
    if dlopen is None:
        dlopen = scan_quietly(path, info) if info is not None else ()
    return ElfRead(info, dlopen)


def scan_quietly(path: str | Path, info: ElfInfo) -> tuple[DlopenTarget, ...]:
    # The scan is a report, never a reason not to patch: section headers the loader ignores
    # may be damaged in a file that loads fine.
    try:
        return scan_dlopen(path, info)
    except ElfError:
        return ()


def elf_outcome(path: str, done: Patched, *, writing: bool) -> tuple[ElfOutcome, Problem | None]:
    """The report's view of one job (before, plan, method); the problem to report, if any."""
    before, plan = _before(done.read), done.plan
    if done.error is not None:
        return replace(before, patch="skipped"), Problem("patch-failed", path, done.error)
    if plan is None or plan.skip is not None:
        skip = plan.skip if plan is not None else None
        off = skip if skip and skip.startswith("patching turned off") else None
        return replace(before, patch="skipped", note=off), None
    return _planned(before, plan, done.result, writing), None


def _before(read: ElfRead) -> ElfOutcome:
    info = read.info
    if info is None:
        return ElfOutcome()
    return ElfOutcome(
        runpath_before=info.runpath if info.runpath is not None else info.rpath,
        runpath_tag=("RUNPATH" if info.runpath is not None
                     else "RPATH" if info.rpath is not None else None),
        interpreter_before=info.interp, interpreter_after=info.interp,
        dlopen=tuple((t.name, t.package) for t in read.dlopen))


def _planned(before: ElfOutcome, plan: ElfPlan, result: EditResult | None,
             writing: bool) -> ElfOutcome:
    edit, note = plan.edit, None
    if edit.replace_needed:
        verb = "renamed" if writing else "would be renamed"
        note = f"DT_NEEDED {verb}: " + ", ".join(
            f"{old} -> {new}" for old, new in edit.replace_needed)
    if edit.add_needed:
        verb = "added" if writing else "would be added"
        added = f"DT_NEEDED {verb}: " + ", ".join(edit.add_needed)
        note = f"{note}; {added}" if note else added
    return replace(
        before, runpath_after=edit.runpath, runpath_tag=edit.tag,
        interpreter_after=(edit.interpreter if edit.interpreter is not None
                           else before.interpreter_after),
        # Names --ignore-missing (or a foreign arch) accepts are not listed: they fail nothing.
        needed_unresolved=tuple(plan.unresolved), note=note,
        patch=result.method if result is not None else "planned")

"""One ELF member on its way through the patch stage, and how its outcome is reported.

An :class:`ElfJob` is written by exactly one thread at a time (the early worker until
``wait_early`` returns, then the final pool, then the calling thread that records it), so no
lock is needed. :func:`record_outcome` fills the member's report record from the job and its
plan, on the calling thread, in source order.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from ._dlopen import DlopenTarget, scan_dlopen
from ._elf import ElfInfo, read_elf_info
from ._elfedit import EditResult
from ._elfplan import ElfPlan
from ._report import MemberRecord, Problem
from ._rules import Rule
from .errors import ElfError

__all__ = ["ElfJob", "read_job", "record_outcome", "scan_quietly"]


@dataclass(slots=True)
class ElfJob:
    record: MemberRecord
    output: str
    dest: str
    local: Path | None  # None in a dry run: then ``info`` was read from a spooled copy
    rule: Rule | None
    info: ElfInfo | None = None
    # Set by the early worker (only it touches these until wait_early returns):
    done: bool = False                   # the early plan was applied
    early: ElfPlan | None = None
    result: EditResult | None = None
    error: str | None = None
    own: frozenset[str] = frozenset()    # names beside the file when it was added
    dlopen: tuple[DlopenTarget, ...] = ()
    future: Future[None] | None = field(default=None, repr=False)

    @property
    def key(self) -> tuple[str, str]:
        return self.output, self.dest



def read_job(job: ElfJob) -> None:
    """Facts of a written file: the ELF header facts and the names it may dlopen."""
    assert job.local is not None
    job.info = read_elf_info(job.local)
    if job.info is not None:
        job.dlopen = scan_quietly(job.local, job.info)


def scan_quietly(path: str | Path, info: ElfInfo) -> tuple[DlopenTarget, ...]:
    # The scan is a report, never a reason not to patch: section headers the loader ignores
    # may be damaged in a file that loads fine.
    try:
        return scan_dlopen(path, info)
    except ElfError:
        return ()


def record_outcome(job: ElfJob, plan: ElfPlan | None, *, writing: bool) -> Problem | None:
    """Fill ``job.record`` (before, plan, method); the problem to report, if any."""
    record, info = job.record, job.info
    if info is not None:
        record.runpath_before = info.runpath if info.runpath is not None else info.rpath
        record.runpath_tag = ("RUNPATH" if info.runpath is not None
                              else "RPATH" if info.rpath is not None else None)
        record.interpreter_before = record.interpreter_after = info.interp
        record.dlopen = [{"name": t.name, "package": t.package} for t in job.dlopen]
    if job.error is not None:
        record.patch = "skipped"
        return Problem("patch-failed", record.path, job.error)
    if plan is None or plan.skip is not None:
        record.patch = "skipped" if plan is not None else record.patch or "skipped"
        if plan is not None and plan.skip and plan.skip.startswith("patching turned off"):
            record.note = plan.skip
        return None
    _record_plan(job, plan, writing)
    return None


def _record_plan(job: ElfJob, plan: ElfPlan, writing: bool) -> None:
    record, edit = job.record, plan.edit
    record.runpath_after, record.runpath_tag = edit.runpath, edit.tag
    if edit.interpreter is not None:
        record.interpreter_after = edit.interpreter
    # Names --ignore-missing (or a foreign arch) accepts are not listed: they fail nothing.
    record.needed_unresolved = list(plan.unresolved)
    if edit.replace_needed:
        verb = "renamed" if writing else "would be renamed"
        record.note = f"DT_NEEDED {verb}: " + ", ".join(
            f"{old} -> {new}" for old, new in edit.replace_needed)
    if edit.add_needed:
        verb = "added" if writing else "would be added"
        added = f"DT_NEEDED {verb}: " + ", ".join(edit.add_needed)
        record.note = f"{record.note}; {added}" if record.note else added
    record.patch = job.result.method if job.result is not None else "planned"

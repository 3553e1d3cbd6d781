"""The plan -> patch stage: one :class:`~cudasplit._elf.plan.planner.ElfPlan` per ELF member,
applied once.

The split loop hands each written ELF file to :meth:`PatchStage.add`. A worker thread reads it
and asks the planner (:func:`~cudasplit._elf.plan.planner.plan_elf`) with what is known so far;
when the plan says it is final the edit is applied at once, while later members are still being
decoded. Everything else is planned once the archive has ended (:meth:`PatchStage.finish`);
there the complete plan of every file is made again and an early edit that differs (which
cannot happen while the planner is right about finality) is re-applied, so the reported plan is
always the complete one. Without a sink (dry run) the plans are only reported
(``patch: planned``), from the same planner.

Jobs are keyed by their final ``(output, dest)``: a later member with the same destination (a
duplicate path, or ``lib64/x`` merged onto ``lib/x``) first waits for the early patch of the
earlier copy and drops its job (:meth:`PatchStage.supersede`), so no worker ever edits a file
that is being rewritten. Workers get frozen jobs and the names beside the file as a frozen
snapshot, and return :class:`~cudasplit._split.elfjob.Patched` values; the calling thread collects
them and returns the report's values (:class:`PatchOutcome`) in source order.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from cudasplit._elf.patch import ElfBackend, FailFastBackend, restore_original
from cudasplit._elf.plan import ElfPlan, PlacedElf, PlanContext, plan_elf
from cudasplit._elf.read import ElfInfo, read_elf_info
from cudasplit._report import Problem
from cudasplit._rulebook import PackageSettings
from cudasplit._source import member_parent
from cudasplit._split.elfcontext import PatchSettings, final_context, known_layout, static_context
from cudasplit._split.elfjob import ElfJob, ElfRead, Patched, elf_outcome, read_elf, scan_quietly
from cudasplit._split.gpucode import BackgroundReads
from cudasplit._split.reportwriter import ElfOutcome
from cudasplit.errors import ElfError, PatchError

__all__ = ["ElfJob", "PatchOutcome", "PatchSettings", "PatchStage"]

_REPLACED = ElfOutcome(patch="skipped", note="replaced by a later member with the same destination")


@dataclass(frozen=True, slots=True)
class PatchOutcome:
    """What :meth:`PatchStage.finish` found, for the report writer and the end of the run."""

    outcomes: tuple[tuple[int, ElfOutcome], ...] = ()   # (member position, outcome)
    problems: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()
    unresolved: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (path, names) nowhere found
    fail_unresolved: bool = False    # the policy (or --strict) fails the run on those
    fail_unpatched: bool = False     # a patch-failed file fails the run (--nix, --strict)


class PatchStage:
    """Collects ELF jobs, patches early where the plan is final, plans and patches the rest."""

    def __init__(self, settings: PatchSettings, package: PackageSettings,
                 final_root: Callable[[str], str], has_stubs_output: bool,
                 early_pool: ThreadPoolExecutor | None,
                 backend: ElfBackend | None = None,
                 background: BackgroundReads | None = None) -> None:
        self.settings = settings
        self.jobs: list[ElfJob] = []
        # Frozen here, before any ELF member is planned: every plan sees the same roots.
        self.layout = known_layout(final_root)
        self._pool = early_pool if settings.enabled and settings.writing else None
        self._by_key: dict[tuple[str, str], ElfJob] = {}
        self._futures: dict[int, Future[Patched | None]] = {}   # position -> early patch
        self._early: dict[int, Patched] = {}                    # early patches applied
        self._spooled: dict[str, ElfRead] = {}                  # dry run: path -> facts
        self._backend = backend or FailFastBackend(settings.patcher)
        # Large files are read (dlopen names) by the reading process: a file is patched only
        # once that read is done, so no read sees half an edit.
        self._background = background
        self._static, self.warnings = static_context(settings, package, self.layout,
                                                     has_stubs_output)

    # -- during the stream --------------------------------------------------------------------

    def add(self, job: ElfJob, own: frozenset[str] = frozenset()) -> None:
        """``own``: the names placed beside the file so far (a snapshot the worker keeps)."""
        spooled = self._spooled.pop(job.path, None)
        if spooled is not None:
            job = replace(job, read=spooled)
        self.jobs.append(job)
        self._by_key[job.key] = job
        if self._pool is not None and job.local is not None:
            self._futures[job.position] = self._pool.submit(self._patch_early, job, own)

    def supersede(self, output: str, dest: str) -> tuple[int, ElfOutcome] | None:
        """A later member is about to be written to ``(output, dest)``: let the early patch
        of the earlier copy finish first, then forget that copy (tar: the later one wins)."""
        job = self._by_key.pop((output, dest), None)
        if job is None:
            return None
        future = self._futures.pop(job.position, None)
        if future is not None:
            future.result()
        self.jobs.remove(job)
        return job.position, _REPLACED

    def spool_info(self, path: str, stream: BinaryIO, shown: str | None = None) -> ElfInfo | None:
        """Dry run: the dynamic section may sit anywhere in a 1 GB library, so the member is
        copied to a temporary file just long enough to read it (disk use: one member).
        ``shown``: the file's final path, named instead of the spool in error messages."""
        with tempfile.NamedTemporaryFile(prefix="cudasplit-elf-") as spool:
            shutil.copyfileobj(stream, spool, 1 << 20)
            spool.flush()
            return self.read_spool(path, spool.name, shown)

    def read_spool(self, path: str, spool: str, shown: str | None = None) -> ElfInfo | None:
        """Dry run: the facts of member ``path`` from its spooled copy ``spool`` (which the
        caller made, and removes)."""
        try:
            info = read_elf_info(spool)
        except ElfError as exc:
            # The real run cannot patch it either: report what that run reports (a
            # patch-failed problem), naming the final path rather than the spool.
            self._spooled[path] = ElfRead(error=str(exc).replace(spool, shown or path))
            return None
        dlopen = scan_quietly(spool, info) if info is not None else ()
        self._spooled[path] = ElfRead(info, dlopen)
        return info

    def wait_early(self) -> None:
        """Collect the early patches' results (on the calling thread, in job order). The
        stream has ended: jobs added from now on (hard-linked copies) wait for the final pass."""
        self._pool = None
        for position, future in list(self._futures.items()):
            done = future.result()
            if done is not None:
                self._early[position] = done
        self._futures.clear()

    def original_into(self, output: str, dest: str, copy: Path) -> bool:
        """``copy`` is a byte copy of the file placed at ``(output, dest)``, taken once the
        stream ended (a hard link into another output): when that file was already patched,
        give the copy the bytes it had before (the edit's undo log). False where that cannot
        be done (rewritten whole by LIEF): the copy then keeps the patched bytes."""
        job = self._by_key.get((output, dest))
        done = None if job is None else self._early.get(job.position)
        if done is None or not done.applied or done.result is None \
                or done.result.method in ("unchanged", "planned"):
            return True
        if done.result.undo is None:
            return False
        restore_original(copy, done.result.undo)
        return True

    def patched_early(self, job: ElfJob) -> bool:
        """Whether ``job``'s file was patched while the stream was running."""
        done = self._early.get(job.position)
        return done is not None and done.applied

    def _patch_early(self, job: ElfJob, own: frozenset[str]) -> Patched | None:
        """Worker thread: apply the plan if it is already final (see the module docstring)."""
        if (job.rule is not None and job.rule.patch is False) or job.local is None:
            return None
        read = self._read(job, job.local)
        if read.error is not None:
            return None  # reported by the final pass
        plan = plan_elf(_facts(job, read), replace(
            self._static, names={(job.output, member_parent(job.dest)): own}, complete=False))
        if plan.skip is None and plan.final:
            return self._apply(job, read, plan)
        return Patched(read)

    # -- after the stream ---------------------------------------------------------------------

    def finish(self, placed: Iterable[tuple[str, str]]) -> PatchOutcome:
        """Plan (and patch) every job; ``placed``: every (output, dest) placed."""
        if not self.jobs:
            return PatchOutcome()
        if not self.settings.enabled:
            return _read_only(self.jobs, self._read, writing=self.settings.writing)
        context = final_context(self._static, self.layout, placed)
        if self.settings.writing:
            with ThreadPoolExecutor(max_workers=self.settings.jobs) as pool:
                done = list(pool.map(lambda job: self._complete(job, context), self.jobs))
        else:
            done = [self._planned(job, context) for job in self.jobs]
        outcomes, problems = [], []
        for job, patched in zip(self.jobs, done, strict=True):
            outcome, problem = elf_outcome(job.path, patched, writing=self.settings.writing)
            outcomes.append((job.position, outcome))
            problems += [problem] if problem is not None else []
        missing, fail = _unresolved(self.jobs, done, self.settings)
        unpatched = self.settings.policy.fail_unpatched or self.settings.strict
        cost = getattr(self._backend, "fallback_summary", lambda: None)()
        notes = (Problem("lief-fallback", "", cost),) if cost else ()
        return PatchOutcome(tuple(outcomes), tuple(problems), notes, missing, fail, unpatched)

    def _planned(self, job: ElfJob, ctx: PlanContext) -> Patched:
        """Dry run: the complete plan of a spooled file, reported but not applied."""
        read = job.read or ElfRead()
        return Patched(read, plan_elf(_facts(job, read), ctx), error=read.error)

    def _complete(self, job: ElfJob, ctx: PlanContext) -> Patched:
        """Worker thread: the complete plan of one file, applied unless already applied."""
        early = self._early.get(job.position)
        read = early.read if early is not None else job.read
        if read is None and job.local is not None:
            read = self._read(job, job.local)
            if read.error is not None:
                return Patched(read, error=read.error)
        read = read or ElfRead()
        plan = plan_elf(_facts(job, read), ctx)
        if early is not None and early.applied and early.plan is not None \
                and early.plan.edit == plan.edit:
            return replace(early, plan=plan)
        if plan.skip is None:
            return self._apply(job, read, plan)
        return Patched(read, plan, *((early.result, early.error) if early else (None, None)))

    def _read(self, job: ElfJob, local: Path) -> ElfRead:
        """The facts of a written file: its header facts read here, its dlopen names from
        the reading process where it read the file (waiting for it: the edit comes after)."""
        found = None if self._background is None else self._background.result(job.position)
        if found is None or found.error is not None:
            return read_elf(local)
        return read_elf(local, dlopen=found.dlopen)

    def _apply(self, job: ElfJob, read: ElfRead, plan: ElfPlan) -> Patched:
        assert job.local is not None
        try:
            return Patched(read, plan, self._backend.apply(str(job.local), plan.edit))
        except (ElfError, PatchError) as exc:
            return Patched(read, plan, error=str(exc))


def _unresolved(jobs: list[ElfJob], done: list[Patched], settings: PatchSettings
                ) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], bool]:
    """The names each file needs that resolve nowhere, and whether they fail the run."""
    missing = tuple((job.path, tuple(p.plan.unresolved))
                    for job, p in zip(jobs, done, strict=True)
                    if p.plan is not None and p.plan.unresolved)
    return missing, settings.policy.fail_unresolved or settings.strict


def _read_only(jobs: list[ElfJob], read_of: Callable[[ElfJob, Path], ElfRead], *,
               writing: bool) -> PatchOutcome:
    """``--no-patch``: each file's facts are reported, nothing is planned."""
    outcomes, warnings = [], []
    for job in jobs:
        read = read_of(job, job.local) if job.local is not None else ElfRead()
        if read.error is not None:
            warnings.append(Problem("elf-unreadable", job.path, read.error))
            read = ElfRead()
        outcomes.append((job.position, elf_outcome(job.path, Patched(read), writing=writing)[0]))
    return PatchOutcome(tuple(outcomes), (), tuple(warnings))


def _facts(job: ElfJob, read: ElfRead) -> PlacedElf:
    rule = job.rule
    off = str(rule.ref) if rule is not None and rule.patch is False else None
    return PlacedElf(job.output, job.dest, read.info,
                    rule.runpath_append if rule is not None else (),
                    bool(rule is not None and rule.keep_runpath), off,
                    rule.runpath if rule is not None else None,
                    rule.runpath_tag if rule is not None else None)

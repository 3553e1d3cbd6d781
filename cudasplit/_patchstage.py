"""The plan -> patch stage: one :class:`~cudasplit._elfplan.ElfPlan` per ELF member, applied once.

The split loop hands each written ELF file to :meth:`PatchStage.add`. A worker thread reads it
and asks the planner (:func:`~cudasplit._elfplan.plan_elf`) with what is known so far; when the
plan says it is final the edit is applied at once, while later members are still being
decoded. Everything else is planned once the archive has ended (:meth:`PatchStage.finish`);
there the complete plan of every file is made again and an early edit that differs (which
cannot happen while the planner is right about finality) is re-applied, so the reported plan is
always the complete one. Without a sink (dry run) the plans are only reported
(``patch: planned``), from the same planner.

Jobs are keyed by their final ``(output, dest)``: a later member with the same destination (a
duplicate path, or ``lib64/x`` merged onto ``lib/x``) first waits for the early patch of the
earlier copy and drops its job (:meth:`PatchStage.supersede`), so no worker ever edits a file
that is being rewritten. Worker threads only touch their own job; the report is written by the
calling thread in source order.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import BinaryIO

from ._dlopen import DlopenTarget
from ._elf import ElfInfo, read_elf_info
from ._elfapply import FailFastBackend
from ._elfedit import ElfBackend
from ._elfjob import ElfJob, read_job, record_outcome, scan_quietly
from ._elfplan import ElfFacts, ElfPlan, Layout, PlanContext, plan_elf
from ._model import OUTPUT_NAMES
from ._pkgtable import added_needed
from ._report import Problem, Report
from ._resolve import LibraryIndex, unresolved_error
from ._rules import PackageSettings
from ._runpath import RunpathPolicy
from ._sources import member_parent
from .errors import ElfError, OutputError, PatchError

__all__ = ["ElfJob", "PatchSettings", "PatchStage"]

_PACKAGE_REF = re.compile(r"^@([A-Za-z0-9_.+-]+)@(/.*)?$")


@dataclass(frozen=True, slots=True)
class PatchSettings:
    policy: RunpathPolicy
    patcher: str                                # auto | lief | native
    jobs: int
    package_roots: Mapping[str, str]            # for @pname@ in package rules
    enabled: bool                               # --no-patch turns it off
    writing: bool                               # False: dry run, plans are only reported
    strict: bool = False                        # unresolved names fail the run too
    package_version: str | None = None          # gates [package] dlopen entries


def _layout(final_root: Callable[[str], str]) -> Layout:
    """Roots of every output the sink knows (a Nix builder declares only some)."""
    roots = []
    for name in OUTPUT_NAMES:
        try:
            roots.append((name, final_root(name)))
        except OutputError:
            continue
    return Layout(tuple(roots))


class PatchStage:
    """Collects ELF jobs, patches early where the plan is final, plans and patches the rest."""

    def __init__(self, settings: PatchSettings, package: PackageSettings,
                 final_root: Callable[[str], str], has_stubs_output: bool,
                 own_names: Mapping[tuple[str, str], set[str]], report: Report,
                 early_pool: ThreadPoolExecutor | None,
                 backend: ElfBackend | None = None) -> None:
        self.settings = settings
        self.jobs: list[ElfJob] = []
        # Frozen here, before any ELF member is planned: every plan sees the same roots.
        self.layout = _layout(final_root)
        self._own_names = own_names  # grows while the stream runs; read on this thread only
        self._report = report
        self._pool = early_pool if settings.enabled and settings.writing else None
        self._by_key: dict[tuple[str, str], ElfJob] = {}
        self._spooled: dict[str, tuple[DlopenTarget, ...]] = {}  # dry run: path -> dlopen
        self._spool_errors: dict[str, str] = {}                   # dry run: path -> error
        self._backend = backend or FailFastBackend(settings.patcher)
        self._static = self._static_context(package, has_stubs_output)

    # -- during the stream --------------------------------------------------------------------

    def add(self, job: ElfJob) -> None:
        self.jobs.append(job)
        job.dlopen = self._spooled.pop(job.record.path, job.dlopen)
        job.error = self._spool_errors.pop(job.record.path, job.error)
        self._by_key[job.key] = job
        if self._pool is not None and job.local is not None:
            key = (job.output, member_parent(job.dest))
            job.own = frozenset(self._own_names.get(key, ()))
            job.future = self._pool.submit(self._patch_early, job)

    def supersede(self, output: str, dest: str) -> None:
        """A later member is about to be written to ``(output, dest)``: let the early patch
        of the earlier copy finish first, then forget that copy (tar: the later one wins)."""
        job = self._by_key.pop((output, dest), None)
        if job is None:
            return
        if job.future is not None:
            job.future.result()
        self.jobs.remove(job)
        job.record.patch = "skipped"
        job.record.note = "replaced by a later member with the same destination"

    def spool_info(self, path: str, stream: BinaryIO, shown: str | None = None) -> ElfInfo | None:
        """Dry run: the dynamic section may sit anywhere in a 1 GB library, so the member is
        copied to a temporary file just long enough to read it (disk use: one member).
        ``shown``: the file's final path, named instead of the spool in error messages."""
        with tempfile.NamedTemporaryFile(prefix="cudasplit-elf-") as spool:
            shutil.copyfileobj(stream, spool, 1 << 20)
            spool.flush()
            try:
                info = read_elf_info(spool.name)
                if info is not None:
                    self._spooled[path] = scan_quietly(spool.name, info)
                return info
            except ElfError as exc:
                # The real run cannot patch it either: report what that run reports (a
                # patch-failed problem, see add), naming the final path rather than the spool.
                self._spool_errors[path] = str(exc).replace(spool.name, shown or path)
                return None

    def wait_early(self) -> None:
        for job in self.jobs:
            if job.future is not None:
                job.future.result()

    def _patch_early(self, job: ElfJob) -> None:
        """Worker thread: apply the plan if it is already final (see the module docstring)."""
        if job.rule is not None and job.rule.patch is False:
            return
        try:
            read_job(job)
        except ElfError:
            return  # reported by the final pass
        plan = plan_elf(self._facts(job), replace(
            self._static, names={(job.output, member_parent(job.dest)): job.own},
            complete=False))
        if plan.skip is None and plan.final:
            self._apply(job, plan)
            job.early, job.done = plan, job.error is None

    # -- after the stream ---------------------------------------------------------------------

    def finish(self, placed: Iterable[tuple[str, str]]) -> None:
        """Plan (and patch) every job; ``placed``: every (output, dest) placed."""
        if not self.jobs:
            return
        if not self.settings.enabled:
            for job in self.jobs:
                self._read_only(job)
                self._record(job, None)
            return
        context = self._final_context(placed)
        if self.settings.writing:
            with ThreadPoolExecutor(max_workers=self.settings.jobs) as pool:
                plans = list(pool.map(lambda job: self._complete(job, context), self.jobs))
        else:
            plans = [plan_elf(self._facts(job), context) for job in self.jobs]
        for job, plan in zip(self.jobs, plans, strict=True):
            self._record(job, plan)
        self._check_unresolved(plans)

    def _complete(self, job: ElfJob, ctx: PlanContext) -> ElfPlan | None:
        """Worker thread: the complete plan of one file, applied unless already applied."""
        if job.info is None and job.error is None and job.local is not None:
            try:
                read_job(job)
            except ElfError as exc:
                job.error = str(exc)
                return None
        plan = plan_elf(self._facts(job), ctx)
        if plan.skip is None and not (job.done and job.early is not None
                                      and job.early.edit == plan.edit):
            job.error = None
            self._apply(job, plan)
        return plan

    def _apply(self, job: ElfJob, plan: ElfPlan) -> None:
        assert job.local is not None
        try:
            job.result = self._backend.apply(str(job.local), plan.edit)
        except (ElfError, PatchError) as exc:
            job.error = str(exc)

    def _check_unresolved(self, plans: list[ElfPlan | None]) -> None:
        missing = {job.record.path: plan.unresolved
                   for job, plan in zip(self.jobs, plans, strict=True)
                   if plan is not None and plan.unresolved}
        if not missing:
            return
        if self.settings.policy.fail_unresolved or self.settings.strict:
            raise unresolved_error(missing, self._report)
        for path, names in missing.items():
            self._warn("needed-unresolved", path,
                       f"DT_NEEDED {', '.join(names)} resolve nowhere (pass --library-path DIR "
                       "or --ignore-missing NAME-GLOB)")

    # -- contexts -----------------------------------------------------------------------------

    def _facts(self, job: ElfJob) -> ElfFacts:
        rule = job.rule
        off = str(rule.ref) if rule is not None and rule.patch is False else None
        return ElfFacts(job.output, job.dest, job.info,
                        rule.runpath_append if rule is not None else (),
                        bool(rule is not None and rule.keep_runpath), off)

    def _static_context(self, package: PackageSettings, has_stubs: bool) -> PlanContext:
        """The parts of the context that do not depend on which members arrived."""
        base = self.settings.policy
        # Entries with a "stubs" component are stubs anyway; the stubs output is the rest.
        stubs_root = (self.layout.root("stubs"),) if has_stubs else ()
        policy = replace(base, stub_dirs=(*base.stub_dirs, *stubs_root),
                         append=base.append + self._package_appends(package))
        return PlanContext(policy, {}, {}, LibraryIndex.scan(policy.library_paths),
                           package.cuda_compat, dict(package.replace_needed), complete=False,
                           add_needed=added_needed(package.add_needed,
                                                   self.settings.package_version))

    def _package_appends(self, package: PackageSettings) -> tuple[str, ...]:
        """Package rules' runpath_append with ``@pname@`` filled from ``package_roots``."""
        entries = []
        needs = [f"@{need.package}@/lib" for need in package.dlopen
                 if need.applies_to(self.settings.package_version)]
        for entry in (*package.runpath_append, *needs):
            match = _PACKAGE_REF.match(entry)
            if match is None:
                entries.append(entry)
            elif match[1] in self.settings.package_roots:
                entries.append(self.settings.package_roots[match[1]] + (match[2] or ""))
            else:
                self._warn("package-root-missing", None,
                           f"package rules want {entry!r} in every RUNPATH; pass "
                           f"--package-root {match[1]}=DIR to add it")
        return tuple(entries)

    def _final_context(self, placed: Iterable[tuple[str, str]]) -> PlanContext:
        names: dict[tuple[str, str], set[str]] = {}
        package_dirs: dict[str, str] = {}
        for output, dest in sorted(placed):
            parent, name = member_parent(dest), posixpath.basename(dest)
            names.setdefault((output, parent), set()).add(name)
            # Stubs never resolve anything at run time, static archives are not loaded.
            if output not in ("stubs", "static") and "stubs" not in dest.split("/"):
                package_dirs.setdefault(name, posixpath.join(self.layout.root(output), parent))
        return replace(self._static, names=names, package_dirs=package_dirs, complete=True)

    # -- the report (calling thread only) -----------------------------------------------------

    def _record(self, job: ElfJob, plan: ElfPlan | None) -> None:
        problem = record_outcome(job, plan, writing=self.settings.writing)
        if problem is not None:
            self._report.problems.append(problem)

    def _read_only(self, job: ElfJob) -> None:
        if job.local is None:
            return
        try:
            read_job(job)
        except ElfError as exc:
            self._warn("elf-unreadable", job.record.path, str(exc))

    def _warn(self, code: str, path: str | None, message: str) -> None:
        self._report.warnings.append(Problem(code, path, message))

"""The plan → patch stage: a RUNPATH plan for every ELF member, applied by the tiered writer.

The split loop hands each written ELF file to :meth:`PatchStage.add`. A file whose
``DT_NEEDED`` names all resolve beside it (or to glibc or the driver) is patched at once on a
worker thread, while later members are still being decoded; the rest are planned once the
archive has ended and every library's final location is known (:meth:`PatchStage.finish`).
Without a sink (dry run) the plans are only reported (``patch: planned``).
"""

from __future__ import annotations

import posixpath
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from .elf import ElfInfo, read_elf_info
from .errors import ElfError, PatchError
from .patch import rename_needed, set_runpath
from .report import MemberRecord, Problem, Report
from .rules import PackageSettings, Rule
from .runpath import (
    RunpathPlan,
    RunpathPolicy,
    index_library_paths,
    is_driver_name,
    is_glibc_name,
    plan_runpath,
)
from .sources import member_parent

_PACKAGE_REF = re.compile(r"^@([A-Za-z0-9_.+-]+)@(/.*)?$")


@dataclass(slots=True)
class ElfJob:
    record: MemberRecord
    output: str
    dest: str
    local: Path | None  # None in a dry run: then ``info`` was read from a spooled copy
    rule: Rule | None
    done: bool = False  # patched while the stream was still running
    info: ElfInfo | None = None


@dataclass(frozen=True, slots=True)
class RunpathContext:
    policy: RunpathPolicy
    names: Mapping[tuple[str, str], set[str]]   # (output, dir) -> names placed there
    package_dirs: Mapping[str, str]             # library name -> final directory
    library_index: Mapping[str, str]
    is_compat_package: bool


@dataclass(frozen=True, slots=True)
class PatchSettings:
    policy: RunpathPolicy
    patcher: str                                # auto | lief
    jobs: int
    package_roots: Mapping[str, str]            # for @pname@ in package rules
    enabled: bool                               # --no-patch turns it off
    writing: bool                               # False: dry run, plans are only reported


class PatchStage:
    """Collects ELF jobs, patches early where it is safe, plans and patches the rest."""

    def __init__(self, settings: PatchSettings, package: PackageSettings,
                 final_root: Callable[[str], str], has_stubs_output: bool,
                 own_names: Mapping[tuple[str, str], set[str]], report: Report,
                 early_pool: ThreadPoolExecutor | None) -> None:
        self.settings = settings
        self.jobs: list[ElfJob] = []
        self._final_root = final_root
        self._own_names = own_names  # grows while the stream runs
        self._report = report
        self._pool = early_pool if settings.enabled and settings.writing else None
        self._futures: list[Future[None]] = []
        self._static = self._static_context(package, has_stubs_output)
        self._renames = dict(package.replace_needed)

    # -- during the stream --------------------------------------------------------------------

    def add(self, job: ElfJob) -> None:
        self.jobs.append(job)
        if self._pool is not None and job.local is not None:
            self._futures.append(self._pool.submit(self._patch_early, job))

    def spool_info(self, path: str, stream: BinaryIO) -> ElfInfo | None:
        """Dry run: the dynamic section may sit anywhere in a 1 GB library, so the member is
        copied to a temporary file just long enough to read it (disk use: one member)."""
        with tempfile.NamedTemporaryFile(prefix="cudasplit-elf-") as spool:
            shutil.copyfileobj(stream, spool, 1 << 20)
            spool.flush()
            try:
                return read_elf_info(spool.name)
            except ElfError as exc:
                self._warn("elf-unreadable", path, str(exc))
                return None

    def wait_early(self) -> None:
        for future in self._futures:
            future.result()

    def _patch_early(self, job: ElfJob) -> None:
        """Patch now if every DT_NEEDED is glibc, the driver's, or a file already beside it.

        Those resolutions cannot change as more members arrive (a file's own directory wins
        over every other place), so the plan equals the one made at the end. Anything else
        waits for the whole archive.
        """
        if job.rule is not None and job.rule.patch is False:
            return
        assert job.local is not None
        try:
            info = read_elf_info(job.local)
        except ElfError:
            return  # reported by the final pass
        if info is None or not info.has_dynamic or self._wants_rename(info):
            return
        key = (job.output, member_parent(job.dest))
        own = self._own_names.get(key, set())
        if all(is_glibc_name(n) or is_driver_name(n) or n in own for n in info.needed):
            self._patch_one(job, replace(self._static, names={key: own}))
            job.done = True

    # -- after the stream ---------------------------------------------------------------------

    def finish(self, placed: Iterable[tuple[str, str]]) -> None:
        """Plan (and patch) every job not done yet; ``placed``: every (output, dest) placed."""
        if not self.jobs:
            return
        if not self.settings.enabled:
            for job in self.jobs:
                self._read_only(job, "skipped")
            return
        context = self._final_context(placed)
        if not self.settings.writing:
            for job in self.jobs:
                self._plan_only(job, context)
            return
        pending = [job for job in self.jobs if not job.done]
        with ThreadPoolExecutor(max_workers=self.settings.jobs) as pool:
            list(pool.map(lambda job: self._patch_one(job, context), pending))

    def _static_context(self, package: PackageSettings, has_stubs: bool) -> RunpathContext:
        """The parts of the context that do not depend on which members arrived."""
        base = self.settings.policy
        # Entries with a "stubs" component are stubs anyway; the stubs output is the rest.
        stubs_root = (self._final_root("stubs"),) if has_stubs else ()
        policy = replace(base, stub_dirs=(*base.stub_dirs, *stubs_root),
                         append=base.append + self._package_appends(package))
        return RunpathContext(policy, {}, {}, index_library_paths(policy.library_paths),
                              package.cuda_compat)

    def _package_appends(self, package: PackageSettings) -> tuple[str, ...]:
        """Package rules' runpath_append with ``@pname@`` filled from ``package_roots``."""
        entries = []
        for entry in package.runpath_append:
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

    def _final_context(self, placed: Iterable[tuple[str, str]]) -> RunpathContext:
        names: dict[tuple[str, str], set[str]] = {}
        package_dirs: dict[str, str] = {}
        for output, dest in sorted(placed):
            parent, name = member_parent(dest), posixpath.basename(dest)
            names.setdefault((output, parent), set()).add(name)
            # Stubs never resolve anything at run time, static archives are not loaded.
            if output not in ("stubs", "static") and "stubs" not in dest.split("/"):
                package_dirs.setdefault(name, posixpath.join(self._final_root(output), parent))
        return replace(self._static, names=names, package_dirs=package_dirs)

    # -- one file -----------------------------------------------------------------------------

    def _patch_one(self, job: ElfJob, ctx: RunpathContext) -> None:
        rule = job.rule
        if rule is not None and rule.patch is False:
            self._read_only(job, "skipped")
            job.record.note = f"patching turned off by rule {rule.ref}"
            return
        try:
            self._patch_checked(job, ctx)
        except (ElfError, PatchError) as exc:
            job.record.patch = "skipped"
            self._report.problems.append(Problem("patch-failed", job.record.path, str(exc)))

    def _wants_rename(self, info: ElfInfo) -> bool:
        return any(name in self._renames for name in info.needed)

    def _rename_needed(self, job: ElfJob, info: ElfInfo) -> ElfInfo:
        """Package ``replace_needed`` first: the RUNPATH plan resolves the new names."""
        assert job.local is not None
        renamed = [f"{old} -> {self._renames[old]}" for old in info.needed
                   if old in self._renames and rename_needed(job.local, old, self._renames[old])]
        if not renamed:
            return info
        job.record.note = "DT_NEEDED renamed: " + ", ".join(renamed)
        fresh = read_elf_info(job.local)
        assert fresh is not None
        return fresh

    def _patch_checked(self, job: ElfJob, ctx: RunpathContext) -> None:
        assert job.local is not None
        info = read_elf_info(job.local)
        if info is None or not info.has_dynamic:
            job.record.patch = "skipped"
            return
        if self._wants_rename(info):
            info = self._rename_needed(job, info)
        policy, plan = _plan(job, info, ctx)
        result = set_runpath(job.local, plan.value, tag=policy.tag,
                             patcher=self.settings.patcher)
        record = job.record
        record.runpath_before, record.runpath_after = result.before, result.after
        record.runpath_tag, record.patch = result.tag, result.method
        record.needed_unresolved = list(plan.needed_unresolved)

    def _plan_only(self, job: ElfJob, ctx: RunpathContext) -> None:
        """Dry run: report the RUNPATH that would be written, as ``patch: planned``."""
        info, record = job.info, job.record
        if info is not None:
            _record_before(record, info)
        if info is None or not info.has_dynamic or (job.rule and job.rule.patch is False):
            record.patch = "skipped"
            return
        if self._wants_rename(info):
            renamed = tuple(self._renames.get(name, name) for name in info.needed)
            record.note = "DT_NEEDED would be renamed: " + ", ".join(
                f"{old} -> {self._renames[old]}" for old in info.needed if old in self._renames)
            info = replace(info, needed=renamed)
        policy, plan = _plan(job, info, ctx)
        record.runpath_after, record.runpath_tag = plan.value, policy.tag
        record.patch = "planned"
        record.needed_unresolved = list(plan.needed_unresolved)

    def _read_only(self, job: ElfJob, patch: str) -> None:
        try:
            info = job.info if job.local is None else read_elf_info(job.local)
        except ElfError as exc:
            self._warn("elf-unreadable", job.record.path, str(exc))
            job.record.patch = "skipped"
            return
        if info is not None:
            _record_before(job.record, info)
        job.record.patch = patch

    def _warn(self, code: str, path: str | None, message: str) -> None:
        self._report.warnings.append(Problem(code, path, message))


def _plan(job: ElfJob, info: ElfInfo, ctx: RunpathContext) -> tuple[RunpathPolicy, RunpathPlan]:
    policy = ctx.policy
    if job.rule is not None and (job.rule.runpath_append or job.rule.keep_runpath):
        policy = replace(policy, append=policy.append + job.rule.runpath_append,
                         keep_absolute=bool(job.rule.keep_runpath) or policy.keep_absolute)
    plan = plan_runpath(
        existing=info.runpath if info.runpath is not None else info.rpath,
        needed=info.needed,
        own_dir_names=ctx.names.get((job.output, member_parent(job.dest)), set()),
        package_dirs=ctx.package_dirs, library_index=ctx.library_index,
        policy=policy, is_compat_package=ctx.is_compat_package)
    return policy, plan


def _record_before(record: MemberRecord, info: ElfInfo) -> None:
    record.runpath_before = info.runpath if info.runpath is not None else info.rpath
    record.runpath_tag = ("RUNPATH" if info.runpath is not None
                          else "RPATH" if info.rpath is not None else None)

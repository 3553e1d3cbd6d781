"""The split loop: source -> classify -> place -> (links, pkg-config, RUNPATH) -> sink -> report.

One direction only: the loop pulls members from the source, asks the rule set (pure) where each
goes, hands bytes to the sink and hands what each stage returns to the report writer
(:mod:`~cudasplit._split.reportwriter`), which assembles the report at the end. Work that needs the
whole archive (symlinks whose targets come later, RUNPATH resolution against every library of
the package) runs once the stream has ended (:mod:`~cudasplit._split.endrun`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from cudasplit._layout import LayoutSpec
from cudasplit._model import Member
from cudasplit._report import MemberRecord, Report
from cudasplit._rulebook import RuleSet
from cudasplit._run import metered
from cudasplit._sinks import Sink
from cudasplit._source import Source
from cudasplit._split.classify import (
    ARCHIVE_NIX_SUPPORT,
    Action,
    Normaliser,
    classify_member,
    fallback_output,
    member_kind,
)
from cudasplit._split.endrun import EndOfRun, RunState
from cudasplit._split.gpucode import READING_PROCESS_FROM_JOBS, BackgroundReads, GpuCodeStage
from cudasplit._split.libmajor import LibMajor
from cudasplit._split.linkresolve import escapes
from cudasplit._split.links import LinkPlanner
from cudasplit._split.options import Progress, SplitOptions
from cudasplit._split.patchstage import PatchStage
from cudasplit._split.place import Placer
from cudasplit._split.placements import Placements
from cudasplit._split.prepare import patch_settings, prepare
from cudasplit._split.reportwriter import MemberFacts, ReportWriter, record_of
from cudasplit._split.rewrites import RewriteContext
from cudasplit._split.start import open_for
from cudasplit._words import plural
from cudasplit.errors import OutputError, UnsafeMemberError

log = logging.getLogger(__name__)



class SplitRun:
    """State of one split. Use :func:`split`; this class is the loop's working memory."""

    def __init__(self, source: Source, sink: Sink | None, options: SplitOptions,
                 layout: LayoutSpec | None = None,
                 plan_elf: Callable[[MemberRecord], bool] | None = None) -> None:
        self.source = source
        # Without a sink, which ELF members to read and plan (default: all). ``explain`` plans
        # only the file it explains: a plan needs the file's own dynamic section and the
        # names placed, not the other files' contents.
        self.plan_elf = plan_elf
        self.sink = sink
        self.options = options
        # Links, .pc files and RUNPATHs are planned against the layout (never asked of the
        # sink); unknown outputs show as ``/${output}`` (absolute, as RUNPATH entries must be).
        self.layout_spec = layout or (sink.layout if sink is not None else LayoutSpec())
        self.ruleset: RuleSet | None = None
        self.allowed: frozenset[str] | None = None
        # The only writer of the report: stages return values, it assembles them at the end.
        self.writer = ReportWriter(source.description, dry_run=sink is None)
        self.placements = Placements()
        self.normalise: Normaliser | None = None   # with the rules, before the first member
        self.links: LinkPlanner | None = None
        self.placer: Placer | None = None           # the place stage, with the rules
        self.lib_major = LibMajor()  # lib/<major>/ lifting, set up with the rules (libmajor.py)
        self.patches: PatchStage | None = None  # created with the rules (first member)
        self.inside: GpuCodeStage | None = None  # GPU code, glibc floors (options.inside)
        self.background: BackgroundReads | None = None  # large files, read by another process
        self.members_seen = 0
        self.bytes_seen = 0   # what progress said last: never moves backwards
        self._member_bytes = 0  # the sizes of the members taken so far
        self._current = ""    # the member in hand, for progress from the source's meter
        # A tarball meters its whole decoded stream (member data read or skipped, headers):
        # progress then moves in a dry run and through members nobody reads, too. Other
        # sources (directories) meter the streams of the members they hand out.
        meter = getattr(source, "meter", None)
        self._source_meters = options.progress is not None and callable(meter)
        if self._source_meters and meter is not None:
            meter(self._source_bytes)

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> Report:
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cudasplit-patch") as pool:
                # The first header names the package (its top directory): identity, rules
                # and layout are fixed after reading it and before taking any member.
                members = self.source.members()
                first = next(members, None)
                end = self._prepare(pool)
                for member, stream in itertools.chain(() if first is None else (first,),
                                                      members):
                    self._current = member.path
                    with _naming(self.source.description, member.path):
                        self._take(member, self._metered(member, stream))
                    self._tick(member)
                self._release_held()
                for message in getattr(self.source, "warnings", ()):
                    self.writer.warn("data-after-end", None, message)
                end.state.patches.wait_early()
                self._collect_inside()
            end.settle()
        except BaseException as exc:
            if self.background is not None:
                self.background.close()   # a read waiting for bytes that will not come
            named = _patch_error(exc, self.source.description, self.sink, self.patches)
            if self.sink is not None:
                self.sink.abort()
            if named is not None:
                raise named from exc
            raise
        if self.background is not None:
            self.background.close()   # every read was collected by the stages above
        end.complete(self.members_seen, max(self.bytes_seen, self._member_bytes))
        return self.writer.assemble()

    def _collect_inside(self) -> None:
        """What members carry, into the report before the end-of-run checks read it."""
        if self.inside is not None:
            outcomes, warnings = self.inside.finish()
            self.writer.inside(outcomes)
            self.writer.warnings(warnings)

    def _metered(self, member: Member, stream: BinaryIO | None) -> BinaryIO | None:
        """With a progress callback, a large member reports its bytes as they stream
        (unless the source meters everything it decodes)."""
        if self._source_meters:
            return stream
        start = self._member_bytes
        return metered(stream, member.size, self.options.progress,
                       lambda read: self._progress(start + read, member.path))

    def _source_bytes(self, total: int) -> None:
        self._progress(total, self._current)

    def _progress(self, count: int, current: str) -> Progress:
        self.bytes_seen = max(self.bytes_seen, count)
        update = Progress(self.source.description, self.members_seen, self.bytes_seen, current)
        if self.options.progress is not None:
            self.options.progress(update)
        return update

    def _tick(self, member: Member) -> None:
        self.members_seen += 1
        self._member_bytes += member.size
        # A metered source says where the stream is; a member that was not read yet (a dry
        # run skips it when the next header is read) must not make the bytes jump ahead.
        self._progress(self.bytes_seen if self._source_meters else self._member_bytes,
                       member.path)

    def _prepare(self, pool: ThreadPoolExecutor) -> EndOfRun:
        """Identity, rule set, layout, patch stage and declared outputs, once, in that order;
        the end of the run, given what it will need."""
        ident = self.options.package or self.source.package
        plan = prepare(ident, self.options, self.layout_spec, self.source.description)
        ruleset = self.ruleset = plan.ruleset
        self.writer.start(ident.as_dict(), ruleset.files, plan.layout)
        self.writer.warnings(plan.warnings)
        self.normalise, self.lib_major, self.allowed = plan.normalise, plan.lib_major, plan.allowed
        self.links = LinkPlanner(ruleset, plan.where, plan.allowed, plan.normalise.dest,
                                 self.placements, self.writer.problem, self.writer.warn)
        rewrites = RewriteContext(
            ruleset, plan.where, plan.allowed, plan.layout, self.options.package_roots,
            self.options.runpath.driver_lib_dir(), plan.normalise.dest)
        if self.sink is not None:
            self.sink.start(ident, plan.layout)
        # Large written files are read by a process of its own where there are cores for it
        # (gpucode.py); a dry run spools.
        self.background = (BackgroundReads(self.options.inside) if self.sink is not None
                           and self.options.effective_jobs() >= READING_PROCESS_FROM_JOBS
                           else None)
        self.patches = patches = PatchStage(
            patch_settings(self.options, writing=self.sink is not None,
                           package_version=ident.version),
            ruleset.package, plan.layout.root,
            has_stubs_output=plan.allowed is None or "stubs" in plan.allowed, early_pool=pool,
            background=self.background)
        self.writer.warnings(patches.warnings)
        self.inside = GpuCodeStage(pool if self.sink is not None else None, self._read_inside(),
                                  self.background) if self.options.inside else None
        self.placer = Placer(self.sink, self.placements, self.links, rewrites, patches,
                             plan.layout, self.source.description, self._spool_elf(),
                             self.inside, self.background)
        if self.sink is not None and plan.declared is not None:
            base = ruleset.profile.base_output
            for name in dict.fromkeys((*([base] if base else []), *plan.declared)):
                self.sink.ensure_output(name)
                self.writer.declare(name)
        return EndOfRun(RunState(
            self.source.description, ident, self.sink, self.options, ruleset, plan.where,
            plan.allowed, plan.declared, plan.layout, self.placements, self.links, patches,
            self.writer))

    def _read_inside(self) -> Callable[[MemberFacts], bool] | None:
        """``explain``: only the member explained is spooled and read."""
        plan_elf = self.plan_elf
        if plan_elf is None:
            return None
        return lambda facts: plan_elf(record_of(facts))

    def _spool_elf(self) -> Callable[[MemberFacts], bool] | None:
        """Dry run with patching: ELF members are spooled and planned (all, or plan_elf's)."""
        if self.sink is not None or not self.options.patch:
            return None
        plan_elf = self.plan_elf
        if plan_elf is None:
            return _all
        return lambda facts: plan_elf(record_of(facts))

    def _take(self, member: Member, stream: BinaryIO | None) -> None:
        assert self.normalise is not None and self.links is not None
        if self._held(member, stream, self.normalise.ruleset.package.lift_path(member.path)):
            return
        classified = classify_member(member, self.normalise, self.allowed)
        position = self.writer.member(classified.facts)
        if classified.facts.rule == ARCHIVE_NIX_SUPPORT:
            self.writer.problem("archive-nix-support", member.path, classified.facts.note or "")
        if classified.action is Action.SYMLINK:
            _refuse_escape(member, self.options, self.source.description)
            self.links.defer_symlink(member, classified.facts, position)
        elif classified.action is Action.HARDLINK:
            self.links.defer_hardlink(member, classified.facts, position)
        elif classified.action is Action.PLACE:
            assert stream is not None and self.placer is not None
            self.writer.placed(self.placer.place(member, stream, classified, position))

    def _release_held(self) -> None:
        """lib/<major>/ lifting: members held until the stream ended go through the loop now
        (placed, or dropped when a lib/<major>/ arrived meanwhile)."""
        for held in self.lib_major.release():
            with _naming(self.source.description, held.member.path):
                self._take(held.member, held.spool)
            if held.spool is not None:
                held.spool.close()
        unlifted = self.lib_major.unlifted_warning()
        if unlifted is not None:
            self.writer.warn("cuda-major-unknown", *unlifted)

    def _held(self, member: Member, stream: BinaryIO | None, lifted: str | None) -> bool:
        """lib/<major>/ lifting: hold ``member`` until the stream ends, or note its arrival
        (libmajor.py)."""
        if lifted is not None and self.lib_major.should_hold(member, lifted):
            self.lib_major.keep(member, stream)
            return True
        self.lib_major.arrive(member, lifted or "")
        late = self.lib_major.late()
        if late:
            self.writer.problem("cuda-major-late", late[0], (
                f"lib/{self.lib_major.major}/ arrived after {plural(len(late), 'member')} "
                "directly in lib/ were written; Nixpkgs deletes those, a stream cannot take "
                "back what it wrote"))
        return False


def _patch_error(exc: BaseException, description: str, sink: Sink | None,
                 patches: PatchStage | None) -> OutputError | None:
    """A write error while patching (disk full during a RUNPATH write) named the
    staged file, i.e. the staging dir that is about to go; name the archive, the member and
    the final path instead. Runs before the abort, while the staged paths still mean something."""
    text = str(exc)
    if not isinstance(exc, OutputError) or "member '" in text or sink is None or patches is None:
        return None
    for job in patches.jobs:
        staged = sink.staged_path(job.output, job.dest)
        if staged is not None and str(staged) in text:
            return OutputError(f"{description}: member {job.path!r}: RUNPATH not written: "
                               f"{sink.public_text(text)}")
    return None


def _refuse_escape(member: Member, options: SplitOptions, description: str) -> None:
    """A symlink out of the package root is a hostile archive (GNU tar and tarfile's
    ``data`` filter fail the extraction too), unless ``skip_unsafe_members``: then it is
    skipped at the end with an ``unsafe-symlink`` problem."""
    assert member.link is not None
    if not options.skip_unsafe_members and escapes(member.path, member.link):
        raise UnsafeMemberError(f"symlink target {member.link!r} leaves the package root "
                                "(skip_unsafe_members skips such members)",
                                source=description, member=member.path)


def _all(facts: MemberFacts) -> bool:
    return True


@contextlib.contextmanager
def _naming(description: str, path: str) -> Iterator[None]:
    """Sink errors name the archive and the member, not only the file being written."""
    try:
        yield
    except OutputError as exc:
        if f"member {path!r}" in str(exc):
            raise
        raise OutputError(f"{description}: member {path!r}: {exc}") from exc


# -- public entry points ---------------------------------------------------------------------


def split(source: str | os.PathLike[str] | Source, sink: Sink | None, *,
          options: SplitOptions | None = None, layout: LayoutSpec | None = None) -> Report:
    """Split ``source`` into ``sink`` (``None``: plan only, write nothing). RUNPATHs, links
    and ``.pc`` files name the roots of ``layout`` (default: the sink's declared layout;
    without a sink ``/${output}`` placeholders)."""
    opts = options or SplitOptions()
    source = open_for(source, opts)
    if opts.dry_run:
        sink = None
    return SplitRun(source, sink, opts, layout).run()


__all__ = ["Progress", "SplitOptions", "SplitRun", "fallback_output", "member_kind", "open_for",
           "split"]

"""After the stream: links, the rest of the ELF plans, copies, checks, nix-support, finish.

Everything here needs the whole archive (a symlink's target may come last; a RUNPATH is
resolved against every library of the package). :class:`EndOfRun` is given the values the
split loop built (:class:`RunState`), runs in a fixed order, hands what each step returns to
the report writer, and fails once, at the end, with a message that names the option changing
the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudasplit._elf.plan import unresolved_error
from cudasplit._elf.read import MACHINE_NAMES
from cudasplit._layout import Layout
from cudasplit._model import Kind, PackageId
from cudasplit._nix import NixSupport, nix_support_files
from cudasplit._report import CopyRecord, Report
from cudasplit._rulebook import RuleSet, Where
from cudasplit._sinks import Sink
from cudasplit._split.checks import (
    declared_output_problems,
    fhs_problems,
    nix_support_info,
    strict_failures,
    unclaimed_problems,
)
from cudasplit._split.classify import BUILTIN
from cudasplit._split.copies import CopiedEntry, plan_copies
from cudasplit._split.gpucode import glibc_ceiling_problems
from cudasplit._split.links import EVERY_OUTPUT, LinkPlanner, SymlinkOp
from cudasplit._split.options import Progress, SplitOptions
from cudasplit._split.patchstage import ElfJob, PatchStage
from cudasplit._split.place import write_bytes
from cudasplit._split.placements import Placements
from cudasplit._split.reportwriter import ReportWriter
from cudasplit._split.targets import check_copied_machines
from cudasplit._words import plural
from cudasplit.errors import ProblemsFound, UnpatchedFilesError

__all__ = ["EndOfRun", "RunState"]


@dataclass(frozen=True, slots=True)
class RunState:
    """What the split loop hands over once the stream has ended."""

    description: str                 # the source, for messages
    ident: PackageId
    sink: Sink | None
    options: SplitOptions
    ruleset: RuleSet
    where: Where
    allowed: frozenset[str] | None
    declared: tuple[str, ...] | None
    layout: Layout
    placements: Placements
    links: LinkPlanner
    patches: PatchStage
    writer: ReportWriter


class EndOfRun:
    def __init__(self, state: RunState) -> None:
        self.state = state

    def settle(self) -> None:
        """Links, the remaining ELF plans, copies and checks; raises on failure (the caller
        aborts the sink)."""
        state = self.state
        self._apply_links(plan=True)
        self._finish_patches()
        self._copy_packages()
        self._check()
        if state.options.nix_markers and state.sink is not None:
            state.sink.ensure_output("out")
            for output, path, data in nix_support_files(state.sink.outputs(),
                                                        self._nix_support()):
                write_bytes(state.sink, output, path, data, 0o644)
        self._check_fhs_refs()

    def _finish_patches(self) -> None:
        state = self.state
        done = state.patches.finish(state.placements.occupied)
        state.writer.elf(done.outcomes)
        state.writer.problems(done.problems)
        state.writer.warnings(done.warnings)
        failed = [p for p in done.problems if p.code == "patch-failed"]
        if failed and done.fail_unpatched:
            raise UnpatchedFilesError(
                f"{state.description}: {len(failed)} ELF file(s) should be patched and are "
                f"not; first: {failed[0]}", state.writer.assemble())
        if done.unresolved and done.fail_unresolved:
            raise unresolved_error(dict(done.unresolved), state.writer.assemble())
        for path, names in done.unresolved:
            state.writer.warn("needed-unresolved", path,
                              f"DT_NEEDED {', '.join(names)} resolve nowhere (add their "
                              "directory to library_paths, or accept them in ignore_missing)")

    def _copy_packages(self) -> None:
        """Package ``copy_packages``: planned in dry runs too (same warnings and counts)."""
        state, ruleset = self.state, self.state.ruleset
        entries, warnings = plan_copies(
            ruleset.package, state.where, dict(state.options.package_roots),
            lambda dest: ruleset.classify(dest, Kind.FILE, state.allowed).output or "out")
        state.writer.warnings(warnings)
        self._record_copies(entries)
        for entry in entries:
            if entry.link is not None:
                state.links.add_link(entry.output, entry.dest, entry.link,
                                     f"{BUILTIN}:copy-package")
                self._apply_links()
                continue
            if state.sink is not None:
                with open(entry.path, "rb") as fh:
                    state.sink.write_file(entry.output, entry.dest, fh,
                                          entry.path.stat().st_mode & 0o777)
            state.placements.occupied[(entry.output, entry.dest)] = f"{BUILTIN}:copy-package"
            state.writer.count(entry.output, entry.path.stat().st_size)

    def _record_copies(self, entries: list[CopiedEntry]) -> None:
        """Copied ELF files must run on the build machine (an x86_64 cicc in an sbsa nvcc
        cannot); every copied file goes into the report."""
        files = [e for e in entries if e.link is None]
        machines: dict[str, str] = {}
        for package in dict.fromkeys(e.package for e in files):
            for dest, _path, machine in check_copied_machines(
                    [(e.dest, e.path) for e in files if e.package == package],
                    self.state.where.platform, package):
                machines[dest] = MACHINE_NAMES.get(machine, str(machine))
        self.state.writer.copied(
            CopyRecord(e.package, str(e.path), e.output, e.dest, e.path.stat().st_size,
                       machines.get(e.dest)) for e in files)

    def _apply_links(self, *, plan: bool = False) -> None:
        """The link plan's ops (``plan``: every deferred link planned first, against the
        complete placements), handed to the sink in plan order; the link members' facts to
        the writer; hard-linked ELF copies in another output get their own patch job."""
        state = self.state
        if plan:
            state.links.plan()
        ops, copies, revised = state.links.take()
        state.writer.revise(revised)
        if state.sink is None:
            return
        for op in ops:
            if isinstance(op, SymlinkOp):
                state.sink.make_symlink(op.output, op.dest, op.target)
                continue
            state.sink.make_hardlink(op.output, op.dest, op.src_output, op.src_dest)
            if op.output != op.src_output:  # a copy: a file of its output like any other
                copied = state.sink.staged_path(op.output, op.dest)
                state.writer.count(op.output, _size(copied))
        for copy in copies:
            local = state.sink.staged_path(copy.output, copy.dest)
            if local is None:
                continue
            if not state.patches.original_into(copy.src_output, copy.src_dest, local):
                state.writer.warn("hardlink-copy-patched", copy.path,
                                  f"copied into {copy.output} from {copy.src_output} after "
                                  "that file was rewritten whole (LIEF); the copy is planned "
                                  "again from those bytes")
            state.patches.add(ElfJob(copy.position, copy.path, copy.output, copy.dest,
                                     local, copy.rule))

    # -- nix-support and checks -------------------------------------------------------------

    def _nix_support(self) -> NixSupport:
        state = self.state
        return nix_support_info(
            state.ruleset.package, state.ident, state.where,
            state.sink.outputs() if state.sink is not None else [], state.placements,
            state.options.runpath.driver_lib_dir(), state.layout.roots,
            state.options.cuda_component_hook, state.options.consumer_guards)

    def _check_fhs_refs(self) -> None:
        """checkCudaFhsRefs: ``/usr/`` in any output fails the run unless the package allows it."""
        state, sink = self.state, self.state.sink
        if (not state.options.check_fhs_refs or state.ruleset.package.allow_fhs_references
                or sink is None):
            return
        # The sink's working directory of each output (staged until the run finishes).
        staged = {o: sink.staged_path(o, "nix-support") for o in sink.outputs()}
        problems = fhs_problems({o: p.parent for o, p in staged.items() if p is not None})
        state.writer.problems(problems)
        if problems:
            first = problems[0]
            raise ProblemsFound(
                f"{state.description}: /usr/ references under check_fhs_refs; first: "
                f"{first.message.split(':')[0]}:{first.path}", state.writer.assemble())

    def _check(self) -> None:
        state = self.state
        if state.sink is not None:
            # Problem texts name final paths, never the staging dir (gone when read).
            state.writer.public_messages(state.sink.public_text)
        report = state.writer.assemble()
        state.writer.problems(declared_output_problems(
            report, state.declared or (), state.ruleset.package, self._holding_links()))
        state.writer.problems(unclaimed_problems(report))
        report = state.writer.assemble()  # in source order: "first:" is the first member's
        failing = strict_failures(report)
        if state.options.strict and failing:
            raise ProblemsFound(
                f"{state.description}: {plural(len(failing), 'problem')} (strict); "
                f"first: {failing[0]}", report)
        self._check_glibc(report)

    def _check_glibc(self, report: Report) -> None:
        """``max_glibc``: a file needing a newer ``GLIBC_`` fails the run, naming the file and
        the symbol (conda-forge's check-glibc, before anything is moved into place)."""
        state, ceiling = self.state, self.state.options.max_glibc
        too_new = glibc_ceiling_problems(report, ceiling) if ceiling is not None else []
        if too_new:
            state.writer.problems(too_new)
            more = f" (and {plural(len(too_new) - 1, 'more file')})" if len(too_new) > 1 else ""
            raise ProblemsFound(f"{state.description}: {too_new[0]}{more}",
                                state.writer.assemble())

    def _holding_links(self) -> frozenset[str]:
        """Outputs holding links of their own (profiles whose symlinks follow their own rule;
        an every_output copy does not count)."""
        state = self.state
        if state.ruleset.profile.follows_targets:
            return frozenset()
        return frozenset(output for (output, _dest), origin in state.placements.occupied.items()
                         if origin != EVERY_OUTPUT)

    def complete(self, members_seen: int, bytes_seen: int) -> None:
        """The last progress call, every output's record, then the sink's finish()."""
        state = self.state
        if state.options.progress is not None:
            state.options.progress(Progress(state.description, members_seen, bytes_seen, "",
                                            done=True))
        if state.sink is not None:
            for name in state.sink.outputs():
                state.writer.declare(name)
            state.sink.finish()


def _size(path: Path | None) -> int:
    """The size of a staged file (0 where the sink keeps none on disk)."""
    try:
        return 0 if path is None else path.lstat().st_size
    except OSError:
        return 0

"""After the stream: links, the rest of the ELF plans, copies, checks, nix-support, finish.

Everything here needs the whole archive (a symlink's target may come last; a RUNPATH is
resolved against every library of the package). :class:`EndOfRun` works on the state the
split loop (:class:`~cudasplit._pipeline.SplitRun`) built, in a fixed order, and fails once,
at the end, with a message that names the option changing the outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._checks import (
    declared_output_problems,
    fhs_problems,
    nix_support_info,
    strict_failures,
    unclaimed_problems,
)
from ._classify import BUILTIN
from ._copies import plan_copies
from ._links import SymlinkOp
from ._model import Kind
from ._nixsupport import NixSupport, write_nix_support
from ._patchstage import ElfJob
from ._splitoptions import Progress
from .errors import ProblemsFound

if TYPE_CHECKING:
    from ._pipeline import SplitRun

__all__ = ["EndOfRun"]


class EndOfRun:
    def __init__(self, run: SplitRun) -> None:
        self.run = run

    def settle(self) -> None:
        """Links, the remaining ELF plans, copies and checks; raises on failure (the caller
        aborts the sink)."""
        run = self.run
        assert run.patches is not None
        self._place_links()
        run.patches.finish(run.placements.occupied)
        self._copy_packages()
        self._check()
        if run.options.nix_markers and run.sink is not None:
            write_nix_support(run.sink, self._nix_support())
        self._check_fhs_refs()
        self._source_order()

    def _source_order(self) -> None:
        """Problems and warnings in the order of the members they name (stages report at
        different times: links and ELF plans only once the stream has ended); those naming
        no member keep their order, after the others."""
        report = self.run.report
        index = {record.path: i for i, record in enumerate(report.members)}
        for issues in (report.problems, report.warnings):
            issues.sort(key=lambda issue: index.get(issue.path or "", len(index)))

    def _copy_packages(self) -> None:
        """Package ``copy_packages``: planned in dry runs too (same warnings and counts)."""
        run, ruleset = self.run, self.run.ruleset
        assert ruleset is not None
        entries, warnings = plan_copies(
            ruleset.package, run.where, dict(run.options.package_roots),
            lambda dest: ruleset.classify(dest, Kind.FILE, run.allowed).output or "out")
        run.report.warnings.extend(warnings)
        for entry in entries:
            if entry.link is not None:
                self._add_link(entry.output, entry.dest, entry.link, f"{BUILTIN}:copy-package")
                self._apply_links()
                continue
            if run.sink is not None:
                with open(entry.path, "rb") as fh:
                    run.sink.write_file(entry.output, entry.dest, fh,
                                        entry.path.stat().st_mode & 0o777)
            run.placements.occupied[(entry.output, entry.dest)] = f"{BUILTIN}:copy-package"
            assert run.placer is not None
            run.placer.count(entry.output, entry.path.stat().st_size)

    # -- links ------------------------------------------------------------------------------

    def _place_links(self) -> None:
        """Plan every deferred link against the complete placements, then create them."""
        assert self.run.links is not None
        self.run.links.plan()
        self._apply_links()

    def _add_link(self, output: str, dest: str, text: str, origin: str) -> None:
        assert self.run.links is not None
        self.run.links.add_link(output, dest, text, origin)

    def _apply_links(self) -> None:
        """The link plan's ops, handed to the sink in plan order; hard-linked ELF copies in
        another output get their own patch job."""
        run = self.run
        assert run.links is not None
        ops, copies = run.links.take()
        if run.sink is None:
            return
        for op in ops:
            if isinstance(op, SymlinkOp):
                run.sink.make_symlink(op.output, op.dest, op.target)
            else:
                run.sink.make_hardlink(op.output, op.dest, op.src_output, op.src_dest)
        for copy in copies:
            local = run.sink.staged_path(copy.output, copy.dest)
            if local is not None:
                run.patch_stage().add(ElfJob(copy.record, copy.output, copy.dest, local,
                                             copy.rule))

    # -- nix-support and checks -------------------------------------------------------------

    def _nix_support(self) -> NixSupport:
        run = self.run
        assert run.ruleset is not None
        return nix_support_info(
            run.ruleset.package, run.options.package or run.source.package, run.where,
            run.sink.outputs() if run.sink is not None else [], run.placements,
            run.options.runpath.driver_lib_dir(), run.layout.roots,
            run.options.cuda_component_hook)

    def _check_fhs_refs(self) -> None:
        """checkCudaFhsRefs: ``/usr/`` in any output fails the run unless the package allows it."""
        run = self.run
        assert run.ruleset is not None
        if (not run.options.check_fhs_refs or run.ruleset.package.allow_fhs_references
                or run.sink is None):
            return
        # The sink's working directory of each output (staged until the run finishes).
        staged = {o: run.sink.staged_path(o, "nix-support") for o in run.sink.outputs()}
        problems = fhs_problems({o: p.parent for o, p in staged.items() if p is not None})
        run.report.problems.extend(problems)
        if problems:
            first = problems[0]
            raise ProblemsFound(
                f"{run.source.description}: /usr/ references under --check-fhs-refs; first: "
                f"{first.message.split(':')[0]}:{first.path}", run.report)

    def _public_messages(self) -> None:
        """Problem texts name final paths, never the staging dir (gone when they are read)."""
        if self.run.sink is not None:
            for issue in (*self.run.report.problems, *self.run.report.warnings):
                issue.message = self.run.sink.public_text(issue.message)

    def _check(self) -> None:
        run = self.run
        assert run.ruleset is not None
        self._public_messages()
        run.report.problems.extend(declared_output_problems(
            run.report, run.declared or (), run.ruleset.package))
        run.report.problems.extend(unclaimed_problems(run.report))
        self._source_order()  # "first:" below is the first member's
        failing = strict_failures(run.report)
        if run.options.strict and failing:
            raise ProblemsFound(
                f"{run.source.description}: {len(failing)} problem(s) under "
                f"--strict; first: {failing[0]}", run.report)

    def complete(self) -> None:
        """The last progress call, every output's record, then the sink's finish()."""
        run = self.run
        if run.options.progress is not None:
            run.options.progress(Progress(run.source.description, run.members_seen,
                                          run.bytes_seen, "", done=True))
        if run.sink is not None:
            assert run.placer is not None
            for name in run.sink.outputs():
                run.placer.output_record(name)
            run.sink.finish()

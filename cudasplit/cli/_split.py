"""``cudasplit split``: one source into outputs, or a batch of them, with the report file.

The decisions live in the library (:func:`cudasplit.split_to_dir`, :func:`cudasplit.split_many`,
...); this module reads the options, writes the report where it was asked and the summary.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

# The split itself (and the report types) load when the command runs, not for --help: the
# library opens the source and starts decoding before it imports the rest of the pipeline.
from .. import CudasplitError, OptionsError, OutputError, ProblemsFound
from ._optgroups import COMMON, PATCH, GroupedCommand, jobs_option, size_option, split_options
from ._terminal import (
    ProgressLine,
    closure_warnings,
    dropped_line,
    err,
    error_text,
    fail,
    note,
    print_issues,
    setup_logging,
    status_line,
)
from ._text import data, flag_named, message, say

if TYPE_CHECKING:
    from .. import Report, SplitOptions


class ReportTarget:
    """``--report FILE`` or ``--report -`` (standard output), plain or ``--report-relative``."""

    def __init__(self, target: str | None, relative: bool, *, nix: bool = False) -> None:
        self.target = target
        self.relative = relative
        self.to_stdout = target == "-"
        self.nix = nix
        self._created = False

    def claim(self) -> None:
        """Check the destination before the split writes its first byte (it used to
        fail after the outputs were promoted, and the retry then found them "already there").
        An existing file is opened for appending (not truncated), a new one created empty
        (:meth:`discard` removes it if the run fails); a report inside a directory the split
        will create only needs its nearest existing parent to be a writable directory."""
        if self.target is None or self.to_stdout:
            return
        path = Path(self.target)
        try:
            if path.parent.is_dir():
                flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
                try:
                    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                    self._created = True
                except FileExistsError:
                    fd = os.open(path, flags)
                os.close(fd)
                return
            ancestor = next(p for p in path.parents if p.exists() or p == p.parent)
            if not ancestor.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            if not os.access(ancestor, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        except OSError as exc:
            raise OutputError(f"{self.target}: cannot write the report ({exc.strerror}); "
                              "nothing was split") from exc

    def discard(self) -> None:
        """Remove the empty file :meth:`claim` created when the run wrote no report."""
        if self._created and self.target is not None:
            with contextlib.suppress(OSError):
                if Path(self.target).stat().st_size == 0:
                    Path(self.target).unlink()

    def render(self, report: Report) -> dict[str, Any]:
        """The report's JSON data, without absolute store paths when ``relative``, and in
        ``--nix`` mode whenever the report lands inside an output: an output naming another
        output's store path is a reference, and dev -> out -> dev a Nix cycle error."""
        from .. import relative_report

        relative = self.relative or (self.nix and self._inside(report))
        return relative_report(report) if relative else report.as_dict()

    def _inside(self, report: Report) -> bool:
        if self.target is None or self.to_stdout:
            return False
        where = Path(self.target).resolve()
        return any(where.is_relative_to(Path(rec.directory).resolve())
                   for rec in report.outputs.values())

    def write(self, report_data: dict[str, Any]) -> None:
        """Write ``report_data`` as JSON to the target (nothing without one)."""
        if self.target is None:
            return
        text = json.dumps(report_data, indent=2) + "\n"
        if self.to_stdout:
            data(text, nl=False)
            return
        try:
            # A report whose directory did not exist at claim() (inside an output, or
            # anywhere for root, whom every directory lets in) gets it now, as outputs do.
            Path(self.target).parent.mkdir(parents=True, exist_ok=True)
            Path(self.target).write_text(text)
        except OSError as exc:
            raise OutputError(f"{self.target}: cannot write the report ({exc.strerror})") from exc


@click.command("split", cls=GroupedCommand)
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=False))
@click.option("-o", "--output-dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write DIR/<output>/... (staged, moved into place at the end).")
@click.option("--nix", is_flag=True, help="Take the outputs from the Nix builder environment.")
@click.option("--nix-support", is_flag=True, help="Write nix-support/include-in-cudatoolkit-root "
              "in every output and nix-support/propagated-build-inputs (the others) in out.")
@click.option("--cuda-component-hook", metavar="DIR", help="With --nix-support: Nixpkgs' "
              "cudaComponentHook (store path); each component output's nix-support/setup-hook "
              "sources its collector.")
@click.option("--consumer-guards", is_flag=True, help="With --nix-support: lib's (else out's) "
              "nix-support/setup-hook also carries the consumer-guards hook (ambiguous "
              "RUNPATHs, dlopen RUNPATH entries, closure budgets in every consumer's fixup).")
@COMMON
@PATCH
@click.option("--report", "report_file", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the JSON report here ('-': standard output).")
@click.option("--report-relative", is_flag=True, help="Report without absolute store paths "
              "(outputs as $<output>, source and rule files by name): safe to keep in $out. "
              "With --nix, a report inside an output is always written so.")
@click.option("--strict", is_flag=True, help="Fail (exit 1) on empty requested outputs, "
              "unclaimed members, dangling links, failed patches, missing package roots and "
              "unresolved DT_NEEDED.")
@click.option("--dry-run", is_flag=True, help="Plan and report; write nothing.")
@click.option("--overwrite", is_flag=True, help="Replace the previous split in DIR (all of "
              "its outputs, also those this run does not produce).")
@click.option("--check-fhs-refs", is_flag=True, help="Fail on /usr/ in any output unless the "
              "package table allows it (Nixpkgs' checkCudaFhsRefs).")
@click.option("--no-fsync", is_flag=True, help="Do not fsync before the final renames "
              "(faster on slow disks; a power loss may then leave truncated files).")
@jobs_option("decoder threads and ELF patch workers; the sources of a batch share them")
@click.option("--memory-limit", metavar="SIZE", help="Memory the decoder may use: decoded "
              "bytes held and its threads' dictionaries together (K/M/G). The xz binary gets "
              "it as --memlimit-decompress (fewer threads where more would not fit); below one "
              "thread's dictionary the in-process decoder streams within it. Default: what "
              "the decoder's threads need, at most RAM/4 and what --max-ratio lets the archive "
              "expand to. Lower is slower, never wrong; the peak RSS of the whole run, the "
              "decoder child included, stays within SIZE + about 150 MB.")
@click.option("-q", "--quiet", is_flag=True, help="Hide the summary, the progress line, "
              "warnings and notes; errors and problems (what --strict fails on) are still "
              "printed, and so is what --closure and --report - ask for.")
@click.option("-v", "--verbose", is_flag=True, help="Log what happens.")
@click.option("--closure", is_flag=True, help="Then print the closure report of the outputs "
              "(one source; see `cudasplit closure`). With --strict its warnings exit 1, as "
              "`cudasplit closure --strict` does; the outputs stay written.")
def split_command(sources: tuple[str, ...], output_dir: str | None, nix: bool,
                  nix_support: bool, cuda_component_hook: str | None, consumer_guards: bool,
                  report_file: str | None, report_relative: bool, strict: bool, dry_run: bool,
                  overwrite: bool, check_fhs_refs: bool, no_fsync: bool, jobs: int | None,
                  memory_limit: str | None, quiet: bool, verbose: bool, closure: bool,
                  **kw: Any) -> None:
    """Split SOURCES (tarballs, unpacked directories, or - for standard input) into outputs.

    One source: DIR/<output>/... . Several sources, or a directory of tarballs: each goes to
    DIR/<pname>-<platform>-<version>/<output>/..., processed concurrently within --jobs.
    """
    if "" in sources:  # Path("") is the current directory: never what was meant
        fail(OptionsError("source must not be empty ('' is not a file or directory)"))
    if closure and _is_batch_quietly(sources, nix):
        raise click.UsageError("--closure takes exactly one source")
    setup_logging(quiet, verbose)
    if bool(output_dir) == nix:
        raise click.UsageError("give exactly one of --output-dir DIR or --nix")
    progress = ProgressLine.for_terminal(quiet)
    writer = ReportTarget(report_file, report_relative, nix=nix)
    try:
        options = split_options(
            kw, COMMON, PATCH, strict=strict, dry_run=dry_run, overwrite=overwrite, jobs=jobs,
            memory_limit=None if memory_limit is None else size_option(memory_limit,
                                                                        "--memory-limit"),
            nix_markers=nix_support, check_fhs_refs=check_fhs_refs,
            cuda_component_hook=cuda_component_hook, fsync=not no_fsync, progress=progress,
            consumer_guards=consumer_guards)
        writer.claim()
        if len(sources) > 1 or _is_batch(sources[0], nix, quiet):
            if nix:
                raise click.UsageError("--nix takes exactly one source")
            assert output_dir is not None
            _run_batch(sources, output_dir, options, writer, quiet)
            return
        report = _run_split(sources[0], output_dir, nix, options, writer)
    except CudasplitError as exc:
        fail(exc)
    finally:
        writer.discard()  # the empty file claim() made, if no report came (a failed run)
        if progress is not None:
            progress.clear()
    if not quiet:
        _print_summary(report, to_stderr=writer.to_stdout)
    print_issues(report, warnings=not quiet)
    if closure and not dry_run and _print_closure(output_dir, nix) and strict:
        sys.exit(1)  # the same verdict as `cudasplit closure --strict` on these outputs


def _print_summary(report: Report, *, to_stderr: bool = False) -> None:
    # A lazy public name (``cudasplit._HOMES``): the sizes ``closure`` would print.
    from ..outputs import measure_outputs

    lines = report.summary_lines(None if report.dry_run else measure_outputs(report))
    if report.dry_run:
        lines = ["plan (--dry-run): nothing was written; outputs would go to these directories",
                 *lines]
    dropped = report.dropped()
    if dropped:
        lines.append(dropped_line(dropped))
    for line in lines:
        say(flag_named(line, leading=False), err=to_stderr)


def _is_batch_quietly(sources: Sequence[str], nix: bool) -> bool:
    """Whether SOURCES are a batch, without saying which kind a directory is."""
    from .. import directory_kind

    if len(sources) != 1:
        return True
    path = Path(sources[0])
    return not nix and path.is_dir() and directory_kind(path) == "batch"


def _is_batch(source: str, nix: bool, quiet: bool) -> bool:
    path = Path(source)
    if nix or source == "-" or not path.is_dir():
        return False
    from .. import directory_kind

    kind = directory_kind(path)
    # Said only where it changes what is written: a tree is split as every source is (one
    # package into DIR/<output>/), and a note on every such split was noise.
    if kind == "batch" and not quiet:
        note(f"{source}: a directory of tarballs: splitting each into its own directory "
             "(batch)")
    return kind == "batch"


def _run_batch(sources: Sequence[str], output_dir: str, options: SplitOptions,
               writer: ReportTarget, quiet: bool) -> None:
    from .. import batch_report, split_many

    results = split_many(sources, output_dir, options)
    writer.write(batch_report(results, relative=writer.relative))
    failed = [r for r in results if r.error is not None]
    for result in results:
        if result.error is not None:
            err(message("error", error_text(result.error)))
        elif not quiet and result.report is not None:
            say(f"{result.source} -> {result.output_dir}", err=writer.to_stdout)
            _print_summary(result.report, to_stderr=writer.to_stdout)
        if result.report is not None:
            print_issues(result.report, warnings=not quiet)
    if failed:
        sys.exit(max(r.error.exit_code for r in failed if r.error is not None))


def _run_split(source: str, output_dir: str | None, nix: bool, options: SplitOptions,
               writer: ReportTarget) -> Report:
    from .. import Report, split_nix, split_to_dir

    try:
        if nix:
            report = split_nix(source, options=options)
        else:
            assert output_dir is not None
            report = split_to_dir(source, output_dir, options)
    except ProblemsFound as exc:
        if isinstance(exc.report, Report):
            if writer.target is not None:
                writer.write(writer.render(exc.report))
            print_issues(exc.report)
        raise
    if writer.target is not None:  # rendering 90,000 members costs seconds: only when asked
        writer.write(writer.render(report))
    return report


def _print_closure(output_dir: str | None, nix: bool) -> int:
    """``split --closure``: the closure report of what the split just wrote; returns how many
    warnings it has."""
    # A lazy public name (``cudasplit._HOMES``): loaded only when this command runs.
    from ..outputs import closure_of

    try:
        with status_line("file") as status:
            report = closure_of(progress=status) if nix else closure_of(output_dir,
                                                                      progress=status)
    except CudasplitError as exc:
        fail(exc)
    for line in report.text_lines():
        say(line)
    closure_warnings(report)  # even under -q: they are what --closure --strict fails on
    return len(report.warnings)

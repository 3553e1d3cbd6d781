"""Command ``repack``: a split as one reproducible archive per output, or as a conda channel."""

from __future__ import annotations

from typing import Any

import click

from .. import (
    CudasplitError,
    OptionsError,
    ProblemsFound,
    RepackOptions,
    Report,
    repack_to_dir,
)
from ._optgroups import COMMON, PATCH, GroupedCommand, jobs_option, split_options
from ._split import ReportTarget
from ._terminal import fail, print_issues, setup_logging, status_line, warn
from ._text import flag_named, say


@click.command("repack", cls=GroupedCommand)
@click.argument("source", type=click.Path(exists=False))
@click.option("-o", "--output-dir", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Write DIR/<pname>-<platform>-<version>-<output>.tar.zst per output "
              "(--format conda: DIR is a channel, DIR/<subdir>/<package>.conda).")
@click.option("--prefix", metavar="DIR", help="Where the outputs will be unpacked (output "
              "<o> at DIR/<o>); RUNPATHs and .pc files name it. Default: /<pname>-<platform>-"
              "<version>.")
@click.option("--format", "fmt", type=click.Choice(["zst", "xz", "gz", "conda"]), default="zst",
              show_default=True, help="Compression of the archives; conda: one .conda per "
              "output of --profile conda-forge (zstd), into a channel a conda client indexes.")
@click.option("--level", type=int, default=None, help="Compression level: zst and conda "
              "1-22 (default 10), xz 0-9 and gz 1-9 (default 9).")
# The compressor's threads are the cores of --jobs. --threads, which counted them apart
# (0 single-threaded, -1 every CPU), is a hidden deprecated spelling that keeps its values.
@click.option("--threads", type=click.IntRange(min=-1), default=None, metavar="N", hidden=True,
              help="Deprecated: the zstd compressor uses the cores of --jobs.")
@COMMON
@PATCH
@click.option("--nix-support", is_flag=True, help="Also write the nix-support/ files.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False),
              help="Write the JSON report here.")
@click.option("--strict", is_flag=True, help="Fail (exit 1) on problems, as in split.")
@click.option("--overwrite", is_flag=True, help="Replace existing archives.")
@jobs_option("decoder threads and ELF patch workers, then compressor threads")
@click.option("-q", "--quiet", is_flag=True, help="Hide the archives written, the progress "
              "line and warnings; errors and problems (what --strict fails on) are still "
              "printed.")
@click.option("-v", "--verbose", is_flag=True, help="Log what happens.")
def repack_command(source: str, output_dir: str, prefix: str | None, fmt: str, level: int | None,
                   threads: int | None, nix_support: bool, report_file: str | None, strict: bool,
                   overwrite: bool, jobs: int | None, quiet: bool, verbose: bool,
                   **kw: Any) -> None:
    """Split SOURCE and write one reproducible tarball per output (mtime: SOURCE_DATE_EPOCH),
    or with --format conda one reproducible conda package per output."""
    setup_logging(quiet, verbose)
    if threads is not None:
        warn("--threads is deprecated; the zstd compressor uses the cores of -j/--jobs",
             "deprecated-option")
    report_target = ReportTarget(report_file, relative=False)
    try:
        try:
            packing = RepackOptions(prefix=prefix, fmt=fmt, level=level, threads=threads)
        except OptionsError as exc:
            raise type(exc)(flag_named(str(exc))) from exc
        report_target.claim()
        try:
            with status_line(quiet=quiet) as status:
                options = split_options(kw, COMMON, PATCH, nix_markers=nix_support,
                                        strict=strict, overwrite=overwrite, jobs=jobs,
                                        progress=status)
                result = repack_to_dir(source, output_dir, options, packing)
        except ProblemsFound as exc:
            if isinstance(exc.report, Report):
                report_target.write(exc.report.as_dict())
            raise
        report_target.write(result.report.as_dict())
    except CudasplitError as exc:
        fail(exc)
    finally:
        report_target.discard()  # the empty file claim() made, if no report came
    if not quiet:
        for path in result.archives:
            say(str(path))
    print_issues(result.report, warnings=not quiet)

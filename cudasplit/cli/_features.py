"""Command ``features``: the feature manifest of the tarballs a manifest names."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .. import CudasplitError, OutputError
from ._optgroups import manifest_options
from ._terminal import EXIT_OK, EXIT_PROBLEMS, err, fail, status_line
from ._text import data, message


@click.command("features")
@click.argument("manifest", type=click.Path(dir_okay=False))
@manifest_options
@click.option("-o", "--output", "output_file", type=click.Path(dir_okay=False),
              help="Write the JSON here (default: standard output).")
@click.option("--extended", is_flag=True, help="Also include, python, stubs flags and the "
              "SONAMEs provided and needed (reads every ELF member's dynamic section).")
def features_command(manifest: str, tarball_dir: str, platforms: tuple[str, ...],
                     cuda_variants: tuple[str, ...], package_names: tuple[str, ...],
                     jobs: int | None, output_file: str | None, extended: bool) -> None:
    """Write the feature manifest (feature_*.json schema) of the tarballs MANIFEST names.

    Each tarball is streamed once. Missing or unreadable tarballs are listed on standard error
    and left out of the JSON (never guessed); the exit status is then 1.
    """
    # A lazy public name (``cudasplit._HOMES``): loaded only when this command runs.
    from ..releases import manifest_features

    if output_file and os.path.realpath(output_file) == os.path.realpath(manifest):
        fail(OutputError(f"{output_file}: this output is the input manifest; nothing was "
                         "written"))
    try:
        with status_line("tarball") as status:
            report = manifest_features(manifest, tarball_dir, platforms=platforms,
                                       cuda_variants=cuda_variants, packages=package_names,
                                       jobs=jobs, extended=extended, progress=status)
        _write(report.to_feature_json(), output_file)
    except CudasplitError as exc:
        fail(exc)
    for result in report.results:
        if result.status == "missing":
            err(message("problem", f"{result.artifact.label}: no tarball "
                                   f"{result.artifact.filename}", "tarball-missing"))
        elif result.status == "error":
            err(message("problem", f"{result.artifact.label}: {result.detail}",
                        "tarball-unreadable"))
        elif result.features is not None:
            for problem in result.features.problems:
                # As in a split: the file's features are left unread, nothing fails.
                err(message("warning", problem, "elf-unreadable"))
    sys.exit(EXIT_OK if report.complete else EXIT_PROBLEMS)


def _write(text: str, output_file: str | None) -> None:
    if not output_file:
        data(text, nl=False)
        return
    try:
        Path(output_file).write_text(text)
    except OSError as exc:
        raise OutputError(f"{output_file}: cannot write ({exc.strerror})") from exc

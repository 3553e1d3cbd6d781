"""Manifest commands: ``verify`` downloads, compute ``features`` (see docs-manifests.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .. import CudasplitError, OutputError
from ._optgroups import jobs_option
from ._terminal import EXIT_OK, EXIT_PROBLEMS, err, fail, plural, status_line
from ._text import data, message, say

F = TypeVar("F", bound=Callable[..., Any])


def manifest_options(func: F) -> F:
    """Options shared by ``verify`` and ``features``: where the tarballs are and which."""
    for decorator in reversed([
        click.option("--tarballs", "tarball_dir", required=True,
                     type=click.Path(file_okay=False, exists=True),
                     help="Directory holding the tarballs (flat, or NVIDIA's relative paths)."),
        click.option("--platform", "platforms", multiple=True, metavar="NAME",
                     help="linux-x86_64, linux-sbsa, linux-aarch64, linux-ppc64le, "
                     "windows-x86_64, linux-all (NVIDIA's arch-independent tarballs), source; "
                     "or all, linux (every linux-*), host. Repeatable; default: all."),
        click.option("--cuda-variant", "cuda_variants", multiple=True, metavar="N",
                     help="Keep only these CUDA majors of cuda_variant packages (12 or cuda12; "
                     "repeatable; default: all)."),
        click.option("--package", "package_names", multiple=True, metavar="PNAME",
                     help="Only these packages (repeatable; default: all)."),
        jobs_option("tarballs hashed (verify) or scanned (features) at once", beside=False),
    ]):
        func = decorator(func)
    return func


@click.command("verify")
@click.argument("manifest", type=click.Path(dir_okay=False))
@manifest_options
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@click.option("-q", "--quiet", is_flag=True, help="Hide the tarballs that are ok and the "
              "progress line; those that are not ok and the count line are still printed.")
def verify_command(manifest: str, tarball_dir: str, platforms: tuple[str, ...],
                   cuda_variants: tuple[str, ...], package_names: tuple[str, ...], jobs: int | None,
                   as_json: bool, quiet: bool) -> None:
    """Check size and sha256 of the tarballs MANIFEST (redistrib_*.json) names.

    Exit 0 when every selected tarball is present and intact, 1 when one is missing or
    differs, 2 when the manifest or an option is bad.
    """
    # A lazy public name (``cudasplit._LAZY``): loaded only when this command runs.
    from .. import verify_manifest

    try:
        with status_line("tarball", quiet=quiet) as status:
            report = verify_manifest(manifest, tarball_dir, platforms=platforms,
                                     cuda_variants=cuda_variants, packages=package_names,
                                     jobs=jobs, progress=status)
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        data(report.to_json(), nl=False)
    else:
        for result in report.results:
            if not (quiet and result.status == "ok"):
                say(result.line())
        counts = ", ".join(f"{n} {status}" for status, n in report.counts().items() if n)
        say(f"{plural(len(report.results), 'tarball')}: {counts or 'none selected'}", err=True)
    sys.exit(EXIT_OK if report.ok else EXIT_PROBLEMS)


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
    # A lazy public name (``cudasplit._LAZY``): loaded only when this command runs.
    from .. import manifest_features

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

"""Command ``verify``: the size and sha256 of the tarballs a manifest names."""

from __future__ import annotations

import sys

import click

from .. import CudasplitError
from ._optgroups import manifest_options
from ._terminal import EXIT_OK, EXIT_PROBLEMS, fail, plural, status_line
from ._text import data, say


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
    # A lazy public name (``cudasplit._HOMES``): loaded only when this command runs.
    from ..releases import verify_manifest

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

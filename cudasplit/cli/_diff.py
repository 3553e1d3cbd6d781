"""Command ``diff``: two releases compared."""

from __future__ import annotations

import sys

import click

from .. import CudasplitError
from ._optgroups import graph_format, jobs_option
from ._terminal import EXIT_FOUND, EXIT_OK, fail, note, status_line
from ._text import show_result


@click.command("diff")
@click.argument("old", type=click.Path(exists=True))
@click.argument("new", type=click.Path(exists=True))
@click.option("--tarballs", "tarball_dir", type=click.Path(file_okay=False, exists=True),
              help="Where the tarballs of OLD and NEW manifests are (both); without it two "
              "manifests are compared as manifests.")
@click.option("--old-tarballs", type=click.Path(file_okay=False, exists=True),
              help="Where OLD manifest's tarballs are (default: --tarballs).")
@click.option("--new-tarballs", type=click.Path(file_okay=False, exists=True),
              help="Where NEW manifest's tarballs are (default: --tarballs).")
@click.option("--platform", default="linux-x86_64", show_default=True,
              help="The platform compared when OLD and NEW are manifests.")
@click.option("--members", is_flag=True, help="One line per member instead of per directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON diff (--format json).")
@graph_format
@jobs_option("decoder threads; the tarballs are read one after another")
def diff_command(old: str, new: str, tarball_dir: str | None, old_tarballs: str | None,
                 new_tarballs: str | None, platform: str, members: bool, as_json: bool,
                 fmt: str, jobs: int | None) -> None:
    """Compare two releases: tarballs, split directories, or manifests (with --tarballs their
    tarballs are split and compared; without, the manifests alone: packages added, removed and
    renamed, versions and platforms).

    Exit 0 when they place the same members the same way, 1 when something changed.
    """
    # A lazy public name (``cudasplit._HOMES``): loaded only when this command runs.
    from ..releases import diff_releases

    try:
        with status_line() as status:
            result = diff_releases(old, new, tarball_dir=tarball_dir,
                                   old_tarballs=old_tarballs, new_tarballs=new_tarballs,
                                   platform=platform, jobs=jobs, progress=status)
    except CudasplitError as exc:
        fail(exc)
    show_result(result, "json" if as_json else fmt, lambda: result.text_lines(members=members))
    for text in result.notes:
        note(text)
    sys.exit(EXIT_FOUND if result.changes else EXIT_OK)

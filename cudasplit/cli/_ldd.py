"""``cudasplit ldd``: the loader view of split output (see :func:`cudasplit.ldd`)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from .. import DEFAULT_DRIVER_LINK, CudasplitError
from ._terminal import EXIT_OK, fail

if TYPE_CHECKING:
    from .. import LoadView

EXIT_FLAGGED = 1
# A driver library missing on this machine alone is no error (driver-not-found).
_BAD = {"not-found", "stub-shadows-driver", "stub-reachable"}


@click.command("ldd")
@click.argument("path", type=click.Path(exists=True))
@click.option("--driver-link", metavar="DIR", help=f"Where the driver link "
              f"({DEFAULT_DRIVER_LINK}) is on the machine to simulate.")
@click.option("--cuda-compat", metavar="FROM=DIR", help="The cuda_compat dir named in "
              "RUNPATHs, and where it is here.")
@click.option("--map", "maps", multiple=True, metavar="FROM=DIR",
              help="Read RUNPATH entries below FROM from DIR instead (repeatable).")
@click.option("--interpreter", metavar="PATH", help="Loader to simulate (default: each "
              "file's PT_INTERP); its directory is searched for glibc and system libraries.")
@click.option("--ld-library-path", metavar="DIRS", help="Simulate LD_LIBRARY_PATH.")
@click.option("--no-system", is_flag=True, help="Do not search the default directories.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def ldd_command(path: str, driver_link: str | None, cuda_compat: str | None,
                maps: tuple[str, ...], interpreter: str | None, ld_library_path: str | None,
                no_system: bool, as_json: bool) -> None:
    """For every ELF file in PATH (a file or a split directory): which file each DT_NEEDED
    and each detected dlopen target would load. Exit 1 when a name loads nothing or a stub
    would shadow the driver (a missing driver library alone is not an error)."""
    # A lazy public name (``cudasplit._LAZY``): loaded only when this command runs.
    from .. import ldd

    pairs = [_pair(m, "--map") for m in maps]
    if cuda_compat:
        pairs.append(_pair(cuda_compat, "--cuda-compat"))
    try:
        views = ldd(path, maps=pairs, driver_link=driver_link, interpreter=interpreter,
                    ld_library_path=[p for p in (ld_library_path or "").split(":") if p],
                    system=not no_system)
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps([v.as_dict() for v in views], indent=2))
    else:
        for one in views:
            _print(one)
    flagged = any(set(v.flags) & _BAD or v.error for v in views)
    sys.exit(EXIT_FLAGGED if flagged else EXIT_OK)


def _pair(value: str, option: str) -> tuple[str, str]:
    old, sep, new = value.partition("=")
    if not sep or not old.startswith("/") or not new:
        raise click.BadParameter(f"{value!r}: expected /FROM=DIR", param_hint=option)
    return old, new


def _print(one: LoadView) -> None:
    click.echo(f"{one.path}" + (f"  [interpreter {one.interpreter}]" if one.interpreter else ""))
    if one.error:
        click.echo(f"    error: {one.error}")
    for label, resolutions in (("", one.needed), ("dlopen ", one.dlopen)):
        for r in resolutions:
            where = r.path if r.path else "not found"
            flag = f"  !{r.flag}" if r.flag else ""
            click.echo(f"    {label}{r.name} => {where} ({r.via}){flag}")
    if "stub-reachable" in one.flags:
        click.echo("    !stub-reachable: a directory it searches holds a driver library's stub "
                   "(lib/libcuda.so -> stubs/..., NixOS/nixpkgs#293320)")

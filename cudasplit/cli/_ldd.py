"""``cudasplit ldd``: the loader view of split output (see :func:`cudasplit.outputs.ldd`)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from .. import DEFAULT_DRIVER_LINK, CudasplitError
from ._terminal import EXIT_OK, fail
from ._text import data, say

if TYPE_CHECKING:
    from ..guards import Ambiguity, DlopenAudit
    from ..outputs import LoadView

EXIT_FLAGGED = 1
LDD_SCHEMA = 1  # the "schema" of --json (cudasplit/schemas/ldd.json)
# A driver library missing on this machine (driver-not-found) and a dlopen target that loads
# nothing (optional) are listed, not errors: only what stops a file from loading is.
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
@click.option("--strict", is_flag=True, help="An ambiguous RUNPATH (two directories holding "
              "different libraries of one name) is an error (exit 1), not a warning.")
@click.option("--needed-only", is_flag=True, help="Judge only DT_NEEDED names and stubs. "
              "That is the default now that a dlopen target loading nothing is optional, not "
              "an error; kept so scripts keep working.")
@click.option("--inputs", "inputs", multiple=True, metavar="DIRS",
              help="The consumer's library directories (colon-separated, repeatable): for "
              "each CUDA library a file dlopens that would load nothing, say which of them "
              "the consumer-guards hook would append to its RUNPATH.")
def ldd_command(path: str, driver_link: str | None, cuda_compat: str | None,
                maps: tuple[str, ...], interpreter: str | None, ld_library_path: str | None,
                no_system: bool, as_json: bool, strict: bool, needed_only: bool,
                inputs: tuple[str, ...]) -> None:
    """For every ELF file in PATH (a file or a split directory): which file each DT_NEEDED
    and each detected dlopen target would load. Exit 1 when a DT_NEEDED name loads nothing or
    a stub would shadow the driver. A driver library this machine lacks (!driver-not-found)
    and a dlopen target that loads nothing (!optional: the library copes, or its consumer
    provides it) are listed, not errors.

    Also, for any ELF file (a consumer's too): ambiguous RUNPATHs (warnings; errors with
    --strict) and the CUDA libraries each file dlopens by name, with what the consumer-guards
    hook would append (--inputs)."""
    # Lazy public names (``cudasplit._HOMES``): loaded only when this command runs.
    from ..guards import ambiguous_runpaths, dlopen_audit
    from ..outputs import ldd

    pairs = [_pair(m, "--map") for m in maps]
    if cuda_compat:
        pairs.append(_pair(cuda_compat, "--cuda-compat"))
    try:
        views = ldd(path, maps=pairs, driver_link=driver_link, interpreter=interpreter,
                    ld_library_path=[p for p in (ld_library_path or "").split(":") if p],
                    system=not no_system)
        ambiguous = ambiguous_runpaths(path, maps=pairs, driver_link=driver_link)
        audit = dlopen_audit(path, inputs=[d for v in inputs for d in v.split(":") if d],
                             views=views)
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        data(json.dumps({"schema": LDD_SCHEMA,
                               "files": [_guarded(v.as_dict(), ambiguous, audit) for v in views]},
                              indent=2))
    else:
        for one in views:
            _print(one)
        _print_guards(ambiguous, audit, strict)
    flagged = any(set(_judged(v, needed_only)) & _BAD or v.error for v in views)
    sys.exit(EXIT_FLAGGED if flagged or (strict and ambiguous) else EXIT_OK)


def _judged(one: LoadView, needed_only: bool) -> tuple[str, ...]:
    """The flags that decide the exit status: all, or (``--needed-only``) those of the
    DT_NEEDED names and the stub flags."""
    if not needed_only:
        return one.flags
    return tuple({r.flag for r in one.needed if r.flag}
                 | (set(one.flags) & {"stub-shadows-driver", "stub-reachable"}))


def _guarded(view: dict[str, Any], ambiguous: list[Ambiguity], audit: list[DlopenAudit]
             ) -> dict[str, Any]:
    """One file's JSON with its guards: ``ambiguous`` and ``dlopen_audit`` entries."""
    mine = view["path"]
    return {**view, "ambiguous": [a.as_dict() for a in ambiguous if a.file == mine],
            "dlopen_audit": [a.as_dict() for a in audit if a.file == mine]}


def _print_guards(ambiguous: list[Ambiguity], audit: list[DlopenAudit], strict: bool) -> None:
    label = "error" if strict else "warning"
    for one in ambiguous:
        say(f"{label}: {one}")
    cuda = [a for a in audit if a.loads is None]
    if audit:
        say(f"CUDA libraries loaded by name or left unresolved: {len(audit)}, "
                   f"{len(cuda)} would load nothing")
    for item in cuda:
        say(f"    {item}")


def _pair(value: str, option: str) -> tuple[str, str]:
    old, sep, new = value.partition("=")
    if not sep or not old.startswith("/") or not new:
        raise click.BadParameter(f"{value!r}: expected /FROM=DIR", param_hint=option)
    return old, new


def _print(one: LoadView) -> None:
    say(f"{one.path}" + (f"  [interpreter {one.interpreter}]" if one.interpreter else ""))
    if one.error:
        say(f"    error: {one.error}")
    for label, resolutions in (("", one.needed), ("dlopen ", one.dlopen)):
        for r in resolutions:
            where = r.path if r.path else "not found"
            flag = f"  !{r.flag}" if r.flag else ""
            say(f"    {label}{r.name} => {where} ({r.via}){flag}")
    if "stub-reachable" in one.flags:
        say("    !stub-reachable: a directory it searches holds a driver library's stub "
                   "(lib/libcuda.so -> stubs/..., NixOS/nixpkgs#293320)")

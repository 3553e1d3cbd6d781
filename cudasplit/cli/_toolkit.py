"""Command ``toolkit``: one toolkit prefix over split outputs
(:func:`cudasplit.outputs.toolkit_view`)."""

from __future__ import annotations

import json

import click

from .. import CudasplitError
from ._terminal import fail
from ._text import data, say


@click.command("toolkit")
@click.argument("split_dirs", nargs=-1, type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--output-dir", "dest", required=True, type=click.Path(),
              help="The prefix to write (CUDAToolkit_ROOT): bin/, nvvm/, include, lib64, "
              "targets/<dir>/{include,lib}, as symlinks into the outputs.")
@click.option("--arm-target", type=click.Choice(["sbsa-linux", "aarch64-linux"]),
              default="sbsa-linux", show_default=True,
              help="targets/ dir of AArch64 packages (aarch64-linux: Jetson's L4T builds).")
@click.option("--outputs-of", "packages", multiple=True, metavar="DIR[:DIR...]",
              help="One package's output roots, ':'-separated (Nix store paths); repeatable.")
@click.option("--overwrite", is_flag=True, help="Replace an existing prefix.")
@click.option("--dry-run", is_flag=True, help="Plan only, write nothing (--json lists every link).")
@click.option("--json", "as_json", is_flag=True, help="Print the view as JSON.")
def toolkit_command(split_dirs: tuple[str, ...], dest: str, arm_target: str,
                    packages: tuple[str, ...], overwrite: bool, dry_run: bool,
                    as_json: bool) -> None:
    """Lay out one CUDA toolkit prefix in NVIDIA's layout over SPLIT_DIRS (each what
    ``split -o`` wrote). Its bin/nvcc.profile is NVIDIA's: nvcc picks targets/sbsa-linux when
    -ccbin is an aarch64 compiler. Two outputs giving one path different bytes: exit 2."""
    # A lazy public name (``cudasplit._HOMES``): loaded only when this command runs.
    from ..outputs import toolkit_view

    if not split_dirs and not packages:
        raise click.UsageError("give SPLIT_DIRS or --outputs-of")
    groups = [[p for p in group.split(":") if p] for group in packages]
    try:
        view = toolkit_view(split_dirs, dest, packages=groups, arm_target=arm_target,
                            overwrite=overwrite, dry_run=dry_run)
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        data(json.dumps(view.as_dict(), indent=2))
        return
    verb = "would link" if dry_run else "linked"
    say(f"{view.root}: {verb} {len(view.links)} entries; host {view.host}; "
               f"targets {', '.join(view.targets)}")
    for path in view.written:
        say(f"  wrote {path} (NVIDIA's, $(_TARGET_DIR_) kept)")

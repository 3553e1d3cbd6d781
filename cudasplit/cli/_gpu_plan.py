"""Command ``gpu-plan``: the GPU code each library would keep for the GPUs named (a plan only)."""

from __future__ import annotations

import json

import click

from .. import CudasplitError
from ..elf import gpu_prune_plan
from ._optgroups import jobs_option
from ._terminal import fail, status_line
from ._text import data, say


@click.command("gpu-plan")
@click.argument("source", type=click.Path(exists=True))
@click.option("--gpu-archs", required=True, metavar="CAPS",
              help="Compute capabilities to keep code for: '8.0 9.0', '8.0;9.0' (Nixpkgs' "
              "cudaCapabilities), 'sm_90a'.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@jobs_option("decoder threads for a tarball")
def gpu_plan_command(source: str, gpu_archs: str, as_json: bool, jobs: int | None) -> None:
    """Say which GPU code each library of SOURCE would keep for the GPUs named, and the
    bytes the rest takes. A plan only: NVIDIA's files are never changed.

    SOURCE: a tarball, an unpacked tree, a split directory or one library. Per fatbinary
    container and GPU: the highest SASS that runs there (same major, minor not above; 'a'
    builds on that GPU only, 'f' within the family), else the highest PTX the driver can
    compile for it.
    """
    try:
        with status_line() as status:
            plan = gpu_prune_plan(source, gpu_archs, jobs=jobs, progress=status)
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        data(json.dumps(plan.as_dict(), indent=2))
        return
    for line in plan.text_lines():
        say(line)

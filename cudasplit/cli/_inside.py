"""Commands about what files carry: ``gpu-plan`` (a report-only prune plan) and ``sbom``."""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from .. import CudasplitError, gpu_prune_plan, sbom
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


@click.command("sbom")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--manifest", type=click.Path(exists=True, dir_okay=False),
              help="NVIDIA's redistrib_*.json: an SBOM of the release, SOURCES being the "
              "directory of its tarballs.")
@click.option("--platform", default="linux-x86_64", show_default=True,
              help="The platform taken from --manifest.")
@click.option("--name", help="What the SBOM describes (default: the manifest's or first "
              "source's file name).")
@click.option("--licence", help="Licence name for packages no manifest names one for.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True),
              help="Write the SBOM to this file instead of standard output.")
@jobs_option("decoder threads; the sources are read one after another")
def sbom_command(sources: Sequence[str], manifest: str | None, platform: str,
                 name: str | None, licence: str | None, output: str | None,
                 jobs: int | None) -> None:
    """Write a CycloneDX 1.6 SBOM of tarballs, split directories or a release.

    Every file with its sha256, size, package, output and licence, nested in its package;
    GPU architectures and glibc floors as cudasplit:* properties. The same input gives the
    same bytes (SOURCE_DATE_EPOCH sets the timestamp).
    """
    try:
        text = sbom(list(sources), manifest=manifest, platform=platform, name=name,
                    licence=licence, jobs=jobs)
    except CudasplitError as exc:
        fail(exc)
    if output is None:
        data(text, nl=False)
        return
    with open(output, "w", encoding="utf-8") as fh:
        fh.write(text)

"""Command ``sbom``: a CycloneDX or SPDX bill of materials."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import click

from .. import CudasplitError, OptionsError, OutputError
from ..sbom import sbom_documents
from ._optgroups import jobs_option
from ._terminal import beating, fail, setup_logging, status_line
from ._text import data

FORMAT_OF_NAME = ((".spdx.json", "spdx"), (".cdx.json", "cyclonedx"))


@click.command("sbom")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--manifest", type=click.Path(exists=True, dir_okay=False),
              help="NVIDIA's redistrib_*.json: an SBOM of the release, SOURCES being the "
              "directory of its tarballs. Each tarball is checked against it (size, then "
              "sha256) and one it does not vouch for stops the run; tarballs it names but "
              "the directory lacks are left out with a warning.")
@click.option("--platform", "platforms", multiple=True, metavar="NAME",
              help="With --manifest: the platforms taken (linux-x86_64, linux-sbsa, ...; "
              "linux, all, host). Repeatable; default: linux-x86_64.")
@click.option("--package", "package_names", multiple=True, metavar="PNAME",
              help="With --manifest: only these packages (repeatable; their tarballs must be "
              "there). Without: the package of the one SOURCE where its name does not say "
              "it, PNAME or <pname>-<platform>-<version> (a renamed tree, a split directory "
              "without its report).")
@click.option("--strip-components", type=click.IntRange(min=0), metavar="N",
              help="Drop N leading directories of the one SOURCE's members (a tarball "
              "without an NVIDIA top directory; needs --package).")
@click.option("--name", help="What the SBOM describes (default: the manifest's product, or "
              "the names of the packages).")
@click.option("--licence", help="Licence name for packages no manifest names one for.")
@click.option("--base-url", default=None, metavar="URL",
              help="Prefix of the manifest's relative paths in the archives' URLs (default: "
              "NVIDIA's redist URL).")
@click.option("--format", "fmt", type=click.Choice(["cyclonedx", "spdx"]),
              default="cyclonedx", show_default=True,
              help="CycloneDX 1.6 or SPDX 2.3 JSON, for standard output and the -o files "
              "whose names do not say it.")
@click.option("--output", "-o", "outputs", multiple=True, type=click.Path(dir_okay=False),
              metavar="FILE",
              help="Write the SBOM here instead of standard output; repeatable. A name "
              "ending in .spdx.json gets SPDX, one in .cdx.json CycloneDX, any other "
              "--format. Both formats come from one read.")
@click.option("-q", "--quiet", is_flag=True, help="No status line and no warnings; errors "
              "only.")
@jobs_option("decoder threads; the sources are read one after another")
def sbom_command(sources: Sequence[str], manifest: str | None, platforms: tuple[str, ...],
                 package_names: tuple[str, ...], strip_components: int | None,
                 name: str | None, licence: str | None, base_url: str | None, fmt: str,
                 outputs: tuple[str, ...], quiet: bool, jobs: int | None) -> None:
    """Write a bill of materials (CycloneDX 1.6 or SPDX 2.3) of tarballs, split directories
    or a release.

    Every package with its archive (sha256, URL, size), purl, supplier, licence and the
    packages it depends on (DT_NEEDED and dlopen providers); every file with its hashes,
    size and output, nested in its package; GPU architectures and glibc floors as
    cudasplit:* properties (CycloneDX). The same input gives the same bytes
    (SOURCE_DATE_EPOCH sets the timestamp).
    """
    setup_logging(quiet, verbose=False)   # the tarball-missing warnings
    targets = {path: _format_of(path, fmt) for path in outputs}
    try:
        _apart(list(targets), [*sources, *([manifest] if manifest else [])])
        with status_line("package", quiet=quiet) as status, beating(status):
            documents = sbom_documents(
                list(sources), manifest=manifest, platform=platforms or None,
                packages=package_names if manifest else None,
                package=_one_package(package_names, manifest),
                strip_components=strip_components, name=name, licence=licence,
                base_url=base_url, formats=sorted(set(targets.values()) or {fmt}),
                jobs=jobs, progress=status)
        for path, kind in targets.items():
            _write_atomically(Path(path), documents[kind])
    except CudasplitError as exc:
        fail(exc)
    if not targets:
        data(documents[fmt], nl=False)


def _format_of(path: str, fmt: str) -> str:
    return next((kind for suffix, kind in FORMAT_OF_NAME if path.endswith(suffix)), fmt)


def _one_package(names: tuple[str, ...], manifest: str | None) -> str | None:
    """``--package`` without a manifest: the one source's package (a single value)."""
    if manifest is not None or not names:
        return None
    if len(names) > 1:
        raise OptionsError(f"--package names the package of the one SOURCE (given "
                           f"{len(names)} times); several choose from --manifest")
    return names[0]


def _apart(outputs: list[str], inputs: list[str]) -> None:
    """The one -o rule: an output file may not be, or be inside, an input (a tarball, the
    manifest, the tarball or split directory it describes)."""
    for out in outputs:
        real = Path(os.path.realpath(out))
        for source in inputs:
            given = Path(os.path.realpath(source))
            if real == given or given in real.parents:
                raise OutputError(f"{out}: this output is or is inside the input {source}; "
                                  "nothing was written")


def _write_atomically(path: Path, text: str) -> None:
    """Whole or not at all: a temporary file beside it, renamed into place."""
    tmp = path.with_name(f".{path.name}.cudasplit-tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc

"""Commands ``nixify`` and ``nixify-sets``: Nix expressions, and package sets, from manifests."""

from __future__ import annotations

from pathlib import Path

import click

from .. import CudasplitError
from ._optgroups import jobs_option
from ._terminal import fail, note, status_line, warn
from ._text import say


@click.command("nixify")
@click.argument("manifest", type=click.Path(dir_okay=False, exists=True))
@click.option("--tarballs", "tarball_dir", required=True,
              type=click.Path(file_okay=False, exists=True),
              help="Directory holding the tarballs (flat, or NVIDIA's relative paths).")
@click.option("-o", "--output-dir", required=True, type=click.Path(file_okay=False),
              help="Write <pname>.nix per package and default.nix here.")
@click.option("--platform", "platforms", multiple=True, metavar="NAME",
              help="linux-x86_64, linux-sbsa, linux-ppc64le (repeatable; default: every "
              "linux platform whose tarball is present).")
@click.option("--package", "packages", multiple=True, metavar="PNAME",
              help="Only these packages (repeatable; default: all).")
@click.option("--base-url", default=None, metavar="URL",
              help="Prefix of the manifest's relative paths (default: NVIDIA's redist URL).")
@jobs_option("decoder threads; the tarballs are read one after another")
@click.option("--toolkit", is_flag=True, help="Also cudaToolkit.nix: one toolkit prefix "
              "(NVIDIA's layout) over every package, for CUDAToolkit_ROOT.")
def nixify_command(manifest: str, tarball_dir: str, output_dir: str,
                   platforms: tuple[str, ...], packages: tuple[str, ...],
                   base_url: str | None, jobs: int | None, toolkit: bool) -> None:
    """One Nix expression per package of MANIFEST (redistrib_*.json), plus default.nix."""
    # A lazy public name (``cudasplit._HOMES``): loaded only when this command runs.
    from ..nixify import nixify_manifest

    try:
        with status_line("tarball") as status:
            result = nixify_manifest(manifest, tarball_dir, output_dir, platforms=platforms,
                                     packages=packages, base_url=base_url, jobs=jobs,
                                     progress=status, toolkit=toolkit)
    except CudasplitError as exc:
        fail(exc)
    for plan in result.packages:
        outputs = "; ".join(f"{p.platform}: {','.join(p.outputs)}" for p in plan.platforms)
        inputs = ", ".join([*plan.build_inputs, *plan.external]) or "-"
        say(f"{plan.pname:24} {plan.version:14} outputs {outputs}  buildInputs {inputs}")
        if plan.missing:
            warn(f"{plan.pname}: no tarball for: {', '.join(plan.missing)}", "tarball-missing")
        if plan.unresolved:
            warn(f"{plan.pname}: needed, provided by nothing here: "
                 f"{', '.join(plan.unresolved)}", "needed-unresolved")
        if plan.outside:
            warn(f"{plan.pname}: the package table names packages not in the manifest: "
                 f"{', '.join(plan.outside)}", "package-not-in-manifest")
    say(f"wrote {len(result.files)} files to {Path(result.output_dir)}", err=True)


@click.command("nixify-sets")
@click.argument("manifests", nargs=-1, required=True, type=click.Path(exists=True,
                                                                     dir_okay=False))
@click.option("-o", "--output-dir", required=True, type=click.Path(file_okay=False),
              help="Write <set>.nix per CUDA release, mk-redist.nix and default.nix here.")
@click.option("--base-url", default=None, metavar="URL",
              help="Prefix of every manifest's relative paths, a mirror (default: NVIDIA's URL "
              "of each redist).")
def nixify_sets_command(manifests: tuple[str, ...], output_dir: str,
                        base_url: str | None) -> None:
    """One package set per CUDA release (cudaPackages_X_Y) from MANIFESTS alone: CUDA
    redistrib manifests plus other redists' (cuDNN, cuSPARSELt, TensorRT ...), no tarballs
    needed. Give several versions of a redist: cuDNN, cuSPARSELt and TensorRT take, per set,
    the version Nixpkgs pins (Jetson, other aarch64-linux, x86_64-linux); a pinned version
    not given is warned about and broken in that set."""
    # A lazy public name (``cudasplit._HOMES``): loaded only when this command runs.
    from ..nixify import nixify_sets

    try:
        result = nixify_sets(list(manifests), output_dir, base_url=base_url)
    except CudasplitError as exc:
        fail(exc)
    for pset in result.sets:
        # Pinned versions not given are the warnings below, not "broken" here.
        broken = list(dict.fromkeys(p.attr for p in pset.packages
                                    if p.broken and p.release is not None))
        absent = len({p.attr for p in pset.packages if p.release is None})
        others = len(pset.manifests) - 1
        say(f"{pset.name:18} {len({p.attr for p in pset.packages}):3} packages "
            f"({absent} without a release here) from {pset.manifests[0]}"
            + (f" and {others} other manifest{'s' if others != 1 else ''}" if others else "")
            + (f"; broken: {', '.join(broken)}" if broken else ""))
        if pset.pins:
            say("  pins: " + "; ".join(
                f"{product} {pin.x86_64}" if pin.uniform else
                f"{product} {pin.x86_64} (other aarch64-linux {pin.aarch64}, Jetson "
                f"{pin.jetson})" for product, pin in pset.pins))
        for warning in pset.warnings:
            warn(warning, "pin-missing")
    used = {name for pset in result.sets for name in pset.manifests}
    for manifest in manifests:
        if Path(manifest).name not in used:
            note(f"no set takes {manifest}")
    say(f"wrote {len(result.files)} files to {Path(result.output_dir)}", err=True)

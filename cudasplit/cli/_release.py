"""Release-level commands: ``closure``, ``diff`` and ``nixify`` (thin click layer).

The decisions live in :func:`cudasplit.closure_of`, :func:`cudasplit.diff_releases` and
:func:`cudasplit.nixify_manifest`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import CudasplitError
from ._optgroups import jobs_option
from ._terminal import EXIT_OK, closure_warnings, fail, note, status_line, warn
from ._text import data, say

EXIT_FOUND = 1  # closure --strict found warnings; diff found a change


# text for a person, json for a program, dot (Graphviz) and mermaid to draw.
FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json", "dot", "mermaid"]),
                      default="text", show_default=True,
                      help="Output format: dot (Graphviz) or mermaid draw the outputs as a "
                      "graph.")


@click.command("closure")
@click.argument("split_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--root", "roots", multiple=True, metavar="OUTPUT=PATH",
              help="Take the outputs from here instead of SPLIT_DIR/<output> (e.g. a Nix "
              "build's store paths); repeatable. SPLIT_DIR is then ignored.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (--format json).")
@FORMAT
@click.option("--strict", is_flag=True, help="Exit 1 when there are warnings.")
@click.option("--consumer", is_flag=True, help="SPLIT_DIR is a consumer instead: a built store "
              "path or a directory. Walk its run-time closure and exit 1 when it holds a "
              "forbidden output (with the chain of files naming store paths) or is over "
              "--max-bytes.")
@click.option("--forbid", "forbid", multiple=True, metavar="OUTPUT",
              help="With --consumer: an output the closure may never hold (static, stubs, "
              "compiler, headers or any output name; repeatable; default: static, stubs, "
              "compiler, headers). --forbid none forbids nothing.")
@click.option("--max-bytes", type=click.IntRange(min=0), metavar="N",
              help="With --consumer: the closure's byte budget.")
@click.option("--store-dir", default="/nix/store", show_default=True, metavar="DIR",
              help="With --consumer: the Nix store.")
def closure_command(split_dir: str, roots: tuple[str, ...], as_json: bool, fmt: str, strict: bool,
                    consumer: bool, forbid: tuple[str, ...], max_bytes: int | None,
                    store_dir: str) -> None:
    """Bytes per output, which outputs each output references, and what lib/out drag along.

    SPLIT_DIR is what `split -o DIR` wrote (DIR/<output>/...). With --consumer: a consumer's
    closure budget (see --forbid, --max-bytes).
    """
    if consumer:
        _consumer_budget(split_dir, forbid, max_bytes, store_dir, as_json)
    # A lazy public name (``cudasplit._LAZY``): loaded only when this command runs.
    from .. import closure_of

    try:
        with status_line("file") as status:
            report = closure_of(split_dir, roots=_roots(roots) if roots else None,
                                progress=status)
    except CudasplitError as exc:
        fail(exc)
    fmt = "json" if as_json else fmt
    if fmt == "json":
        data(report.to_json(), nl=False)
    elif fmt in ("dot", "mermaid"):
        say(report.draw(fmt).removesuffix("\n"))
    else:
        for line in report.text_lines():
            say(line)
        closure_warnings(report)
    sys.exit(EXIT_FOUND if strict and report.warnings else EXIT_OK)



def _consumer_budget(path: str, forbid: tuple[str, ...], max_bytes: int | None,
                     store_dir: str, as_json: bool) -> None:
    # Lazy public names (``cudasplit._LAZY``): loaded only when this option is used.
    import json

    from .. import DEFAULT_FORBIDDEN_OUTPUTS, closure_budget

    words = tuple(w for w in forbid if w != "none") if forbid else DEFAULT_FORBIDDEN_OUTPUTS
    try:
        report = closure_budget(path, forbid=words, max_bytes=max_bytes, store_dir=store_dir)
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        data(json.dumps(report.as_dict(), indent=2))
    else:
        for line in report.text_lines():
            say(line)
    sys.exit(EXIT_FOUND if report.violations else EXIT_OK)


def _roots(values: tuple[str, ...]) -> dict[str, str]:
    roots = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path.startswith("/"):
            raise click.BadParameter(f"{value!r}: expected OUTPUT=/absolute/path",
                                     param_hint="--root")
        roots[name] = path.rstrip("/")
    return roots


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
    # A lazy public name (``cudasplit._LAZY``): loaded only when this command runs.
    from .. import nixify_manifest

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
    # A lazy public name (``cudasplit._LAZY``): loaded only when this command runs.
    from .. import nixify_sets

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
@FORMAT
@jobs_option("decoder threads; the tarballs are read one after another")
def diff_command(old: str, new: str, tarball_dir: str | None, old_tarballs: str | None,
                 new_tarballs: str | None, platform: str, members: bool, as_json: bool,
                 fmt: str, jobs: int | None) -> None:
    """Compare two releases: tarballs, split directories, or manifests (with --tarballs their
    tarballs are split and compared; without, the manifests alone: packages added, removed and
    renamed, versions and platforms).

    Exit 0 when they place the same members the same way, 1 when something changed.
    """
    # A lazy public name (``cudasplit._LAZY``): loaded only when this command runs.
    from .. import diff_releases

    try:
        with status_line() as status:
            result = diff_releases(old, new, tarball_dir=tarball_dir,
                                   old_tarballs=old_tarballs, new_tarballs=new_tarballs,
                                   platform=platform, jobs=jobs, progress=status)
    except CudasplitError as exc:
        fail(exc)
    fmt = "json" if as_json else fmt
    if fmt == "json":
        data(result.to_json(), nl=False)
    elif fmt in ("dot", "mermaid"):
        say(result.draw(fmt).removesuffix("\n"))
    else:
        for line in result.text_lines(members=members):
            say(line)
    for text in result.notes:
        note(text)
    sys.exit(EXIT_FOUND if result.changes else EXIT_OK)

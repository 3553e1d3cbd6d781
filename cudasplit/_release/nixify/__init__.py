"""Nix expressions for a whole release, from its manifest and its tarballs.

For each package of ``redistrib_*.json`` whose tarballs are at hand, one ``<pname>.nix``:

* ``outputs`` per platform: those the split fills from that tarball's members: the package
  table's declared ``outputs`` (the rest falls back) less any this tarball leaves empty;
* ``buildInputs``: the packages of the release that provide a ``DT_NEEDED`` name or a
  ``dlopen`` target (where :mod:`cudasplit._elf.read.dlopen` is present) of one of its ELF files
  (the soname graph), plus those its table names in ``runpath_append`` (``@cuda_nvrtc@``), plus
  the Nixpkgs attributes of well-known outside libraries (``libstdc++.so.6`` ->
  ``stdenv.cc.cc.lib``: :data:`EXTERNAL_PROVIDERS`); other names nothing provides are written
  as a comment (the strict split fails on them until an input or ``--ignore-missing`` is
  added);
* the cudasplit hook's variables: ``cudasplitLibraryPath`` (the providers' ``lib``),
  ``cudasplitPackageRoots`` (each package the table appends to RUNPATH), ``cudasplitCudaVersion``
  (the release's X.Y, for the table's gates), ``cudasplitStrict``;
* ``propagatedBuildInputs``: Nixpkgs' library.nix edges within the release
  (:data:`cudasplit._release.nixify.plan.PROPAGATES`);
* ``src`` from the manifest's ``relative_path`` and ``sha256``; ``meta.platforms``.

Plus ``default.nix``, a function of ``callPackage`` returning every package, so an overlay or a
package scope (``lib.makeScope``) can take it. Everything is sorted and laid out by one writer,
so a release bump is a readable diff. Tarballs are read once each (the classification) plus
once for the ELF dynamic sections. A package key the generated Nix uses for something else
(``default``, ``lib``, ...: :mod:`cudasplit._release.nixify.names`) is refused.

Deciding each expression is :mod:`cudasplit._release.nixify.plan`, writing it
:mod:`cudasplit._release.nixify.render`; this module writes the files. The package sets of
``nixify-sets`` (from manifests alone): choosing what each set takes is
:mod:`cudasplit._release.nixify.choose`, making its packages
:mod:`cudasplit._release.nixify.setsplan`, writing them :mod:`cudasplit._release.nixify.setsrender`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cudasplit._release.manifest import Manifest
from cudasplit._release.nixify.names import RESERVED
from cudasplit._release.nixify.nixlang import write_atomically
from cudasplit._release.nixify.plan import (
    DEFAULT_BASE_URL,
    EXTERNAL_PROVIDERS,
    PROPAGATES,
    PackagePlan,
    PlatformPlan,
    cuda_version_of,
    nix_ident,
    package_roots,
    plan_release,
    table_needs,
)
from cudasplit._release.nixify.render import render_default, render_package
from cudasplit._release.nixify.setsplan import PackageSet, SetPackage, SetsResult, plan_sets
from cudasplit._release.nixify.setsrender import render_set, write_sets
from cudasplit._release.nixify.tables import Assertion, Pin
from cudasplit._release.nixify.toolkit import TOOLKIT_ATTR, compiler_packages, render_toolkit
from cudasplit._run import ProgressCallback
from cudasplit.errors import ManifestError

__all__ = [
    "DEFAULT_BASE_URL",
    "EXTERNAL_PROVIDERS",
    "PROPAGATES",
    "RESERVED",
    "Assertion",
    "NixifyResult",
    "PackagePlan",
    "PackageSet",
    "Pin",
    "PlatformPlan",
    "SetPackage",
    "SetsResult",
    "compiler_packages",
    "cuda_version_of",
    "nixify",
    "package_roots",
    "plan_release",
    "plan_sets",
    "render_package",
    "render_set",
    "table_needs",
    "write_atomically",
    "write_sets",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class NixifyResult:
    """What :func:`nixify_manifest` wrote.

    Attributes:
        output_dir: where.
        packages: each package's plan (what its expression says).
        files: the files written.

    Raises:
        Nothing: a value.
    """

    output_dir: str
    packages: tuple[PackagePlan, ...]
    files: tuple[str, ...] = field(default=())


def nixify(manifest: Manifest, tarball_dir: str | os.PathLike[str],
           output_dir: str | os.PathLike[str], *, platforms: Iterable[str] | None = None,
           packages: Iterable[str] | None = None, base_url: str = DEFAULT_BASE_URL,
           jobs: int = 1, progress: ProgressCallback | None = None,
           toolkit: bool = False) -> NixifyResult:
    """Write ``<pname>.nix`` per package and ``default.nix`` into ``output_dir``; with
    ``toolkit``, also ``cudaToolkit.nix`` (one prefix over them all: ``toolkit``)."""
    plans = plan_release(manifest, tarball_dir, platforms=platforms, packages=packages,
                         base_url=base_url, jobs=jobs, progress=progress)
    if not plans:
        raise ManifestError(f"{manifest.source}: none of its tarballs is in {tarball_dir}")
    name = Path(manifest.source).name
    texts = {f"{nix_ident(p.pname)}.nix": render_package(p, name) for p in plans}
    texts["default.nix"] = render_default(plans, name)
    if toolkit:
        texts[f"{TOOLKIT_ATTR}.nix"] = render_toolkit(plans, name, manifest.release_label)
        texts["default.nix"] = _with_toolkit(texts["default.nix"])
    out = Path(output_dir)
    write_atomically(out, texts)
    return NixifyResult(output_dir=str(out), packages=plans, files=tuple(sorted(texts)))


def _with_toolkit(default: str) -> str:
    """``default.nix`` with the toolkit prefix as one more attribute (before the closing)."""
    head, _, tail = default.rpartition("}\n")
    return f"{head}  {TOOLKIT_ATTR} = callPackage ./{TOOLKIT_ATTR}.nix {{ }};\n}}\n{tail}"

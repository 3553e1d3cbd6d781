"""What each package's Nix expression says, decided from the release's manifest and tarballs.

A :class:`PackagePlan` per package: the outputs each platform's tarball fills, the build inputs
the soname graph and the package table call for, and the hook's package roots. Reading is
:func:`plan_release`'s job; :mod:`cudasplit._release.nixify.render` writes the plans as Nix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cudasplit._elf.plan import is_glibc_name
from cudasplit._model import OUTPUT_NAMES
from cudasplit._release.manifest import Artifact, Manifest, Package, find_tarball, select_artifacts
from cudasplit._release.nixify.names import package_key
from cudasplit._release.nixify.nixlang import ident
from cudasplit._release.nixify.tables import PROPAGATES, TARGET_PROPAGATES
from cudasplit._release.sonames import PackageLinks, dependencies, provider_index, scan_elf_source
from cudasplit._rulebook import PackageSettings, Where, name_at, package_table
from cudasplit._run import ProgressCallback, Tally
from cudasplit._split.pipeline import SplitOptions
from cudasplit._split.pipeline import split as _split
from cudasplit.errors import ManifestError

__all__ = [
    "DEFAULT_BASE_URL",
    "EXTERNAL_PROVIDERS",
    "NIX_SYSTEMS",
    "PROPAGATES",
    "TARGET_PROPAGATES",
    "PackagePlan",
    "PlatformPlan",
    "check_artifact",
    "cuda_version_of",
    "nix_ident",
    "package_roots",
    "plan_release",
    "table_needs",
]

DEFAULT_BASE_URL = "https://developer.download.nvidia.com/compute/cuda/redist/"
# Redistributable platform -> Nix system. linux-aarch64 (Jetson) shares aarch64-linux with
# linux-sbsa and needs a capability switch Nixpkgs keeps elsewhere: it is left out here.
NIX_SYSTEMS = {"linux-x86_64": "x86_64-linux", "linux-sbsa": "aarch64-linux",
               "linux-ppc64le": "powerpc64le-linux"}
_PLACEHOLDER = re.compile(r"@([A-Za-z0-9_.+-]+)@")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformPlan:
    """One platform's tarball in a package's expression.

    Attributes:
        platform: the NVIDIA platform (``linux-x86_64``).
        url: where the tarball is fetched from.
        sha256: its hash, from the manifest.
        outputs: the outputs the split fills from it.

    Raises:
        Nothing: a value.
    """

    platform: str
    url: str
    sha256: str
    outputs: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PackagePlan:
    """What one package's expression says (everything sorted)."""

    pname: str
    version: str
    description: str
    license: str | None
    platforms: tuple[PlatformPlan, ...]
    build_inputs: tuple[str, ...]
    resolves: dict[str, tuple[str, ...]]  # provider -> the DT_NEEDED names it resolves
    unresolved: tuple[str, ...]  # DT_NEEDED names nothing here provides (glibc's left out)
    dlopened: tuple[str, ...]  # names of ``resolves`` found only as dlopen targets
    package_roots: tuple[tuple[str, str], ...]  # --package-root KEY=${EXPR}: (KEY, EXPR)
    table_inputs: dict[str, str] = field(default_factory=dict)  # pname -> the table key
    outside: tuple[str, ...] = ()  # packages the table names that the manifest lacks
    external: dict[str, tuple[str, ...]] = field(default_factory=dict)  # Nixpkgs expr -> names
    cuda_version: str | None = None  # the release's X.Y: cudasplitCudaVersion
    missing: tuple[str, ...] = ()  # platforms named by the manifest without a tarball here
    propagated: tuple[str, ...] = ()  # packages of the release it propagates (library.nix)
    target_propagated: tuple[str, ...] = ()  # depsTargetTargetPropagated (nvcc -> cudart)


def plan_release(manifest: Manifest, tarball_dir: str | os.PathLike[str], *,
                 platforms: Iterable[str] | None = None, packages: Iterable[str] | None = None,
                 base_url: str = DEFAULT_BASE_URL, jobs: int = 1,
                 progress: ProgressCallback | None = None) -> tuple[PackagePlan, ...]:
    """Read every tarball of the selection and decide each package's expression."""
    chosen = _chosen(manifest, platforms, packages)
    found = {a: find_tarball(a, tarball_dir) for a in chosen}
    cuda = cuda_version_of(manifest)
    read = _read_tarballs(manifest, {a: p for a, p in found.items() if p is not None}, cuda,
                          jobs, progress)
    names = {p.pname for p in manifest.packages}
    plans = []
    for package in manifest.packages:
        arts = [a for a in chosen if a.package == package.pname]
        have = [a for a in arts if a in read.outputs]
        if have:
            plans.append(_plan_package(package, have, [a for a in arts if a not in read.outputs],
                                       read, base_url, names, cuda))
    return tuple(sorted(plans, key=lambda p: p.pname))


def _chosen(manifest: Manifest, platforms: Iterable[str] | None,
            packages: Iterable[str] | None) -> list[Artifact]:
    """The selection's archives of Nix systems (plain ones: nixify writes no cuda_variant),
    their names and paths checked first: they become files, arguments and paths."""
    wanted = None if platforms is None else tuple(platforms)
    chosen = [a for a in select_artifacts(manifest, platforms=wanted or ("linux",),
                                          packages=packages)
              if a.platform in NIX_SYSTEMS and a.cuda_variant is None]
    for artifact in chosen:
        check_artifact(manifest.source, artifact)
    return chosen


@dataclass(frozen=True, slots=True, kw_only=True)
class _Read:
    """What the tarballs said: the outputs each fills and each package's ELF links per
    platform."""

    outputs: Mapping[Artifact, tuple[str, ...]]
    links: Mapping[tuple[str, str], PackageLinks]


def _read_tarballs(manifest: Manifest, found: Mapping[Artifact, Path], cuda: str | None,
                   jobs: int, progress: ProgressCallback | None) -> _Read:
    """Two passes over each tarball (the dry split, the ELF scan); the bytes of both move the
    progress."""
    links: dict[tuple[str, str], PackageLinks] = {}
    outputs: dict[Artifact, tuple[str, ...]] = {}
    tally = Tally(manifest.source, progress)
    for artifact, path in found.items():
        where = Where(manifest.package(artifact.package).version, cuda, artifact.platform)
        meter = tally.meter(artifact.filename)
        outputs[artifact] = _outputs_of(path, where, jobs,
                                        meter.progress() if progress is not None else None)
        links[(artifact.package, artifact.platform)] = PackageLinks(
            artifact.package, scan_elf_source(
                path, jobs=jobs, on_bytes=meter.again() if progress is not None else None))
        meter.finish()
    tally.done()
    return _Read(outputs=outputs, links=links)


def cuda_version_of(manifest: Manifest) -> str | None:
    """The release's CUDA major.minor (``12.9`` for ``redistrib_12.9.1.json``): the package
    table's gates and the setup hook's ``cudasplitCudaVersion``."""
    label = manifest.release_label or ""
    parts = label.split(".")
    if manifest.release_product not in (None, "cuda") or len(parts) < 2:
        return None
    return ".".join(parts[:2]) if all(p.isdigit() for p in parts[:2]) else None


def _outputs_of(path: Path, where: Where, jobs: int,
                progress: ProgressCallback | None = None) -> tuple[str, ...]:
    """The outputs the split fills from this tarball: the package table's where it declares
    them (members of undeclared outputs fall back), less those this tarball leaves empty (a
    declared output that stays empty fails a strict build, as buildRedist's check does)."""
    options = SplitOptions(dry_run=True, patch=False, jobs=jobs, cuda_version=where.cuda_version,
                           platform=where.platform, progress=progress)
    report = _split(path, None, options=options)
    filled = {name for name, rec in report.outputs.items() if rec.files}
    return _ordered({"out", *filled})


def _ordered(names: Iterable[str]) -> tuple[str, ...]:
    """``out`` first (the default output), then the order buildRedist claims files in."""
    return tuple(sorted(set(names), key=lambda n: (OUTPUT_NAMES.index(n)
                                                   if n in OUTPUT_NAMES else 99, n)))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sonames:
    """A package's ELF names against the release: provider -> the names it resolves, the
    names nothing resolves, the dlopen-only names."""

    resolves: Mapping[str, set[str]]
    unresolved: set[str]
    dlopened: set[str]


def _sonames(package: Package, arts: Sequence[Artifact],
             links: Mapping[tuple[str, str], PackageLinks]) -> _Sonames:
    resolves: dict[str, set[str]] = {}
    unresolved: set[str] = set()
    dlopened: set[str] = set()
    for artifact in arts:
        same_platform = [v for (_, plat), v in links.items() if plat == artifact.platform]
        own = links[(package.pname, artifact.platform)]
        deps, left = dependencies(own, provider_index(same_platform))
        for provider, names in deps.items():
            resolves.setdefault(provider, set()).update(names)
        unresolved.update(left)
        dlopened.update(own.dlopened - own.needed)
    return _Sonames(resolves=resolves, unresolved=unresolved, dlopened=dlopened)


def _plan_package(package: Package, arts: Sequence[Artifact], missing: Sequence[Artifact],
                  read: _Read, base_url: str, release: set[str], cuda: str | None
                  ) -> PackagePlan:
    table = package_table(package.pname) or PackageSettings()
    found = _sonames(package, arts, read.links)
    # A package the table names but the manifest lacks cannot be a callPackage argument.
    wanted = table_needs(table, Where(package.version, cuda))
    needs = {k: v for k, v in wanted.items() if k in release and k != package.pname}
    external = _external(found.unresolved)
    external_names = {n for names in external.values() for n in names}
    return PackagePlan(
        pname=package.pname, version=package.version, description=package.name,
        license=package.license,
        platforms=tuple(PlatformPlan(platform=a.platform, url=base_url + a.relative_path,
                                     sha256=a.sha256, outputs=read.outputs[a])
                        for a in sorted(arts, key=_platform_key)),
        build_inputs=tuple(sorted(set(found.resolves) | set(needs))),
        resolves={k: tuple(sorted(v)) for k, v in sorted(found.resolves.items())},
        unresolved=tuple(sorted(n for n in found.unresolved if n not in external_names
                                and not is_glibc_name(n))),
        package_roots=package_roots(table, needs, cuda), table_inputs=needs, external=external,
        outside=tuple(sorted(set(wanted) - set(needs) - {package.pname})), cuda_version=cuda,
        dlopened=tuple(sorted(found.dlopened
                              & {n for v in found.resolves.values() for n in v})),
        missing=tuple(sorted(a.platform for a in missing)),
        propagated=_edges(PROPAGATES, package.pname, release, cuda),
        target_propagated=_edges(TARGET_PROPAGATES, package.pname, release, cuda))


def _edges(table: Mapping[str, tuple[str, ...]], pname: str, release: set[str],
           cuda: str | None) -> tuple[str, ...]:
    """The release's packages ``table`` says ``pname`` propagates (as the release names them)."""
    return tuple(p for p in (name_at(d, cuda) for d in table.get(pname, ()))
                 if p in release and p != pname)


def _platform_key(artifact: Artifact) -> str:
    return artifact.platform


# Libraries CUDA packages need from outside the release, and the Nixpkgs attribute that provides
# them (what Nixpkgs' CUDA packages give autoPatchelf). glibc's names need nothing: the
# toolchain's dynamic linker and libc resolve them. Anything else is listed as unresolved.
EXTERNAL_PROVIDERS = {
    "libgcc_s.so.1": "stdenv.cc.cc.lib",
    "libstdc++.so.6": "stdenv.cc.cc.lib",
    "libz.so.1": "zlib",
}


def _external(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    found: dict[str, set[str]] = {}
    for name in names:
        expr = EXTERNAL_PROVIDERS.get(name)
        if expr is not None:
            found.setdefault(expr, set()).add(name)
    return {expr: tuple(sorted(v)) for expr, v in sorted(found.items())}


def package_roots(table: PackageSettings, needs: Mapping[str, str], cuda: str | None = None,
                  attr: Callable[[str], str] | None = None) -> tuple[tuple[str, str], ...]:
    """What the split needs to know about the packages the table names: ``--package-root``
    keys (``PNAME`` or ``PNAME.OUTPUT``) and the Nix expression of each directory, over the
    attribute ``attr`` gives each package (a package set's: ``cccl`` for ``cuda_cccl``). Names
    are the release's (``cccl`` from CUDA 13.3, :mod:`cudasplit._rulebook.renames`); the split
    finds either."""
    attr = attr or nix_ident
    roots: dict[str, str] = {}
    for pname, key in needs.items():
        name = attr(pname)
        if key in ("runpath_append", "dlopen"):
            roots[pname] = f"lib.getLib {name}"
        elif key == "copy_packages":
            roots[f"{pname}.out"] = f'lib.getOutput "out" {name}'
    # nvcc's headers and libraries are for the platform it compiles for: cross, the target
    # package set's (Nixpkgs' nvcc: depsTargetTargetPropagated); natively the same package.
    for pname in (name_at(p, cuda) for p in table.nvcc_includes):
        if pname in needs:
            roots[f"{pname}.include"] = f'lib.getOutput "include" {_target(attr(pname))}'
    # A .pc file's Cflags name headers of the package's own set (cudart -> crt, cccl).
    for pname in (name_at(p, cuda) for e in table.pkgconfig_edits for p in e.cflags_packages):
        if pname in needs and f"{pname}.include" not in roots:
            roots[f"{pname}.include"] = f'lib.getOutput "include" {attr(pname)}'
    for pname in (name_at(p, cuda) for p in table.nvcc_libraries):
        if pname in needs:
            roots[f"{pname}.lib"] = f"lib.getLib {_target(attr(pname))}"
            for output in ("static", "stubs"):
                roots[f"{pname}.{output}"] = f'lib.getOutput "{output}" {_target(attr(pname))}'
    return tuple(sorted(roots.items()))


def _target(name: str) -> str:
    return f"({name}.__spliced.targetTarget or {name})"


def table_needs(table: PackageSettings, where: Where) -> dict[str, str]:
    """pname -> the package-table key that names it, gated entries only where they apply
    (``dlopen`` gates compare the package's own version, the others ``where``)."""
    needs: dict[str, str] = {}
    for entry in table.runpath_append:
        for match in _PLACEHOLDER.finditer(entry):
            needs.setdefault(match.group(1), "runpath_append")
    for need in table.dlopen:
        if need.applies_to(where.version):
            needs.setdefault(need.package, "dlopen")
    for copy in table.copy_packages:
        if copy.gate.applies(where):
            needs.setdefault(copy.package, "copy_packages")
    for key in ("nvcc_includes", "nvcc_libraries"):
        for name in getattr(table, key):
            needs.setdefault(name_at(name, where.cuda_version), key)
    for edit in table.pkgconfig_edits:  # cudart's Cflags: -I<crt>/include -I<cccl>/include
        if edit.gate.applies(where):
            for name in edit.cflags_packages:
                needs.setdefault(name_at(name, where.cuda_version), "cflags_packages")
    return dict(sorted(needs.items()))


def nix_ident(name: str) -> str:
    """``name`` as a Nix identifier (a ``callPackage`` argument); else a ``ManifestError``."""
    return ident(name)


def check_artifact(source: str, artifact: Artifact) -> None:
    """Refuse, naming the manifest, a package key that cannot name a package (not a Nix
    identifier, or a name the generated Nix gives something else: it becomes an attribute, an
    argument and a file name) and a ``relative_path`` that leaves the download tree
    (absolute, or with ``..``): ``ManifestError``."""
    package_key(artifact.package, source)
    parts = artifact.relative_path.split("/")
    if artifact.relative_path.startswith("/") or ".." in parts or "\0" in artifact.relative_path:
        raise ManifestError(f"{source}: {artifact.package}: relative_path "
                            f"{artifact.relative_path!r} leaves the download tree")

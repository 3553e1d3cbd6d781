"""What each package set says, from manifests alone: one set per CUDA release (cudaPackages_X_Y).

Which manifests a set takes is :mod:`cudasplit._release.nixify.choose`'s; this module makes the
set's packages from them, as Nixpkgs' ``buildRedist`` packages:

* every package Nixpkgs has (``data/nixpkgs.toml`` ``[packages]``) is in every set, by Nixpkgs'
  attribute name (``cccl``, whose package is ``cuda_cccl`` before CUDA 13.3); one the set's
  manifest lacks has no release (``0-unsupported``, unsupported everywhere), one whose pinned
  manifest was not given is broken for the builds that take it; a package only cudasplit knows
  (``cudnn_jit``) is in the sets whose manifests offer a Linux archive of it;
* per package: the manifest entry (``passthru.release``), the archive per NVIDIA platform
  (:func:`~cudasplit._release.nixify.choose.supported_archives`) and the outputs the package
  table declares on each Linux platform (Nixpkgs keeps only ``out`` where there is no archive);
* between packages the ``propagatedBuildInputs`` edges of Nixpkgs' ``library.nix`` and package
  files (:data:`PROPAGATES`; to packages of the set with an archive, and from outside it:
  libcuobjclient's rdma-core from 13.4) and the ``cudasplitPackageRoots`` the package table
  names (nixify's :func:`package_roots`, over the set's attributes);
* ``meta``: broken with reasons (packages Nixpkgs marks broken, no cudasplit rules, a pinned
  manifest not given), capability assertions per package version (:data:`CAPABILITIES`),
  ``knownVulnerabilities`` (:data:`VULNERABILITIES`), the licence Nixpkgs names.

No tarball is read, so outputs are the declared ones (a tarball that leaves one empty fails the
strict split at build time, as Nixpkgs' ``checkCudaNonEmptyOutputs`` does). The per-tarball
expressions with a soname graph are :mod:`cudasplit._release.nixify`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from cudasplit._release.manifest import Manifest, Package
from cudasplit._release.nixify.choose import (
    SYSTEMS,
    SetChoice,
    Taken,
    choose_sets,
    not_given,
    redist_url,
    supported_archives,
)
from cudasplit._release.nixify.names import package_key
from cudasplit._release.nixify.plan import PlatformPlan, check_artifact, package_roots, table_needs
from cudasplit._release.nixify.tables import (
    BROKEN,
    CAPABILITIES,
    LICENSE_OF,
    NEEDS,
    NEEDS_OUTSIDE,
    NIXPKGS_PACKAGES,
    PROPAGATES,
    PROPAGATES_OUTSIDE,
    RELEASE_FROM,
    TARGET_PROPAGATES,
    VULNERABILITIES,
    Assertion,
    Pin,
    attribute_of,
)
from cudasplit._rulebook import (
    PackageSettings,
    Where,
    aliases,
    name_at,
    package_table,
    version_at_least,
)
from cudasplit._rulebook import version_tuple as _version_tuple
from cudasplit.errors import NotFoundError

__all__ = ["UNSUPPORTED", "PackageSet", "SetPackage", "SetsResult", "plan_sets"]

# Nixpkgs' version of a package whose set has no release of it.
UNSUPPORTED = "0-unsupported"


@dataclass(frozen=True, slots=True, kw_only=True)
class SetPackage:
    """One package of a generated package set (``cudaPackages_X_Y``).

    Attributes:
        attr: its attribute in the set (``cccl``).
        pname: its name (``cuda_cccl`` before CUDA 13.3).
        version: its version (``0-unsupported`` without a release).
        product: the redist it comes from (Nixpkgs' ``redistName``).
        release: its manifest entry; None when the set's manifest has none.
        description: ``meta.description`` (the manifest's name).
        license: the manifest's words for its licence.
        license_key: the licence Nixpkgs' package file names (``data/nixpkgs.toml``), if any.
        url_base: the URL every ``relative_path`` is under.
        sources: the archive per NVIDIA platform (Nixpkgs' supportedReleases), each with the
            outputs declared there.
        outputs: the declared outputs per Linux platform (NVIDIA's name).
        propagated: packages of the same set it propagates.
        propagated_outside: packages from outside the set it propagates (rdma-core).
        needs: its build inputs (of the set, or outside it).
        outside: packages Nixpkgs propagates that the set lacks (nccl, ...).
        broken: why it is broken, if it is.
        capabilities: Nixpkgs' capability assertions for this version.
        has_rules: whether cudasplit has a rules file for it.
        redist_version: the manifest's ``release_label`` (what a pin names).
        builds: for a package pinned per build, the builds that take this version.
        vulnerabilities: ``meta.knownVulnerabilities`` (TensorRT before 10.16.1).
        roots: ``--package-root KEY=EXPR`` for the packages the table names, over the set's
            attributes.
        target_propagated: packages of the same set for the platform it compiles for
            (``depsTargetTargetPropagated``: nvcc -> cudart).
        propagated_outputs: the outputs its table propagates besides bin/include/lib.
        split_as: the package the archive is split as when it is another's (cuda_crt of
            cuda_nvcc's archive): ``--package``.

    Raises:
        Nothing: a value.
    """

    attr: str
    pname: str
    version: str
    product: str
    release: Package | None = None
    description: str = ""
    license: str = ""
    license_key: str | None = None
    url_base: str = ""
    sources: tuple[PlatformPlan, ...] = ()
    outputs: tuple[tuple[str, tuple[str, ...]], ...] = ()
    propagated: tuple[str, ...] = ()
    propagated_outside: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()
    broken: tuple[str, ...] = ()
    capabilities: tuple[Assertion, ...] = ()
    has_rules: bool = False
    redist_version: str = ""
    builds: tuple[str, ...] = ()
    vulnerabilities: tuple[str, ...] = ()
    roots: tuple[tuple[str, str], ...] = ()
    target_propagated: tuple[str, ...] = ()
    propagated_outputs: tuple[str, ...] = ()
    split_as: str | None = None

    @property
    def supported(self) -> bool:
        """It has an archive for some Linux platform."""
        return any(s.platform in SYSTEMS for s in self.sources)


@dataclass(frozen=True, slots=True, kw_only=True)
class PackageSet:
    """One generated package set, ``cudaPackages_X_Y``.

    Attributes:
        name: ``cudaPackages_13_4``.
        cuda_version: ``13.4``.
        manifests: the manifests it was built from.
        packages: its packages (a package pinned per build once per version its builds take).
        pins: product -> the versions this set takes.
        warnings: pinned versions whose manifest was not given.

    Raises:
        Nothing: a value (``package`` raises NotFoundError, also a KeyError, for a
        package it lacks).
    """

    name: str
    cuda_version: str
    manifests: tuple[str, ...]
    packages: tuple[SetPackage, ...]
    pins: tuple[tuple[str, Pin], ...] = ()
    warnings: tuple[str, ...] = ()

    def package(self, name: str, build: str = "x86_64") -> SetPackage:
        """The package of attribute (or name) ``name`` as ``build`` (a pin class: jetson,
        aarch64, x86_64) takes it."""
        for package in self.packages:
            if name in (package.attr, package.pname) and (
                    not package.builds or build in package.builds):
                return package
        raise NotFoundError(f"{self.name}: no package {name!r} for {build} builds")


@dataclass(frozen=True, slots=True, kw_only=True)
class SetsResult:
    """What :func:`nixify_sets` wrote.

    Attributes:
        output_dir: where.
        sets: the package sets.
        files: the files written.

    Raises:
        Nothing: a value.
    """

    output_dir: str
    sets: tuple[PackageSet, ...]
    files: tuple[str, ...]


def plan_sets(manifests: Sequence[Manifest], base_url: str | None = None) -> list[PackageSet]:
    """One set per CUDA manifest, with the other redists' manifests each takes
    (:func:`~cudasplit._release.nixify.choose.choose_sets`). ``base_url`` replaces NVIDIA's URL
    of every redist (a mirror). A ``ManifestError`` (one line, naming the manifest) when there
    is no CUDA manifest, two of one release, or a package key that cannot be a package."""
    for manifest in manifests:  # keys become attributes and arguments: checked first
        for package in manifest.packages:
            package_key(package.pname, manifest.source)
            for artifact in package.artifacts:
                check_artifact(manifest.source, artifact)
    return [_plan_set(choice, base_url) for choice in choose_sets(manifests)]


def _plan_set(choice: SetChoice, base_url: str | None) -> PackageSet:
    entries = [(p, t) for t in choice.taken for p in _entries(t, choice.release)]
    present = {attribute_of(p.pname) for p, _ in entries if _linux(p, choice.release)}
    made = [_package(p, t, choice.release, base_url, present) for p, t in entries
            if attribute_of(p.pname) in NIXPKGS_PACKAGES or _linux(p, choice.release)]
    absent = _placeholders(choice, made)
    return PackageSet(
        name=choice.name, cuda_version=choice.release,
        manifests=tuple(Path(t.manifest.source).name for t in choice.taken
                        if t.manifest is not None),
        packages=tuple(sorted([*made, *absent],
                              key=lambda p: (p.attr, _version_tuple(p.redist_version)))),
        pins=choice.pins, warnings=choice.warnings + tuple(
            _not_given_warning(choice.name, t, absent) for t in choice.taken
            if t.manifest is None))


def _not_given_warning(name: str, taken: Taken, absent: Sequence[SetPackage]) -> str:
    broken = sorted({p.attr for p in absent
                     if p.product == taken.product and p.redist_version == taken.version})
    return f"{not_given(name, taken)}: {', '.join(broken)} broken there"


def _entries(taken: Taken, release: str) -> list[Package]:
    """The manifest's packages, and those Nixpkgs makes of another key's entry in this release
    (cuda_crt of cuda_nvcc's before 13.0: :data:`RELEASE_FROM`), named as the package."""
    if taken.manifest is None:
        return []
    own = {p.pname: p for p in taken.manifest.packages}
    borrowed = [replace(own[src.package], pname=pname) for pname, src in RELEASE_FROM.items()
                if pname not in own and src.package in own
                and not version_at_least(release, src.cuda_before)]
    return [*own.values(), *borrowed]


def _linux(package: Package, release: str) -> bool:
    """The package has an archive a Linux build of the set can take."""
    return any(p in SYSTEMS or p in ("linux-all", "source")
               for p in supported_archives(package, release))


def _placeholders(choice: SetChoice, made: Sequence[SetPackage]) -> list[SetPackage]:
    """Each package of a redist the set takes (Nixpkgs' packages of it, and the packages
    another taken version of it has) that a taken version lacks: no release there; broken
    where the version's manifest was not given."""
    have = {(p.attr, p.product, p.redist_version) for p in made}
    names: dict[str, set[str]] = {}
    for attr, product in NIXPKGS_PACKAGES.items():
        names.setdefault(product, set()).add(attr)
    for package in made:
        names.setdefault(package.product, set()).add(package.attr)
    taken = {t.product for t in choice.taken}
    groups = [*choice.taken] + [Taken(product=p, version="", manifest=None)
                                          for p in sorted(set(names) - taken)]
    out: list[SetPackage] = []
    for group in groups:
        missing = group.manifest is None and group.version != ""
        why = (not_given(choice.name, group),) if missing else ()
        for attr in sorted(names.get(group.product, ())):
            if (attr, group.product, group.version) not in have:
                pname = _pname(attr, choice.release)
                table = package_table(pname)
                declared = (table.outputs if table is not None else None) or ("out",)
                # The package file's own assertions and outputs hold without a release too
                # (its version-gated ones do not: "0-unsupported" is older than any).
                out.append(SetPackage(attr=attr, pname=pname, version=UNSUPPORTED,
                                      product=group.product, redist_version=group.version,
                                      builds=group.builds,
                                      broken=why + ((BROKEN[pname],) if pname in BROKEN else ()),
                                      capabilities=tuple(a for a in CAPABILITIES.get(pname, ())
                                                         if not a.since),
                                      has_rules=True,
                                      outputs=tuple((p, declared) for p in SYSTEMS),
                                      license_key=LICENSE_OF.get(attr),
                                      url_base=redist_url(group.product)))
    return out


def _pname(attr: str, release: str) -> str:
    """The package's name in a set of CUDA ``release`` (``cccl`` is ``cuda_cccl`` before 13.3:
    the other name that does not become ``attr`` there)."""
    for alias in aliases(attr):
        if alias != attr and name_at(alias, release) != attr:
            return alias
    return attr


def _package(package: Package, taken: Taken, release: str, base_url: str | None,
             present: set[str]) -> SetPackage:
    table = package_table(package.pname)
    attr = attribute_of(package.pname)
    url = base_url or redist_url(taken.product)
    sources = tuple(PlatformPlan(platform=a.platform, url=url + a.relative_path,
                                 sha256=a.sha256,
                                 outputs=_declared(table, package, release, a.platform))
                    for _, a in sorted(supported_archives(package, release).items()))
    return SetPackage(
        attr=attr, pname=package.pname, version=package.version, product=taken.product,
        release=package, description=package.name, license=package.license or "",
        license_key=LICENSE_OF.get(attr), url_base=url, sources=sources,
        outputs=tuple((p, _declared(table, package, release, p)) for p in SYSTEMS),
        has_rules=table is not None, redist_version=taken.version, builds=taken.builds,
        roots=_roots(table, package, release, present, attr),
        propagated_outputs=table.propagated_outputs if table is not None else (),
        split_as=package.pname if package.artifacts and package.artifacts[0].package
        != package.pname else None,
        **_edges(package, release, present, attr), **_meta(package, table is not None))


class _Edges(TypedDict):
    propagated: tuple[str, ...]
    outside: tuple[str, ...]
    propagated_outside: tuple[str, ...]
    needs: tuple[str, ...]
    target_propagated: tuple[str, ...]


class _Meta(TypedDict):
    broken: tuple[str, ...]
    capabilities: tuple[Assertion, ...]
    vulnerabilities: tuple[str, ...]


def _edges(package: Package, release: str, present: set[str], attr: str) -> _Edges:
    """Its edges to other packages: within the set (to packages with an archive; the others
    are ``outside``), from outside it (gated by the set's CUDA release), build inputs."""
    edges = _set_edges(PROPAGATES.get(package.pname, ()), release, attr)
    target = _set_edges(TARGET_PROPAGATES.get(package.pname, ()), release, attr)
    return {
        "propagated": tuple(e for e in edges if e in present),
        "outside": tuple(e for e in edges if e not in present),
        "propagated_outside": tuple(e.package for e in PROPAGATES_OUTSIDE.get(package.pname, ())
                                    if version_at_least(release, e.cuda_since or "0")),
        "needs": tuple(attribute_of(n) for n in NEEDS.get(package.pname, ())
                       if attribute_of(n) in present) + NEEDS_OUTSIDE.get(package.pname, ()),
        "target_propagated": tuple(e for e in target if e in present)}


def _meta(package: Package, has_rules: bool) -> _Meta:
    """Why it is broken, its capability assertions and vulnerabilities (this version's)."""
    return {
        "broken": ((BROKEN[package.pname],) if package.pname in BROKEN else ())
        + (() if has_rules else (f"no cudasplit rules for {package.pname}",)),
        "capabilities": tuple(a for a in CAPABILITIES.get(package.pname, ())
                              if version_at_least(package.version, a.since or "0")),
        "vulnerabilities": tuple(text for below, text in VULNERABILITIES.get(package.pname, ())
                                 if not version_at_least(package.version, below))}


def _set_edges(names: Sequence[str], release: str, own: str) -> list[str]:
    """The set's attributes of ``names`` (as of CUDA ``release``), the package's own left
    out."""
    return [a for a in (attribute_of(name_at(n, release)) for n in names) if a != own]


def _declared(table: PackageSettings | None, package: Package, release: str, platform: str
              ) -> tuple[str, ...]:
    """The outputs the package table declares for this version and platform (``out`` alone
    without a table)."""
    if table is None:
        return ("out",)
    return table.outputs_for(Where(package.version, release, platform)) or ("out",)


def _roots(table: PackageSettings | None, package: Package, release: str, present: set[str],
           attr: str) -> tuple[tuple[str, str], ...]:
    if table is None:
        return ()
    wanted = table_needs(table, Where(package.version, release))
    return package_roots(table, {k: v for k, v in wanted.items()
                                 if attribute_of(k) in present and attribute_of(k) != attr},
                         release, attribute_of)

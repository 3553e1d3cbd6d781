"""What each package set says, from manifests alone: one set per CUDA release (cudaPackages_X_Y).

Given NVIDIA's ``redistrib_*.json`` of several CUDA releases and the manifests of other redists
(cuDNN, ...), each CUDA manifest becomes one set: its packages plus, from every other product,
its packages in the ``cuda<major>`` variant of that release (Nixpkgs' ``selectManifests``): for
cuDNN, cuSPARSELt and TensorRT the version Nixpkgs pins for that set, per build (Jetson, other
``aarch64-linux``, ``x86_64-linux``: :data:`cudasplit._release.nixify.tables.PINS`), chosen when
the set is evaluated from ``cudaCapabilities`` and the system; a pinned version whose manifest
was not given is a broken package there and a warning of the set; other redists take the newest
manifest given. Per package and NVIDIA platform (``linux-aarch64`` for Jetsons below Nixpkgs'
sbsa threshold, as ``_cuda.lib.getRedistSystem`` decides):
the archive (URL, sha256) and the outputs the package table declares for that version and
platform; between packages the ``propagatedBuildInputs`` edges of Nixpkgs' ``library.nix`` and
package files (:data:`PROPAGATES`) and the ``cudasplitPackageRoots`` the package table names
(nixify's :func:`package_roots`, over the set's attributes); ``meta`` (license, platforms,
``broken`` with reasons for the packages Nixpkgs marks broken, capability assertions per package
version (:data:`CAPABILITIES`), ``knownVulnerabilities`` (:data:`VULNERABILITIES`)); cuda_compat
behind ``config.enableCudaDriverCompat``; and ``passthru.tests`` per package: every output
exists, every propagated package's dev output is named in
``nix-support/propagated-build-inputs``, and every shared library's ``DT_NEEDED`` names resolve
(``cudasplit ldd --needed-only``).

No tarball is read, so outputs are the declared ones (a tarball that leaves one empty fails the
strict split at build time, as Nixpkgs' ``checkCudaNonEmptyOutputs`` does). The per-tarball
expressions with a soname graph are :mod:`cudasplit._release.nixify`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cudasplit._release.manifest import (
    Artifact,
    Manifest,
    Package,
)
from cudasplit._release.nixify.nixlang import ident
from cudasplit._release.nixify.plan import PlatformPlan, check_artifact, package_roots, table_needs
from cudasplit._release.nixify.tables import (
    BROKEN,
    CAPABILITIES,
    NEEDS,
    NEEDS_OUTSIDE,
    PINS,
    PROPAGATES,
    TARGET_PROPAGATES,
    VULNERABILITIES,
    Assertion,
    Pin,
    pin_for,
)
from cudasplit._rulebook import (
    Where,
    default_rules_dir,
    load_ruleset,
    name_at,
    version_at_least,
    version_tuple,
)
from cudasplit.errors import ManifestError, NotFoundError

__all__ = [
    "BROKEN",
    "CAPABILITIES",
    "PROPAGATES",
    "SYSTEMS",
    "VULNERABILITIES",
    "Assertion",
    "PackageSet",
    "SetPackage",
    "SetsResult",
    "plan_sets",
    "redist_url",
]

# NVIDIA platform -> Nix system; a set picks one per build (Nixpkgs' getRedistSystem).
SYSTEMS = {"linux-x86_64": "x86_64-linux", "linux-sbsa": "aarch64-linux",
           "linux-aarch64": "aarch64-linux"}
NVIDIA_URL = "https://developer.download.nvidia.com/compute/"
_BUILD_WORDS = {"jetson": "Jetson", "aarch64": "other aarch64-linux", "x86_64": "x86_64-linux"}


@dataclass(frozen=True, slots=True)
class SetPackage:
    """One package of a generated package set (``cudaPackages_X_Y``).

    Attributes:
        pname: its name.
        version: its version.
        description: ``meta.description``.
        license: its licence.
        sources: one tarball per NVIDIA platform.
        propagated: packages of the same set it propagates.
        needs: its build inputs (of the set, or outside it).
        outside: what it needs that the set lacks.
        broken: why it is broken, if it is.
        capabilities: Nixpkgs' capability assertions for this version.
        has_rules: whether cudasplit has a rules file for it.
        product: the manifest's ``release_product``.
        redist_version: the manifest's ``release_label``.
        builds: for a pinned package, the builds that take this version.
        vulnerabilities: ``meta.knownVulnerabilities`` (TensorRT before 10.16.1).
        roots: ``--package-root KEY=EXPR`` for the packages the table names (cudart's
            ``.pc`` Cflags, nvcc's headers, NVRTC for cuBLAS and cuDNN), over the set's
            attributes.
        target_propagated: packages of the same set for the platform it compiles for
            (``depsTargetTargetPropagated``: nvcc -> cudart).

    Raises:
        Nothing: a value.
    """

    pname: str
    version: str
    description: str
    license: str
    sources: tuple[PlatformPlan, ...]  # one per NVIDIA platform, as nixify plans them
    propagated: tuple[str, ...]       # packages of the same set
    needs: tuple[str, ...]            # build inputs: of the same set (NEEDS), or NEEDS_OUTSIDE
    outside: tuple[str, ...]          # edges to packages the set lacks (nccl, ...)
    broken: tuple[str, ...]
    capabilities: tuple[Assertion, ...]  # those of CAPABILITIES for this version
    has_rules: bool
    product: str = "cuda"             # the manifest's release_product
    redist_version: str = ""          # the manifest's release_label (what a pin names)
    builds: tuple[str, ...] = ()      # pinned: the builds (pins.PIN_CLASSES) taking this one
    vulnerabilities: tuple[str, ...] = ()  # meta.knownVulnerabilities (VULNERABILITIES)
    # --package-root KEY=${EXPR} for the packages the table names (nixify's package_roots:
    # cudart's .pc Cflags -> crt, cccl; nvcc -> cudart, crt, cccl; cublas, cudnn -> nvrtc),
    # EXPR over the set's attributes (rendered under `with self;`).
    roots: tuple[tuple[str, str], ...] = ()
    # depsTargetTargetPropagated: packages of the same set for the platform it compiles for
    # (nvcc -> cudart, as cuda_nvcc/package.nix).
    target_propagated: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PackageSet:
    """One generated package set, ``cudaPackages_X_Y``.

    Attributes:
        name: ``cudaPackages_13_4``.
        cuda_version: ``13.4``.
        manifests: the manifests it was built from.
        packages: its packages (a pinned one once per version its builds take).
        pins: product -> the versions this set takes.
        warnings: pinned versions whose manifest was not given.

    Raises:
        Nothing: a value (``package`` raises NotFoundError, also a KeyError, for a
        package it lacks).
    """

    name: str                  # cudaPackages_13_4
    cuda_version: str          # 13.4
    manifests: tuple[str, ...]
    packages: tuple[SetPackage, ...]  # a pinned package once per version its builds take
    pins: tuple[tuple[str, Pin], ...] = ()  # product -> the versions this set takes
    warnings: tuple[str, ...] = ()          # pinned versions whose manifest was not given

    def package(self, pname: str, build: str = "x86_64") -> SetPackage:
        """``pname`` as ``build`` (a pin class: jetson, aarch64, x86_64) takes it."""
        for package in self.packages:
            if package.pname == pname and (not package.builds or build in package.builds):
                return package
        raise NotFoundError(f"{self.name}: no package {pname!r} for {build} builds")


@dataclass(frozen=True, slots=True)
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


def _product(manifest: Manifest) -> str:
    if manifest.release_product:
        return manifest.release_product
    return "cuda" if any(p.pname == "cuda_cudart" for p in manifest.packages) else "unknown"


def _label(manifest: Manifest) -> str:
    """The manifest's version: ``release_label``, else the file name's ``redistrib_<label>``
    (Nixpkgs' selectManifests fills release_label from the version it was asked for)."""
    if manifest.release_label:
        return manifest.release_label
    match = re.search(r"redistrib_(.+)\.json$", Path(manifest.source).name)
    return match[1] if match else "0"


def redist_url(product: str) -> str:
    """Where NVIDIA serves a redist's ``relative_path``s (Nixpkgs' ``mkRedistUrl``):
    ``compute/<redist>/redist/``, TensorRT ``compute/machine-learning/``."""
    return NVIDIA_URL + ("machine-learning/" if product == "tensorrt" else f"{product}/redist/")


def plan_sets(manifests: Sequence[Manifest], base_url: str | None = None) -> list[PackageSet]:
    """One set per CUDA manifest (by release ``major.minor``); of every other product the
    version :data:`PINS` names for that set and build (cuDNN, cuSPARSELt, TensorRT), else the
    newest manifest given. ``base_url`` replaces NVIDIA's URL of every redist (a mirror).
    A ``ManifestError`` when there is no CUDA manifest or two of one release."""
    cuda = [m for m in manifests if _product(m) == "cuda"]
    if not cuda:
        raise ManifestError("nixify-sets needs at least one CUDA redistrib manifest")
    products: dict[str, dict[str, Manifest]] = {}
    for manifest in manifests:
        product = _product(manifest)
        if product != "cuda":
            products.setdefault(product, {})[_label(manifest)] = manifest
    sets: list[PackageSet] = []
    for manifest in manifests:  # keys become attributes, arguments and file names
        for package in manifest.packages:
            ident(package.pname, f"{manifest.source}: package key")
            for artifact in package.artifacts:
                check_artifact(manifest.source, artifact)
    for manifest in sorted(cuda, key=lambda m: version_tuple(_label(m))):
        release = ".".join((manifest.release_label or "").split(".")[:2])
        if not re.fullmatch(r"\d{1,4}\.\d{1,4}", release):
            raise ManifestError(f"{manifest.source}: release_label "
                                f"{manifest.release_label!r} is not a CUDA version (X.Y.Z)")
        if release in {s.cuda_version for s in sets}:
            raise ManifestError(f"{manifest.source}: no release_label, or a second manifest "
                                f"for CUDA {release}")
        sets.append(_plan_set(manifest, release, products, base_url))
    return sets


def _plan_set(cuda: Manifest, release: str, products: Mapping[str, Mapping[str, Manifest]],
              base_url: str | None) -> PackageSet:
    name = f"cudaPackages_{release.replace('.', '_')}"
    # (manifest or None when not given, the pin's builds taking it; () when not pinned)
    chosen: list[tuple[str, str, Manifest | None, tuple[str, ...]]] = [
        ("cuda", _label(cuda), cuda, ())]
    pins: list[tuple[str, Pin]] = []
    warnings: list[str] = []
    for product, given in sorted(products.items()):
        pin = pin_for(product, release)
        if pin is None:
            newest = max(given, key=version_tuple)
            if product in PINS:
                warnings.append(f"{name}: Nixpkgs pins no {product} for CUDA {release}; "
                                f"took the newest given, {newest}")
            chosen.append((product, newest, given[newest], ()))
            continue
        pins.append((product, pin))
        for version in dict.fromkeys(pin.version(b) for b in ("jetson", "aarch64", "x86_64")):
            chosen.append((product, version, given.get(version), pin.builds(version)))
    packages: list[SetPackage] = []
    present = {p.pname for _, _, m, _ in chosen if m is not None for p in m.packages
               if _artifacts(p, release)}
    for product, version, manifest, builds in chosen:
        url = base_url or redist_url(product)
        if manifest is not None:
            packages += [_plan(p, release, url, present, product, version, builds)
                         for p in manifest.packages if _artifacts(p, release)]
    for product, version, manifest, builds in chosen:
        if not builds:
            continue
        # Every build of a pinned product gets each of its packages: broken where missing.
        pnames = sorted({p.pname for p in packages if p.product == product}
                        or {p.pname for m in products[product].values() for p in m.packages})
        lacking = [n for n in pnames if not any(
            p.pname == n and p.redist_version == version for p in packages)]
        where = ("all" if len(builds) == len(_BUILD_WORDS)
                 else " and ".join(_BUILD_WORDS[b] for b in builds))
        why = {n: (f"{name} takes {product} {version} for {where} builds (Nixpkgs' pin); "
                   "its manifest was not given") if manifest is None else
               (f"{product} {version} (taken for {where} builds) has no {n} for CUDA "
                f"{release}") for n in lacking}
        if manifest is None and lacking:
            warnings.append(f"{why[lacking[0]]}: {', '.join(lacking)} broken there")
        packages += [SetPackage(n, version, "", "", (), (), (), (), (why[n],), (), False,
                                product, version, builds) for n in lacking]
    return PackageSet(name, release,
                      tuple(Path(m.source).name for _, _, m, _ in chosen if m is not None),
                      tuple(sorted(packages, key=lambda p: (p.pname,
                                                            version_tuple(p.redist_version)))),
                      tuple(pins), tuple(warnings))


def _artifacts(package: Package, release: str) -> list[Artifact]:
    """One archive per platform: ``cuda<major.minor>`` before ``cuda<major>`` before a plain
    one (Nixpkgs' selection; cuda_compat 13.3 is ``_cuda13.3``)."""
    rank = {release: 0, release.split(".")[0]: 1, None: 2}
    best: dict[str, Artifact] = {}
    for artifact in package.artifacts:
        if artifact.platform not in SYSTEMS or artifact.cuda_variant not in rank:
            continue
        held = best.get(artifact.platform)
        if held is None or rank[artifact.cuda_variant] < rank[held.cuda_variant]:
            best[artifact.platform] = artifact
    return list(best.values())


def _plan(package: Package, release: str, base_url: str, present: set[str], product: str,
          redist_version: str, builds: tuple[str, ...]) -> SetPackage:
    has_rules = (default_rules_dir() / "packages" / f"{package.pname}.toml").is_file()
    table = load_ruleset(package.pname).package if has_rules else None
    sources = []
    for artifact in sorted(_artifacts(package, release), key=lambda a: a.platform):
        where = Where(package.version, release, artifact.platform)
        declared = table.outputs_for(where) if table is not None else None
        sources.append(PlatformPlan(artifact.platform, base_url + artifact.relative_path,
                                    artifact.sha256, tuple(declared or ("out",))))
    edges = [name_at(d, release) for d in PROPAGATES.get(package.pname, ())]
    target_edges = [name_at(d, release) for d in TARGET_PROPAGATES.get(package.pname, ())]
    broken = [BROKEN[package.pname]] if package.pname in BROKEN else []
    if not has_rules:
        broken.append(f"no cudasplit rules for {package.pname}")
    roots: tuple[tuple[str, str], ...] = ()
    if table is not None:
        wanted = table_needs(table, Where(package.version, release))
        roots = package_roots(table, {k: v for k, v in wanted.items()
                                      if k in present and k != package.pname}, release)
    return SetPackage(package.pname, package.version, package.name, package.license or "",
                      tuple(sources), tuple(e for e in edges if e in present),
                      tuple(n for n in NEEDS.get(package.pname, ()) if n in present)
                      + NEEDS_OUTSIDE.get(package.pname, ()),
                      tuple(e for e in edges if e not in present), tuple(broken),
                      tuple(a for a in CAPABILITIES.get(package.pname, ())
                            if version_at_least(package.version, a.since or "0")),
                      has_rules, product, redist_version, builds,
                      tuple(text for below, text in VULNERABILITIES.get(package.pname, ())
                            if not version_at_least(package.version, below)),
                      roots, tuple(e for e in target_edges if e in present))

"""Package sets from manifests alone: one Nix file per CUDA release, like Nixpkgs' cudaPackages_X_Y.

Given NVIDIA's ``redistrib_*.json`` of several CUDA releases and the manifests of other redists
(cuDNN, ...), each CUDA manifest becomes one set: its packages plus, from every other product,
its packages in the ``cuda<major>`` variant of that release (Nixpkgs' ``selectManifests``): for
cuDNN, cuSPARSELt and TensorRT the version Nixpkgs pins for that set, per build (Jetson, other
``aarch64-linux``, ``x86_64-linux``: :data:`cudasplit._release.nixify.pins.PINS`), chosen when
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

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cudasplit._release.manifest import (
    JETSON_CAPABILITIES,
    JETSON_SBSA_THRESHOLD,
    Artifact,
    Manifest,
    Package,
)
from cudasplit._release.nixify.pins import PINS, PINS_SOURCE, Pin, pin_for
from cudasplit._release.nixify.plan import PROPAGATES, PlatformPlan, package_roots, table_needs
from cudasplit._release.nixify.setstemplate import MK_REDIST, RELEASE
from cudasplit._rulebook import (
    Where,
    default_rules_dir,
    load_ruleset,
    name_at,
    version_at_least,
    version_tuple,
)
from cudasplit.errors import ManifestError, NotFoundError, OutputError

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
    "render_set",
    "write_sets",
]

# NVIDIA platform -> Nix system; a set picks one per build (Nixpkgs' getRedistSystem).
SYSTEMS = {"linux-x86_64": "x86_64-linux", "linux-sbsa": "aarch64-linux",
           "linux-aarch64": "aarch64-linux"}
NVIDIA_URL = "https://developer.download.nvidia.com/compute/"
_BUILD_WORDS = {"jetson": "Jetson", "aarch64": "other aarch64-linux", "x86_64": "x86_64-linux"}
# Libraries a package's DT_NEEDED names (Nixpkgs' buildInputs, for autoPatchelf); without the
# tarballs there is no soname graph, so these and the toolchain's libstdc++ are all the split
# can resolve against (the strict split fails on anything else: add it here or use nixify).
NEEDS: Mapping[str, tuple[str, ...]] = {
    "libcusolver": ("libcublas", "libcusparse", "libnvjitlink"),
    "libcusparse": ("libnvjitlink",),
    "libcusparse_lt": ("libcusparse",),
    "libcublasmp": ("libcublas",),
    "libcuobjclient": ("libcufile",),
    "cuda_nvprof": ("cuda_cupti",),
}
# Build inputs from outside the set (set-file arguments), for DT_NEEDED names no CUDA package
# provides: Nixpkgs' cudnn and fabricmanager take zlib (cuDNN 9's libraries NEED libz.so.1).
NEEDS_OUTSIDE: Mapping[str, tuple[str, ...]] = {
    "cudnn": ("zlib",),
    "fabricmanager": ("zlib",),
}
# Packages Nixpkgs builds but marks broken, and why (its package files).
BROKEN: Mapping[str, str] = {
    "nvidia_driver": "the driver comes from linuxPackages.nvidia_x11",
    "driver_assistant": "the driver comes from linuxPackages.nvidia_x11",
    "mft": "FHS paths", "mft_oem": "FHS paths", "mft_autocomplete": "FHS paths",
    "collectx_bringup": "needs libssl.so.1.1 and libcrypto.so.1.1",
    "cudnn_samples": "needs FreeImage",
}
@dataclass(frozen=True, slots=True)
class Assertion:
    """One of Nixpkgs' capability assertions (``platformAssertions``) of a package, for the
    package versions from ``since`` (``""``: every one). ``test`` is a Nix expression over the
    set's ``cudaCapabilities``, ``redistSystem``, ``hasJetsonCudaCapability`` and
    ``cudaMajorMinorVersion``; ``why`` the problem when it is false, followed by what was found
    (``found``, a Nix expression: the requested capabilities unless said otherwise)."""

    since: str
    test: str
    why: str
    found: str = "builtins.toJSON cudaCapabilities"


def _all_at_least(capability: str) -> str:
    return f'builtins.all (c: builtins.compareVersions c "{capability}" >= 0) cudaCapabilities'


_L4T = 'redistSystem != "linux-aarch64"'
# Capability assertions, from Nixpkgs' package files: libcudla.nix @1dbbce6, libcudss.nix, and
# tensorrt.nix (nixos-cuda/nixpkgs @2268c4f, the state that packages TensorRT 11.3.0).
CAPABILITIES: Mapping[str, tuple[Assertion, ...]] = {
    "libcudla": (Assertion("", 'builtins.all (c: c == "7.2" || c == "8.7") cudaCapabilities',
                           "libcudla supports only capabilities 7.2 and 8.7"),),
    "libcudss": (Assertion("", _all_at_least("6.0"), "libcudss needs capability 6.0 or newer"),),
    "tensorrt": (
        Assertion("10.0.0", _all_at_least("7.0"), "tensorrt releases since 10.0.0 support CUDA "
                  "compute capabilities 7.0 and newer"),
        Assertion("10.0.0", f'{_L4T} || cudaCapabilities == [ "8.7" ]',
                  "tensorrt releases since 10.0.0 support only CUDA compute capability 8.7 "
                  "(Jetson Orin) for pre-Thor Jetson devices"),
        Assertion("10.0.0", f'{_L4T} || builtins.compareVersions cudaMajorMinorVersion "12.4" '
                  ">= 0", "tensorrt releases since 10.0.0 support CUDA 12.4 and newer for "
                  "pre-Thor Jetson devices", "cudaMajorMinorVersion"),
        Assertion("10.5.0", _all_at_least("7.5"), "tensorrt releases since 10.5.0 support CUDA "
                  "compute capabilities 7.5 and newer"),
        Assertion("11.2.1", "!hasJetsonCudaCapability",
                  "tensorrt releases since 11.2.1 do not support Jetson devices"),
    ),
}
# meta.knownVulnerabilities below a package version (Nixpkgs' package files: tensorrt.nix as
# above, nixpkgs#522570, NVIDIA security bulletin 5836).
VULNERABILITIES: Mapping[str, tuple[tuple[str, str], ...]] = {
    "tensorrt": (("10.16.1", "CVE-2026-24188: OOB write"),),
}


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
    for manifest in sorted(cuda, key=lambda m: version_tuple(_label(m))):
        release = ".".join((manifest.release_label or "").split(".")[:2])
        if not release or release in {s.cuda_version for s in sets}:
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
                      roots)


def _s(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${")
    return f'"{escaped}"'


def render_set(pset: PackageSet) -> str:
    """The set's Nix file: a function of the Nixpkgs attributes it uses, returning the set."""
    jetson = " ".join(_s(c) for c in sorted(JETSON_CAPABILITIES, key=version_tuple))
    threshold = JETSON_SBSA_THRESHOLD.get(pset.cuda_version.split(".")[0], "8.7")
    lines = [f"# Generated by `cudasplit nixify-sets` from {', '.join(pset.manifests)}; "
             "do not edit.",
             "{ lib, stdenv, fetchurl, runCommand, cudasplit, zlib, config ? { },",
             "  cudaCapabilities ? [ ] }:", "let",
             f"  cudaMajorMinorVersion = {_s(pset.cuda_version)};",
             "  # Nixpkgs: cuda_compat only with config.enableCudaDriverCompat.",
             "  compatEnabled = config.enableCudaDriverCompat or false;",
             "  system = stdenv.hostPlatform.system;",
             f"  jetsonCapabilities = [ {jetson} ];",
             "  requestedJetsonCudaCapabilities =",
             "    builtins.filter (c: builtins.elem c jetsonCapabilities) cudaCapabilities;",
             "  hasJetsonCudaCapability = requestedJetsonCudaCapabilities != [ ];",
             "  # Nixpkgs' _cuda.lib.getRedistSystem: Jetsons below the threshold take L4T builds.",
             '  redistSystem = if system == "x86_64-linux" then "linux-x86_64"',
             '    else if system != "aarch64-linux" then "unsupported"',
             f"    else if builtins.all (c: builtins.compareVersions c {_s(threshold)} >= 0)",
             '      requestedJetsonCudaCapabilities then "linux-sbsa" else "linux-aarch64";',
             f"  # The version of a pinned redist this build takes: Nixpkgs' {PINS_SOURCE}.",
             '  pinBuild = if system == "aarch64-linux"',
             '    then (if hasJetsonCudaCapability then "jetson" else "aarch64") else "x86_64";',
             "  pick = pins: versions: versions.${pins.${pinBuild}};",
             "  mkRedist = import ./mk-redist.nix {",
             "    inherit lib stdenv fetchurl runCommand cudasplit cudaMajorMinorVersion "
             "redistSystem;",
             "  };", "  self = {"]
    members = {p.pname for p in pset.packages}
    pins = dict(pset.pins)
    groups: dict[str, list[SetPackage]] = {}
    for package in pset.packages:
        groups.setdefault(package.pname, []).append(package)
    for pname, versions in groups.items():
        pin = pins.get(versions[0].product) if versions[0].builds else None
        if pin is None:
            lines += [f"    {pname} = mkRedist {{", *_render_package(versions[0], members),
                      "    };"]
            continue
        lines.append(f"    {pname} = pick {{ jetson = {_s(pin.jetson)}; aarch64 = "
                     f"{_s(pin.aarch64)}; x86_64 = {_s(pin.x86_64)}; }} {{")
        for package in versions:
            lines += [f"      {_s(package.redist_version)} = mkRedist {{",
                      *("  " + line for line in _render_package(package, members)),
                      "      };"]
        lines.append("    };")
    lines += ["  };", "in", "self", ""]
    return "\n".join(lines)


def _render_package(package: SetPackage, members: set[str]) -> list[str]:
    """The attributes of one ``mkRedist { ... }`` call."""
    platforms = sorted({SYSTEMS[s.platform] for s in package.sources})
    lines = [f"      pname = {_s(package.pname)};", f"      version = {_s(package.version)};",
             f"      description = {_s(package.description)};",
             f"      license = {_s(package.license)};",
             ("      platforms = [ " + " ".join(_s(p) for p in platforms) + " ];"
              ).replace("[  ]", "[ ]"),
             "      sources = {"]
    for source in package.sources:
        lines += [f"        {source.platform} = {{", f"          url = {_s(source.url)};",
                  f"          sha256 = {_s(source.sha256)};",
                  "          outputs = [ " + " ".join(_s(o) for o in source.outputs) + " ];",
                  "        };"]
    lines.append("      };")
    deps = " ".join(f"self.{d}" for d in package.propagated)
    # Nixpkgs propagates cuda_compat when it is available (12.9's is L4T only).
    compat = (" ++ (if compatEnabled && !self.cuda_compat.meta.broken"
              " then [ self.cuda_compat ] else [ ])"
              if package.pname == "cuda_cudart" and "cuda_compat" in members else "")
    if package.outside:
        lines.append(f"      # Nixpkgs also propagates (not in this set): "
                     f"{', '.join(package.outside)}")
    lines.append(f"      propagatedBuildInputs = [ {deps} ]{compat};".replace("[  ]", "[ ]"))
    if package.needs:
        lines.append("      buildInputs = [ " + " ".join(
            n if n in NEEDS_OUTSIDE.get(package.pname, ()) else f"self.{n}"
            for n in package.needs) + " ];")
    if package.roots:
        lines.append("      packageRoots = with self; [ " + " ".join(
            f'"{key}=${{{expr}}}"' for key, expr in package.roots) + " ];")
    problems = [_s(b) for b in package.broken]
    extra = ""
    if package.pname == "cuda_compat":
        extra = (' ++ (if compatEnabled then [ ] else [ "cuda-compat-disabled: set '
                 'config.enableCudaDriverCompat" ])')
    for assertion in package.capabilities:
        extra += (f"\n        ++ (if {assertion.test} then [ ] else [ ({_s(assertion.why)}"
                  f' + " (found ${{{assertion.found}}})") ])')
    lines.append(f"      problems = [ {' '.join(problems)} ]{extra};".replace("[  ]", "[ ]"))
    if package.vulnerabilities:
        lines.append("      knownVulnerabilities = [ "
                     + " ".join(_s(v) for v in package.vulnerabilities) + " ];")
    if package.pname == "cuda_cudart" and "cuda_nvcc" in members:
        # Nixpkgs' passthru.tests.no-compiler (#457424): nothing of cudart keeps nvcc alive.
        lines += ["      extraTests = drv: {",
                  '        no-compiler = runCommand "cuda_cudart-no-compiler" {',
                  "          disallowedRequisites = [ self.cuda_nvcc ];",
                  '        } "echo ${drv} > $out";', "      };"]
    return lines


def write_sets(sets: Sequence[PackageSet], output_dir: str | os.PathLike[str]) -> SetsResult:
    """``<set name>.nix`` per set, ``mk-redist.nix``, ``default.nix`` (every set, by name,
    as functions of ``callPackage``-able arguments) and ``release.nix`` (one job per set,
    package and system: a Hydra jobset, or ``nix-build -A`` with remote builders)."""
    out = Path(output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = {"mk-redist.nix": MK_REDIST, "release.nix": RELEASE}
        for pset in sets:
            files[f"{pset.name}.nix"] = render_set(pset)
        files["default.nix"] = "\n".join([
            "# Generated by `cudasplit nixify-sets`; do not edit. Each set is a function: "
            "call it with callPackage.", "{", *(f"  {s.name} = ./{s.name}.nix;" for s in sets),
            "}", ""])
        for name, text in files.items():
            (out / name).write_text(text)
    except OSError as exc:
        raise OutputError(f"{out}: cannot write the package sets ({exc.strerror or exc})") \
            from exc
    return SetsResult(str(out), tuple(sets), tuple(sorted(files)))

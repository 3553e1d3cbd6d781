"""Package sets from manifests alone: one Nix file per CUDA release, like Nixpkgs' cudaPackages_X_Y.

Given NVIDIA's ``redistrib_*.json`` of several CUDA releases and the manifests of other redists
(cuDNN, ...), each CUDA manifest becomes one set: its packages plus, from every other product,
the newest manifest's packages in the ``cuda<major>`` variant of that release (Nixpkgs'
``selectManifests``, without its per-set pins: the newest one here). Per package and Nix system:
the archive (URL, sha256) and the outputs the package table declares for that version and
platform; between packages the ``propagatedBuildInputs`` edges of Nixpkgs' ``library.nix`` and
package files (:data:`PROPAGATES`) and the ``cudasplitPackageRoots`` the package table names
(nixify's :func:`package_roots`, over the set's attributes); ``meta`` (license, platforms,
``broken`` with reasons for the packages Nixpkgs marks broken, capability assertions);
cuda_compat behind ``config.enableCudaDriverCompat``; and ``passthru.tests`` per package:
every output exists, every propagated package's dev output is named in
``nix-support/propagated-build-inputs``, and every shared library's ``DT_NEEDED`` names
resolve (``cudasplit ldd --needed-only``).

No tarball is read, so outputs are the declared ones (a tarball that leaves one empty fails the
strict split at build time, as Nixpkgs' ``checkCudaNonEmptyOutputs`` does). The per-tarball
expressions with a soname graph are :mod:`cudasplit._release.nixify`'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cudasplit._release.manifest import Artifact, Manifest, Package
from cudasplit._release.nixify.plan import PROPAGATES, PlatformPlan, package_roots, table_needs
from cudasplit._release.nixify.setstemplate import MK_REDIST, RELEASE
from cudasplit._rulebook import Where, default_rules_dir, load_ruleset, name_at, version_tuple
from cudasplit.errors import ManifestError, OutputError

__all__ = ["BROKEN", "PROPAGATES", "SYSTEMS", "PackageSet", "SetPackage", "SetsResult",
           "plan_sets", "render_set", "write_sets"]

SYSTEMS = {"linux-x86_64": "x86_64-linux", "linux-sbsa": "aarch64-linux"}
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
# Capability assertions (Nix expressions over cudaCapabilities), Nixpkgs' package files.
CAPABILITIES: Mapping[str, tuple[str, str]] = {
    "libcudla": ('builtins.all (c: c == "7.2" || c == "8.7") cudaCapabilities',
                 "libcudla supports only capabilities 7.2 and 8.7"),
    "libcudss": ('builtins.all (c: builtins.compareVersions c "6.0" >= 0) cudaCapabilities',
                 "libcudss needs capability 6.0 or newer"),
}


@dataclass(frozen=True, slots=True)
class SetPackage:
    pname: str
    version: str
    description: str
    license: str
    sources: tuple[PlatformPlan, ...]  # one per NVIDIA platform, as nixify plans them
    propagated: tuple[str, ...]       # packages of the same set
    needs: tuple[str, ...]            # build inputs: of the same set (NEEDS), or NEEDS_OUTSIDE
    outside: tuple[str, ...]          # edges to packages the set lacks (nccl, ...)
    broken: tuple[str, ...]
    capability: tuple[str, str] | None
    has_rules: bool
    # --package-root KEY=${EXPR} for the packages the table names (nixify's package_roots:
    # cudart's .pc Cflags -> crt, cccl; nvcc -> cudart, crt, cccl; cublas, cudnn -> nvrtc),
    # EXPR over the set's attributes (rendered under `with self;`).
    roots: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PackageSet:
    name: str                  # cudaPackages_13_4
    cuda_version: str          # 13.4
    manifests: tuple[str, ...]
    packages: tuple[SetPackage, ...]

    def package(self, pname: str) -> SetPackage:
        for package in self.packages:
            if package.pname == pname:
                return package
        raise KeyError(pname)


@dataclass(frozen=True, slots=True)
class SetsResult:
    output_dir: str
    sets: tuple[PackageSet, ...]
    files: tuple[str, ...]


def _product(manifest: Manifest) -> str:
    if manifest.release_product:
        return manifest.release_product
    return "cuda" if any(p.pname == "cuda_cudart" for p in manifest.packages) else "unknown"


def plan_sets(manifests: Sequence[Manifest], base_url: str) -> list[PackageSet]:
    """One set per CUDA manifest (by release ``major.minor``), with the newest manifest of
    every other product; a ``ManifestError`` when there is no CUDA manifest."""
    cuda = [m for m in manifests if _product(m) == "cuda"]
    if not cuda:
        raise ManifestError("nixify-sets needs at least one CUDA redistrib manifest")
    others: dict[str, Manifest] = {}
    for manifest in manifests:
        product = _product(manifest)
        if product != "cuda" and (product not in others or version_tuple(
                manifest.release_label or "0") > version_tuple(others[product].release_label
                                                                or "0")):
            others[product] = manifest
    sets: list[PackageSet] = []
    for manifest in sorted(cuda, key=lambda m: version_tuple(m.release_label or "0")):
        release = ".".join((manifest.release_label or "").split(".")[:2])
        if not release or release in {s.cuda_version for s in sets}:
            raise ManifestError(f"{manifest.source}: no release_label, or a second manifest "
                                f"for CUDA {release}")
        used = [manifest, *others.values()]
        packages = [p for m in used for p in m.packages]
        present = {p.pname for p in packages if _artifacts(p, release)}
        planned = [_plan(p, release, base_url, present) for p in packages
                   if _artifacts(p, release)]
        sets.append(PackageSet(f"cudaPackages_{release.replace('.', '_')}", release,
                               tuple(Path(m.source).name for m in used),
                               tuple(sorted(planned, key=lambda p: p.pname))))
    return sets


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


def _plan(package: Package, release: str, base_url: str, present: set[str]) -> SetPackage:
    has_rules = (default_rules_dir() / "packages" / f"{package.pname}.toml").is_file()
    table = load_ruleset(package.pname).package if has_rules else None
    sources = []
    for artifact in sorted(_artifacts(package, release), key=lambda a: SYSTEMS[a.platform]):
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
                      CAPABILITIES.get(package.pname), has_rules, roots)


def _s(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${")
    return f'"{escaped}"'


def render_set(pset: PackageSet) -> str:
    """The set's Nix file: a function of the Nixpkgs attributes it uses, returning the set."""
    lines = [f"# Generated by `cudasplit nixify-sets` from {', '.join(pset.manifests)}; "
             "do not edit.",
             "{ lib, stdenv, fetchurl, runCommand, cudasplit, zlib, config ? { },",
             "  cudaCapabilities ? [ ] }:", "let",
             f"  cudaMajorMinorVersion = {_s(pset.cuda_version)};",
             "  # Nixpkgs: cuda_compat only with config.enableCudaDriverCompat.",
             "  compatEnabled = config.enableCudaDriverCompat or false;",
             "  mkRedist = import ./mk-redist.nix {",
             "    inherit lib stdenv fetchurl runCommand cudasplit cudaMajorMinorVersion;",
             "  };", "  self = {"]
    for package in pset.packages:
        lines += _render_package(package, {p.pname for p in pset.packages})
    lines += ["  };", "in", "self", ""]
    return "\n".join(lines)


def _render_package(package: SetPackage, members: set[str]) -> list[str]:
    lines = [f"    {package.pname} = mkRedist {{",
             f"      pname = {_s(package.pname)};", f"      version = {_s(package.version)};",
             f"      description = {_s(package.description)};",
             f"      license = {_s(package.license)};", "      sources = {"]
    for source in package.sources:
        lines += [f"        {SYSTEMS[source.platform]} = {{", f"          url = {_s(source.url)};",
                  f"          sha256 = {_s(source.sha256)};",
                  "          outputs = [ " + " ".join(_s(o) for o in source.outputs) + " ];",
                  "        };"]
    lines.append("      };")
    deps = " ".join(f"self.{d}" for d in package.propagated)
    compat = (" ++ (if compatEnabled then [ self.cuda_compat ] else [ ])"
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
    if package.capability is not None:
        test, why = package.capability
        extra += f" ++ (if {test} then [ ] else [ {_s(why)} ])"
    lines.append(f"      problems = [ {' '.join(problems)} ]{extra};".replace("[  ]", "[ ]"))
    if package.pname == "cuda_cudart" and "cuda_nvcc" in members:
        # Nixpkgs' passthru.tests.no-compiler (#457424): nothing of cudart keeps nvcc alive.
        lines += ["      extraTests = drv: {",
                  '        no-compiler = runCommand "cuda_cudart-no-compiler" {',
                  "          disallowedRequisites = [ self.cuda_nvcc ];",
                  '        } "echo ${drv} > $out";', "      };"]
    lines.append("    };")
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

"""What each package set is made of, apart from making its packages: which manifest every redist
contributes to which set and build, and which archive a package offers per platform.

Given NVIDIA's ``redistrib_*.json`` of several CUDA releases and the manifests of other redists
(cuDNN, TensorRT, ...), each CUDA manifest makes one set (``cudaPackages_X_Y``). Of every other
redist the set takes the version Nixpkgs pins for it (``data/pins.toml``: per build, Jetson /
other ``aarch64-linux`` / ``x86_64-linux``, where the pins differ), else the newest given, as
Nixpkgs' ``selectManifests`` takes one manifest per redist. A pinned version whose manifest was
not given is kept as such (``Taken.manifest`` is None) and said in the set's warnings.

A package's archives follow Nixpkgs' ``getSupportedReleases``: a ``source`` archive, else a
``linux-all`` one, else one per platform; where the package is built per CUDA version
(``cuda_variant``) the set's ``cuda<X.Y>`` entry is preferred to its ``cuda<X>`` one, and a
platform with neither offers nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cudasplit._release.manifest import Artifact, Manifest, Package
from cudasplit._release.nixify.tables import PIN_CLASSES, PINS, Pin, pin_for
from cudasplit._rulebook import version_tuple
from cudasplit.errors import ManifestError

__all__ = ["NIX_SYSTEMS_OF", "SYSTEMS", "SetChoice", "Taken", "builds_words", "choose_sets",
           "label_of", "not_given", "product_of", "redist_url", "supported_archives"]

# NVIDIA platform -> Nix system; a set picks one per build (Nixpkgs' getRedistSystem).
SYSTEMS = {"linux-x86_64": "x86_64-linux", "linux-sbsa": "aarch64-linux",
           "linux-aarch64": "aarch64-linux"}
# Nixpkgs' getNixSystems: the Nix systems an archive of each NVIDIA platform serves.
NIX_SYSTEMS_OF = {**{k: (v,) for k, v in SYSTEMS.items()},
                  "linux-all": ("aarch64-linux", "x86_64-linux"),
                  "source": ("aarch64-linux", "x86_64-linux")}
NVIDIA_URL = "https://developer.download.nvidia.com/compute/"
_BUILD_WORDS = {"jetson": "Jetson", "aarch64": "other aarch64-linux", "x86_64": "x86_64-linux"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Taken:
    """One manifest a set takes: ``product`` at ``version`` (its ``release_label``), for the
    builds in ``builds`` (empty: every build); ``manifest`` is None when that version was not
    given."""

    product: str
    version: str
    manifest: Manifest | None
    builds: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SetChoice:
    """The manifests one set takes.

    Attributes:
        name: ``cudaPackages_13_4``.
        release: ``13.4``.
        taken: the CUDA manifest first, then each other redist's (one per build group).
        pins: product -> the pin this set follows.
        warnings: redists Nixpkgs pins but not for this set's CUDA release.

    Raises:
        Nothing: a value.
    """

    name: str
    release: str
    taken: tuple[Taken, ...]
    pins: tuple[tuple[str, Pin], ...] = ()
    warnings: tuple[str, ...] = ()


def product_of(manifest: Manifest) -> str:
    """The manifest's redist (``release_product``; a CUDA manifest without one: ``cuda``)."""
    if manifest.release_product:
        return manifest.release_product
    return "cuda" if any(p.pname == "cuda_cudart" for p in manifest.packages) else "unknown"


def label_of(manifest: Manifest) -> str:
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


def choose_sets(manifests: Sequence[Manifest]) -> list[SetChoice]:
    """One set per CUDA manifest (by release ``major.minor``, oldest first), with the other
    redists' manifests it takes. A ``ManifestError`` when there is no CUDA manifest, a CUDA
    manifest's ``release_label`` is not ``X.Y[...]``, or two share a release."""
    cuda = [m for m in manifests if product_of(m) == "cuda"]
    if not cuda:
        raise ManifestError("nixify-sets needs at least one CUDA redistrib manifest")
    products: dict[str, dict[str, Manifest]] = {}
    for manifest in manifests:
        if product_of(manifest) != "cuda":
            products.setdefault(product_of(manifest), {})[label_of(manifest)] = manifest
    choices: list[SetChoice] = []
    for manifest in sorted(cuda, key=lambda m: version_tuple(label_of(m))):
        release = _release_of(manifest)
        if release in {c.release for c in choices}:
            raise ManifestError(f"{manifest.source}: no release_label, or a second manifest "
                                f"for CUDA {release}")
        choices.append(_choose(manifest, release, products))
    return choices


def _release_of(manifest: Manifest) -> str:
    release = ".".join((manifest.release_label or "").split(".")[:2])
    if not re.fullmatch(r"\d{1,4}\.\d{1,4}", release):
        raise ManifestError(f"{manifest.source}: release_label {manifest.release_label!r} is "
                            "not a CUDA version (X.Y.Z)")
    return release


def _choose(cuda: Manifest, release: str,
            products: Mapping[str, Mapping[str, Manifest]]) -> SetChoice:
    name = f"cudaPackages_{release.replace('.', '_')}"
    taken = [Taken(product="cuda", version=label_of(cuda), manifest=cuda)]
    pins: list[tuple[str, Pin]] = []
    warnings: list[str] = []
    for product, given in sorted(products.items()):
        pin = pin_for(product, release)
        if pin is None:
            newest = max(given, key=version_tuple)
            if product in PINS:
                warnings.append(f"{name}: Nixpkgs pins no {product} for CUDA {release}; "
                                f"took the newest given, {newest}")
            taken.append(Taken(product=product, version=newest, manifest=given[newest]))
            continue
        pins.append((product, pin))
        for version in dict.fromkeys(pin.version(b) for b in PIN_CLASSES):
            builds = () if pin.uniform else pin.builds(version)
            taken.append(Taken(product=product, version=version, manifest=given.get(version),
                               builds=builds))
    return SetChoice(name=name, release=release, taken=tuple(taken), pins=tuple(pins),
                     warnings=tuple(warnings))


def not_given(name: str, taken: Taken) -> str:
    """Why a set's packages of a pinned version whose manifest was not given are broken."""
    return (f"{name} takes {taken.product} {taken.version} for {builds_words(taken.builds)} "
            "builds (Nixpkgs' pin); its manifest was not given")


def builds_words(builds: tuple[str, ...]) -> str:
    """``all``, or the build classes in words (``Jetson and other aarch64-linux``)."""
    if not builds or len(builds) == len(PIN_CLASSES):
        return "all"
    return " and ".join(_BUILD_WORDS[b] for b in builds)


def supported_archives(package: Package, release: str) -> dict[str, Artifact]:
    """NVIDIA platform -> the archive a set of CUDA ``release`` takes on it (Nixpkgs'
    getSupportedReleases, every platform: Windows ones too)."""
    for only in ("source", "linux-all"):
        found = [a for a in package.artifacts if a.platform == only]
        if found:
            return {only: found[0]}
    rank = {release: 0, release.split(".")[0]: 1}
    best: dict[str, Artifact] = {}
    for artifact in package.artifacts:
        if (package.cuda_variants or artifact.cuda_variant is not None) \
                and artifact.cuda_variant not in rank:
            continue
        held = best.get(artifact.platform)
        if held is None or rank.get(artifact.cuda_variant or "", 2) < rank.get(
                held.cuda_variant or "", 2):
            best[artifact.platform] = artifact
    return best

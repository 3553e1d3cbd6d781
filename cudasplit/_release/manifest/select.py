"""Choosing from a manifest: platform words, CUDA variants, packages, and where each tarball is.

Platform words are what a user types (``linux``, ``host``, ``aarch64-linux:8.7``); they resolve
to the manifest's platform keys, Jetson capabilities choosing between ``linux-sbsa`` and the L4T
build ``linux-aarch64``.
"""

from __future__ import annotations

import os
import platform as _platform
import re
from collections.abc import Iterable
from pathlib import Path

from cudasplit._argcheck import checked
from cudasplit._release.manifest.parse import VARIANT_KEY, Artifact, Manifest
from cudasplit._source import PLATFORMS
from cudasplit.errors import ManifestError

__all__ = [
    "JETSON_CAPABILITIES",
    "JETSON_SBSA_THRESHOLD",
    "LINUX_PLATFORMS",
    "arm_platform",
    "find_tarball",
    "host_platform",
    "normalise_variant",
    "resolve_platform_word",
    "resolve_platforms",
    "select_artifacts",
]

LINUX_PLATFORMS: tuple[str, ...] = tuple(p for p in PLATFORMS if p.startswith("linux-"))


def host_platform() -> str | None:
    """The NVIDIA platform name of this machine (Arm servers read as ``linux-sbsa``)."""
    return {"x86_64": "linux-x86_64", "aarch64": "linux-sbsa",
            "ppc64le": "linux-ppc64le"}.get(_platform.machine())


# Jetson GPUs by compute capability (Nano 5.3, TX2 6.2, Xavier 7.2, Orin 8.7, Thor 10.1 on
# CUDA 12 / 11.0 on CUDA 13). Below the threshold a Jetson needs the L4T build (linux-aarch64);
# at or above it the server build (linux-sbsa) supports it (Nixpkgs' _cuda.lib.getRedistSystem).
JETSON_CAPABILITIES = frozenset({"5.3", "6.2", "7.2", "8.7", "8.8", "10.1", "11.0"})
JETSON_SBSA_THRESHOLD = {"12": "10.1", "13": "8.7"}
# Facts of NVIDIA's manifests (redistrib 12.9.2 has linux-aarch64; 13.0.3, 13.3.1 and 13.4.2 do
# not) and of Nixpkgs' package sets: "Jetson Orin is supported with CUDA 13 only from CUDA 13.2,
# when it moved to linux-sbsa" (pkgs/top-level/cuda-packages.nix; nixpkgs#528562, #530931).
NO_JETSON_BUILD_FROM = "13.0"
ORIN_SBSA_FROM = "13.2"
_ARM_WORDS = ("aarch64", "aarch64-linux", "arm64")


def _capability(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError as exc:
        raise ManifestError(f"{text!r} is not a CUDA capability (like 8.7)") from exc


def arm_platform(capabilities: Iterable[str], cuda_version: str | None) -> str:
    """``linux-sbsa`` or ``linux-aarch64`` for an Arm build targeting ``capabilities``.

    A Jetson capability below the CUDA major's threshold (10.1 for CUDA 12, 8.7 for CUDA 13)
    selects ``linux-aarch64``; anything else (servers, or no capability) ``linux-sbsa``.
    CUDA 13 manifests have no ``linux-aarch64`` at all (an error), and Orin (8.7) runs the sbsa
    build only from CUDA 13.2 (an error on 13.0 and 13.1, as Nixpkgs' sets say). An unknown
    CUDA version (or a bare major) counts as the newest.
    """
    major = (cuda_version or "13").split(".")[0]
    threshold = _capability(JETSON_SBSA_THRESHOLD.get(major, "8.7"))
    jetson = [c for c in capabilities if c in JETSON_CAPABILITIES]
    old_jetson = [c for c in jetson if _capability(c) < threshold]
    release = _release(cuda_version)
    if old_jetson and release is not None and release >= _capability(NO_JETSON_BUILD_FROM):
        raise ManifestError(f"CUDA {cuda_version} has no linux-aarch64 build for capability "
                            f"{', '.join(old_jetson)} (no CUDA 13 manifest has linux-aarch64)")
    if old_jetson:
        return "linux-aarch64"
    orin = [c for c in jetson if _capability(c) < (10, 1)]
    if orin and release is not None and (13, 0) <= release < _capability(ORIN_SBSA_FROM):
        raise ManifestError(f"CUDA {cuda_version} has no build for Jetson capability "
                            f"{', '.join(orin)}: linux-sbsa supports Orin from CUDA "
                            f"{ORIN_SBSA_FROM} and CUDA 13 has no linux-aarch64 (Nixpkgs: "
                            "nixpkgs#528562)")
    return "linux-sbsa"


def _release(cuda_version: str | None) -> tuple[int, ...] | None:
    """``(major, minor)`` of a CUDA version; None when unknown or only a major."""
    parts = (cuda_version or "").split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return (int(parts[0]), int(parts[1]))


def resolve_platform_word(word: str, cuda_version: str | None = None) -> str | None:
    """``aarch64-linux:8.7`` / ``aarch64:7.2,8.7`` -> linux-aarch64 or linux-sbsa (Nix system
    names also map: ``x86_64-linux`` -> linux-x86_64); None for words this does not handle."""
    name, _, caps = word.partition(":")
    if name in _ARM_WORDS:
        return arm_platform([c for c in caps.split(",") if c], cuda_version)
    return {"x86_64-linux": "linux-x86_64", "x86_64": "linux-x86_64",
            "ppc64le-linux": "linux-ppc64le", "powerpc64le-linux": "linux-ppc64le"}.get(word)


def resolve_platforms(names: Iterable[str], manifest: Manifest | None = None
                      ) -> frozenset[str] | None:
    """Platform words -> the set of platform keys to keep; ``None`` means every platform.

    Accepted: concrete platform names (``linux-x86_64``, ``linux-sbsa``, ``linux-aarch64``,
    ``linux-ppc64le``, ``windows-x86_64``, ``linux-all``, ``source``, or any key the manifest
    uses); ``aarch64-linux:CAP[,CAP]`` (sbsa or the Jetson build, see :func:`arm_platform`;
    the CUDA version is the manifest's release label); ``all`` (every platform); ``linux``
    (every ``linux-*`` key, including the
    arch-independent ``linux-all``); ``host`` (this machine's platform). ``linux-all`` is
    NVIDIA's own name for arch-independent tarballs, so it never means "all Linux platforms".
    No names at all means every platform.
    """
    words = list(names)
    if not words or "all" in words:
        return None
    known = set(PLATFORMS) | set(manifest.platforms if manifest else ())
    chosen: set[str] = set()
    for word in words:
        if word == "linux":
            chosen.update(p for p in known if p.startswith("linux-"))
        elif word == "host":
            host = host_platform()
            if host is None:
                raise ManifestError(f"no NVIDIA platform for this machine ({_platform.machine()})")
            chosen.add(host)
        elif word in known:
            chosen.add(word)
        elif resolve_platform_word(word, manifest.release_label if manifest else None):
            chosen.add(str(resolve_platform_word(word, manifest.release_label if manifest
                                                 else None)))
        else:
            raise ManifestError(f"unknown platform {word!r} (known: all, linux, host, "
                                f"{', '.join(sorted(known))})")
    return frozenset(chosen)


def normalise_variant(word: str) -> str:
    """``"cuda12"``, ``"12"`` -> ``"12"``."""
    match = VARIANT_KEY.match(word)
    value = match[1] if match else word
    if not re.fullmatch(r"\d+(?:\.\d+)?", value):
        raise ManifestError(f"bad CUDA variant {word!r} (use e.g. 12 or cuda12)")
    return value


@checked
def select_artifacts(
    manifest: Manifest,
    *,
    platforms: Iterable[str] | None = None,
    cuda_variants: Iterable[str] | None = None,
    packages: Iterable[str] | None = None,
) -> tuple[Artifact, ...]:
    """The artifacts of a manifest chosen by platform, CUDA variant and package, in
    manifest order.

    Args:
        manifest: from :func:`load_manifest`.
        platforms: platform words (``linux``, ``x86_64-linux``, ``linux-sbsa``, ...;
            ``None``: all).
        cuda_variants: CUDA majors of variant packages (``12`` or ``cuda12``; ``None``: all;
            packages without variants are always kept).
        packages: package names (``None``: all).

    Returns:
        The chosen artifacts.

    Raises:
        ManifestError: a platform word names no platform.
    """
    keep_platforms = resolve_platforms(platforms or (), manifest)
    keep_variants = (None if cuda_variants is None
                     else frozenset(normalise_variant(v) for v in cuda_variants))
    keep_packages = None if packages is None else frozenset(packages)
    return tuple(
        a for a in manifest.artifacts
        if (keep_platforms is None or a.platform in keep_platforms)
        and (keep_variants is None or a.cuda_variant is None or a.cuda_variant in keep_variants)
        and (keep_packages is None or a.package in keep_packages)
    )


def find_tarball(artifact: Artifact, tarball_dir: str | os.PathLike[str]) -> Path | None:
    """``DIR/<basename>`` (a flat download directory), else ``DIR/<relative_path>`` (a mirror
    of NVIDIA's tree); None when neither is a file."""
    base = Path(tarball_dir)
    for candidate in (base / artifact.filename, base / artifact.relative_path):
        if candidate.is_file():
            return candidate
    return None

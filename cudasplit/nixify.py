"""Nix expressions from NVIDIA's manifests: one package per manifest entry
(:func:`nixify_manifest`), or one package set per CUDA release (:func:`nixify_sets`), the
drop-in for Nixpkgs' ``cudaPackages_X_Y``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit._api.release": ("nixify_manifest", "nixify_sets"),
    "cudasplit._release.nixify": (
        "Assertion", "NixifyResult", "PackagePlan", "PackageSet", "Pin", "PlatformPlan",
        "SetPackage", "SetsResult"),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._api.release import nixify_manifest, nixify_sets
    from cudasplit._release.nixify import (
        Assertion,
        NixifyResult,
        PackagePlan,
        PackageSet,
        Pin,
        PlatformPlan,
        SetPackage,
        SetsResult,
    )

__all__ = [
    "Assertion",
    "NixifyResult",
    "PackagePlan",
    "PackageSet",
    "Pin",
    "PlatformPlan",
    "SetPackage",
    "SetsResult",
    "nixify_manifest",
    "nixify_sets",
]

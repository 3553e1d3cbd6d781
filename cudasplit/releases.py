"""Whole releases: NVIDIA's manifests, the tarballs they name, and two releases compared.

:func:`verify_manifest` checks the tarballs a manifest names (size and sha256);
:func:`manifest_features` writes the feature manifest of them (:func:`features_of` for one
tarball); :func:`diff_releases` compares two releases (tarballs, split directories or
manifests). :func:`load_manifest` and :func:`select_artifacts` are the pieces under them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit._api.release": ("diff_releases", "manifest_features", "verify_manifest"),
    "cudasplit._release.manifest": (
        "Artifact", "Manifest", "Package", "VerifyReport", "VerifyResult", "VerifyStatus",
        "load_manifest", "select_artifacts"),
    "cudasplit._release.features": (
        "FeatureReport", "FeatureResult", "FeatureStatus", "Features", "features_of"),
    "cudasplit._release.diff": ("Change", "ReleaseDiff"),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._api.release import diff_releases, manifest_features, verify_manifest
    from cudasplit._release.diff import Change, ReleaseDiff
    from cudasplit._release.features import (
        FeatureReport,
        FeatureResult,
        Features,
        FeatureStatus,
        features_of,
    )
    from cudasplit._release.manifest import (
        Artifact,
        Manifest,
        Package,
        VerifyReport,
        VerifyResult,
        VerifyStatus,
        load_manifest,
        select_artifacts,
    )

__all__ = [
    "Artifact",
    "Change",
    "FeatureReport",
    "FeatureResult",
    "FeatureStatus",
    "Features",
    "Manifest",
    "Package",
    "ReleaseDiff",
    "VerifyReport",
    "VerifyResult",
    "VerifyStatus",
    "diff_releases",
    "features_of",
    "load_manifest",
    "manifest_features",
    "select_artifacts",
    "verify_manifest",
]

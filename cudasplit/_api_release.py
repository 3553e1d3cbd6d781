"""Release-level tools, by manifest path: verify downloads, feature manifests, Nix
expressions, and the difference between two releases.

Each takes what a command line has (paths and words) and returns the report object of the
module that does the work; none prints. The manifest is NVIDIA's ``redistrib_*.json``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ._diff import ReleaseDiff, diff_snapshots, snapshot
from ._features import FeatureReport, features_for_manifest
from ._manifest import VerifyReport, load_manifest, verify
from ._nixify import DEFAULT_BASE_URL, NixifyResult, nixify
from ._nixsets import SetsResult, plan_sets, write_sets

PathLike = str | os.PathLike[str]

__all__ = ["diff_releases", "manifest_features", "nixify_manifest", "nixify_sets",
           "verify_manifest"]


def verify_manifest(manifest: PathLike, tarball_dir: PathLike, *,
                    platforms: Sequence[str] = (), cuda_variants: Sequence[str] = (),
                    packages: Sequence[str] = (), jobs: int = 0) -> VerifyReport:
    """Size and sha256 of every tarball ``manifest`` names (empty selections: all of them).
    Missing or altered tarballs are results (``report.ok`` is False), not exceptions."""
    return verify(load_manifest(manifest), tarball_dir, platforms=platforms,
                  cuda_variants=cuda_variants or None, packages=packages or None, jobs=jobs)


def manifest_features(manifest: PathLike, tarball_dir: PathLike, *,
                      platforms: Sequence[str] = (), cuda_variants: Sequence[str] = (),
                      packages: Sequence[str] = (), jobs: int = 0,
                      extended: bool = False) -> FeatureReport:
    """The feature manifest (``feature_*.json`` schema) of the tarballs ``manifest`` names,
    each streamed once; ``extended`` adds SONAMEs provided and needed. Missing or unreadable
    tarballs are results (``report.complete`` is False), never guessed."""
    return features_for_manifest(
        load_manifest(manifest), tarball_dir, platforms=platforms,
        cuda_variants=cuda_variants or None, packages=packages or None, jobs=jobs,
        extended=extended)


def nixify_manifest(manifest: PathLike, tarball_dir: PathLike, output_dir: PathLike, *,
                    platforms: Sequence[str] = (), packages: Sequence[str] = (),
                    base_url: str | None = None, jobs: int = 1) -> NixifyResult:
    """Write one Nix expression per package of ``manifest`` plus ``default.nix`` into
    ``output_dir``; ``base_url`` prefixes the manifest's relative paths (default: NVIDIA's
    redist URL)."""
    return nixify(load_manifest(manifest), tarball_dir, output_dir,
                  platforms=platforms or None, packages=packages or None,
                  base_url=base_url or DEFAULT_BASE_URL, jobs=jobs)


def nixify_sets(manifests: Sequence[PathLike], output_dir: PathLike, *,
                base_url: str | None = None) -> SetsResult:
    """One Nix package set per CUDA release among ``manifests`` (NVIDIA's redistrib JSON of
    CUDA and of other redists, e.g. cuDNN) into ``output_dir``, from the manifests alone:
    Nixpkgs' cudaPackages_X_Y with propagation edges, meta and per-package tests."""
    loaded = [load_manifest(m) for m in manifests]
    return write_sets(plan_sets(loaded, base_url or DEFAULT_BASE_URL), output_dir)


def diff_releases(old: PathLike, new: PathLike, *, tarball_dir: PathLike | None = None,
                  old_tarballs: PathLike | None = None, new_tarballs: PathLike | None = None,
                  platform: str = "linux-x86_64", jobs: int = 1) -> ReleaseDiff:
    """What changed between two releases, each a tarball, an unpacked tree, a split directory
    or a manifest (with its tarballs in ``old_tarballs``/``new_tarballs``, default
    ``tarball_dir``; ``platform`` picks the tarballs compared)."""
    before = snapshot(old, tarball_dir=old_tarballs or tarball_dir, platform=platform,
                      jobs=jobs)
    after = snapshot(new, tarball_dir=new_tarballs or tarball_dir, platform=platform, jobs=jobs)
    return diff_snapshots(before, after)

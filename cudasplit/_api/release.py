"""Release-level tools, by manifest path: verify downloads, feature manifests, Nix
expressions, and the difference between two releases.

Each takes what a command line has (paths and words) and returns the report object of the
module that does the work; none prints. The manifest is NVIDIA's ``redistrib_*.json``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cudasplit._argcheck import checked
from cudasplit._release.diff import ReleaseDiff, diff_snapshots, snapshot
from cudasplit._release.features import FeatureReport, features_for_manifest
from cudasplit._release.manifest import VerifyReport, load_manifest, verify
from cudasplit._release.nixify import (
    DEFAULT_BASE_URL,
    NixifyResult,
    SetsResult,
    nixify,
    plan_sets,
    write_sets,
)
from cudasplit._run import ProgressCallback, refuse_overlap, resolve_jobs
from cudasplit._source import PLATFORMS
from cudasplit._split.options import unknown_platform
from cudasplit.errors import OptionsError

PathLike = str | os.PathLike[str]

__all__ = ["diff_releases", "manifest_features", "nixify_manifest", "nixify_sets",
           "verify_manifest"]


@checked(jobs=0)
def verify_manifest(manifest: PathLike, tarball_dir: PathLike, *,
                    platforms: Sequence[str] = (), cuda_variants: Sequence[str] = (),
                    packages: Sequence[str] = (), jobs: int | None = None,
                    progress: ProgressCallback | None = None) -> VerifyReport:
    """Size and sha256 of every tarball ``manifest`` names. Missing or altered tarballs
    are results (``report.ok`` is False), not exceptions.

    Args:
        manifest: NVIDIA's ``redistrib_*.json``.
        tarball_dir: where the tarballs are (flat, or NVIDIA's relative paths).
        platforms: platform words to keep (empty: all).
        cuda_variants: CUDA majors of variant packages to keep (empty: all).
        packages: package names to keep (empty: all).
        jobs: tarballs hashed at once (``None`` or 0: every CPU the process may use).
        progress: called with a :class:`Progress` as the bytes are hashed and after every
            tarball.

    Returns:
        A verify report (``ok``, ``counts()``, ``results``, ``as_dict()``).

    Raises:
        ManifestError: the manifest cannot be read.
    """
    return verify(load_manifest(manifest), tarball_dir, platforms=platforms,
                  cuda_variants=cuda_variants or None, packages=packages or None, jobs=jobs,
                  progress=progress)


@checked(jobs=0)
def manifest_features(manifest: PathLike, tarball_dir: PathLike, *,
                      platforms: Sequence[str] = (), cuda_variants: Sequence[str] = (),
                      packages: Sequence[str] = (), jobs: int | None = None,
                      extended: bool = False,
                      progress: ProgressCallback | None = None) -> FeatureReport:
    """The feature manifest (``feature_*.json`` schema) of the tarballs ``manifest``
    names, each streamed once. Missing or unreadable tarballs are results
    (``report.complete`` is False), never guessed.

    Args:
        manifest: NVIDIA's ``redistrib_*.json``.
        tarball_dir: where the tarballs are (flat, or NVIDIA's relative paths).
        platforms: platform words to keep (empty: all).
        cuda_variants: CUDA majors of variant packages to keep (empty: all).
        packages: package names to keep (empty: all).
        jobs: tarballs scanned at once, in processes (``None`` or 0: every CPU the process may use).
        extended: add SONAMEs provided and needed.
        progress: called with a :class:`Progress` as the tarballs are read and after every
            tarball.

    Returns:
        A feature report (``to_feature_json()``, ``complete``).

    Raises:
        ManifestError: the manifest cannot be read.
    """
    return features_for_manifest(
        load_manifest(manifest), tarball_dir, platforms=platforms,
        cuda_variants=cuda_variants or None, packages=packages or None, jobs=jobs,
        extended=extended, progress=progress)


def _nix_files_apart(output_dir: PathLike, inputs: Sequence[PathLike]) -> None:
    """The one rule of every command's ``-o``: ``output_dir`` may not be, be inside or contain
    an input (a manifest, the tarball directory), so no input is ever a file it writes over."""
    refuse_overlap([output_dir], inputs)


@checked(jobs=0)
def nixify_manifest(manifest: PathLike, tarball_dir: PathLike, output_dir: PathLike, *,
                    platforms: Sequence[str] = (), packages: Sequence[str] = (),
                    base_url: str | None = None, jobs: int | None = None,
                    progress: ProgressCallback | None = None,
                    toolkit: bool = False) -> NixifyResult:
    """Write one Nix expression per package of ``manifest`` plus ``default.nix`` into
    ``output_dir``.

    Args:
        manifest: NVIDIA's ``redistrib_*.json``.
        tarball_dir: where the tarballs are; each is read once.
        output_dir: where the ``.nix`` files go (created).
        platforms: platform words to keep (empty: every linux platform at hand).
        packages: package names to keep (empty: all).
        base_url: prefix of the manifest's relative paths (default: NVIDIA's redist URL).
        jobs: cores for reading the tarballs, one after another (``None`` or 0: every CPU
            the process may use).
        progress: called with a :class:`Progress` as the tarballs are read and after every
            tarball.
        toolkit: also write ``cudaToolkit.nix``, one toolkit prefix over every package.

    Returns:
        What was written: the package plans and the file names.

    Raises:
        ManifestError: the manifest cannot be read, or none of its tarballs is at hand.
        OutputError: ``output_dir`` cannot be written.
        SourceError: a tarball cannot be read.
    """
    _nix_files_apart(output_dir, [manifest, tarball_dir])
    return nixify(load_manifest(manifest), tarball_dir, output_dir,
                  platforms=platforms or None, packages=packages or None,
                  base_url=base_url or DEFAULT_BASE_URL, jobs=resolve_jobs(jobs),
                  progress=progress,
                  toolkit=toolkit)


@checked
def nixify_sets(manifests: Sequence[PathLike], output_dir: PathLike, *,
                base_url: str | None = None) -> SetsResult:
    """One Nix package set per CUDA release among ``manifests``, from the manifests alone:
    Nixpkgs' ``cudaPackages_X_Y`` with propagation edges, meta and per-package tests, plus a
    ``release.nix`` with one job per set, package and system.

    Several manifests of one redist may be given: cuDNN, cuSPARSELt and TensorRT take, per set,
    the version Nixpkgs pins for it (by Jetson, other aarch64-linux, x86_64-linux); other
    redists their newest. A pinned version not given is a broken package and a warning.

    Args:
        manifests: NVIDIA's redistrib JSON files of CUDA and of other redists (cuDNN,
            cuSPARSELt, TensorRT, ...), several versions each if wanted.
        output_dir: where the ``.nix`` files go (created).
        base_url: prefix of every manifest's relative paths, a mirror (default: NVIDIA's URL
            of each redist, ``compute/<redist>/redist/``, TensorRT ``compute/machine-learning/``).

    Returns:
        What was written: the sets (each with its ``pins`` and ``warnings``) and the file names.

    Raises:
        ManifestError: a manifest cannot be read.
        OutputError: ``output_dir`` cannot be written.
    """
    loaded = [load_manifest(m) for m in manifests]
    _nix_files_apart(output_dir, list(manifests))
    return write_sets(plan_sets(loaded, base_url), output_dir)


@checked(jobs=0)
def diff_releases(old: PathLike, new: PathLike, *, tarball_dir: PathLike | None = None,
                  old_tarballs: PathLike | None = None, new_tarballs: PathLike | None = None,
                  platform: str = "linux-x86_64", jobs: int | None = None,
                  progress: ProgressCallback | None = None) -> ReleaseDiff:
    """What changed between two releases: packages, outputs, members, SONAMEs.

    Args:
        old: a tarball, an unpacked tree, a split directory, or a manifest.
        new: the same kinds as ``old``.
        tarball_dir: where both manifests' tarballs are.
        old_tarballs: where ``old``'s tarballs are (default: ``tarball_dir``).
        new_tarballs: where ``new``'s tarballs are (default: ``tarball_dir``).
        platform: the platform compared when ``old`` and ``new`` are manifests.
        jobs: cores for reading the tarballs, one after another (``None`` or 0: every CPU
            the process may use).
        progress: called with a :class:`Progress` as the tarballs are read (both passes).

    Returns:
        A release diff (``changes``, ``text_lines()``, ``as_dict()``, ``draw("dot")``).

    Raises:
        ManifestError: a manifest cannot be read or names no tarball at hand.
        SourceError: a tarball or directory cannot be read.
        RulesError: a rule file is invalid.
    """
    if platform not in PLATFORMS:
        raise OptionsError(unknown_platform(platform, "platform"))
    cores = resolve_jobs(jobs)
    before = snapshot(old, tarball_dir=old_tarballs or tarball_dir, platform=platform,
                      jobs=cores, progress=progress)
    after = snapshot(new, tarball_dir=new_tarballs or tarball_dir, platform=platform,
                     jobs=cores, progress=progress)
    return diff_snapshots(before, after)

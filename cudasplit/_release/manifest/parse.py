"""``redistrib_*.json`` read and checked into flat :class:`Artifact` records.

A manifest names, per package and platform, one tarball (``relative_path``) with its size and
checksums. Packages built for several CUDA majors (cuDNN >= 9, cuTENSOR, ...) nest one level
deeper: ``"linux-x86_64": {"cuda12": {...}}`` and list the majors in ``"cuda_variant"``. Both
shapes parse into the same flat :class:`Artifact` records, whose ``cuda_variant`` is ``None``
for the plain shape.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from cudasplit.errors import ManifestError, NotFoundError

__all__ = ["VARIANT_KEY", "Artifact", "Manifest", "Package", "load_manifest", "parse_manifest"]

# Package keys that are not platforms; anything else holding an object is a platform.
_META_KEYS = frozenset({"name", "license", "license_path", "version", "cuda_variant"})
_TOP_META_KEYS = ("release_date", "release_label", "release_product")
VARIANT_KEY = re.compile(r"^cuda(\d+(?:\.\d+)?)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Artifact:
    """One tarball named by the manifest."""

    package: str  # the manifest key (pname), e.g. "cuda_cudart"
    platform: str
    cuda_variant: str | None  # "12" for a ``cuda12`` entry, None when the package is not nested
    relative_path: str
    sha256: str
    md5: str | None
    size: int

    @property
    def filename(self) -> str:
        return PurePosixPath(self.relative_path).name

    @property
    def label(self) -> str:
        """``pname/platform[/cudaNN]``: how reports name the artifact."""
        variant = f"/cuda{self.cuda_variant}" if self.cuda_variant else ""
        return f"{self.package}/{self.platform}{variant}"


@dataclass(frozen=True, slots=True)
class Package:
    """One package of a manifest, with its tarballs.

    Attributes:
        pname: the manifest key (``cuda_cudart``).
        name: its display name.
        license: its licence name.
        license_path: the licence file's relative path.
        version: its version.
        cuda_variants: the CUDA majors it is built for (``cuda_variant``; empty for plain ones).
        artifacts: its tarballs, in manifest order.

    Raises:
        Nothing: a value.
    """

    pname: str
    name: str
    license: str | None
    license_path: str | None
    version: str
    cuda_variants: tuple[str, ...]  # from ``"cuda_variant"``; () for plain packages
    artifacts: tuple[Artifact, ...]  # in manifest order

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.platform for a in self.artifacts))


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed ``redistrib_*.json`` (:func:`load_manifest`).

    Attributes:
        source: the file it was read from, for messages.
        release_date: ``release_date``.
        release_label: ``release_label`` (the release's version).
        release_product: ``release_product`` (``cuda``, ``cudnn``, ...).
        packages: its packages, in manifest order.

    Raises:
        Nothing: a value (``package`` raises NotFoundError, also a KeyError, for a
        package it lacks).
    """

    source: str  # file name, for messages
    release_date: str | None
    release_label: str | None
    release_product: str | None
    packages: tuple[Package, ...]  # in manifest order

    def package(self, pname: str) -> Package:
        for package in self.packages:
            if package.pname == pname:
                return package
        raise NotFoundError(f"{self.source}: no package {pname!r}")

    @property
    def artifacts(self) -> tuple[Artifact, ...]:
        return tuple(a for p in self.packages for a in p.artifacts)

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.platform for a in self.artifacts))


# NVIDIA's manifests are under 1 MB; the cap keeps ``verify /dev/zero`` (or a 20 GB file)
# from being read whole into memory (24 GB RSS, then the OOM killer).
MAX_MANIFEST_BYTES = 16 << 20


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate NVIDIA's ``redistrib_*.json``.

    Args:
        path: the manifest file.

    Returns:
        The :class:`Manifest`: release facts and every package's artifacts.

    Raises:
        ManifestError: the file cannot be read, is not JSON, or lacks a key (the message
            names the file and the key).
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as fh:
            raw = fh.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ManifestError(f"{name}: cannot read manifest ({exc.strerror or exc})") from exc
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{name}: larger than {MAX_MANIFEST_BYTES >> 20} MiB; not an NVIDIA "
                            "manifest (those are under 1 MB)")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{name}: not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise ManifestError(f"{name}: not valid JSON (nested too deeply)") from exc
    return parse_manifest(data, source=name)


def parse_manifest(data: Any, *, source: str = "<manifest>") -> Manifest:
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: the top level must be a JSON object")
    meta = {k: _opt_str(data, k, source) for k in _TOP_META_KEYS}
    packages = tuple(
        _parse_package(pname, value, source)
        for pname, value in data.items()
        if pname not in _TOP_META_KEYS
    )
    return Manifest(source, meta["release_date"], meta["release_label"], meta["release_product"],
                    packages)


def _opt_str(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise ManifestError(f"{where}: {key!r} must be a string")
    return value


def _parse_package(pname: str, value: Any, source: str) -> Package:
    where = f"{source}: package {pname!r}"
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: must be a JSON object")
    version = value.get("version")
    if not isinstance(version, str) or not version:
        raise ManifestError(f"{where}: 'version' (a string) is required")
    variants = value.get("cuda_variant", [])
    if not isinstance(variants, list) or not all(isinstance(v, str) for v in variants):
        raise ManifestError(f"{where}: 'cuda_variant' must be a list of strings")
    artifacts: list[Artifact] = []
    for key, entry in value.items():
        if key in _META_KEYS:
            continue
        if not isinstance(entry, dict):
            raise ManifestError(f"{where}: platform {key!r} must be a JSON object")
        artifacts.extend(_parse_platform(pname, key, entry, f"{where} platform {key!r}"))
    return Package(pname, str(value.get("name") or pname), _opt_str(value, "license", where),
                   _opt_str(value, "license_path", where), version, tuple(variants),
                   tuple(artifacts))


def _parse_platform(pname: str, platform: str, entry: Mapping[str, Any], where: str,
                    ) -> list[Artifact]:
    if "relative_path" in entry:
        return [_parse_artifact(pname, platform, None, entry, where)]
    # The cuda_variant shape: every key is cudaNN holding one artifact.
    artifacts = []
    for key, nested in entry.items():
        match = VARIANT_KEY.match(key)
        if match is None or not isinstance(nested, dict):
            raise ManifestError(f"{where}: expected 'relative_path' or 'cudaNN' objects, "
                                f"found {key!r}")
        artifacts.append(_parse_artifact(pname, platform, match[1], nested, f"{where} {key}"))
    return artifacts


def _parse_artifact(pname: str, platform: str, variant: str | None, entry: Mapping[str, Any],
                    where: str) -> Artifact:
    rel = entry.get("relative_path")
    if not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in rel.split("/"):
        raise ManifestError(f"{where}: 'relative_path' must be a relative path without '..'")
    sha256 = entry.get("sha256")
    if not isinstance(sha256, str) or not _SHA256.match(sha256.lower()):
        raise ManifestError(f"{where}: 'sha256' must be 64 hex digits")
    return Artifact(pname, platform, variant, rel, sha256.lower(), _opt_str(entry, "md5", where),
                    _parse_size(entry.get("size"), where))


def _parse_size(value: Any, where: str) -> int:
    # NVIDIA writes the size as a string of digits; accept a JSON integer too.
    if isinstance(value, bool):
        raise ManifestError(f"{where}: 'size' must be a number of bytes")
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise ManifestError(f"{where}: 'size' must be a number of bytes, got {value!r}")

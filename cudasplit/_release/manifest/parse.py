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

from cudasplit._argcheck import checked
from cudasplit.errors import ManifestError, NotFoundError

__all__ = ["PLATFORM_WORD", "PNAME", "VARIANT_KEY", "VERSION_WORD", "Artifact", "Manifest",
           "Package", "load_manifest", "parse_manifest"]

# Package keys that are not platforms; anything else holding an object is a platform.
_META_KEYS = frozenset({"name", "license", "license_path", "version", "cuda_variant"})
_TOP_META_KEYS = ("release_date", "release_label", "release_product")
VARIANT_KEY = re.compile(r"^cuda([0-9]+(?:\.[0-9]+)?)$")

# The one schema every manifest is checked against when it is loaded, so no tool downstream
# (verify, features, nixify, nixify-sets, diff) meets a value it cannot use: "²" passed
# str.isdigit() and then failed int(). Patterns are ASCII ([0-9], never \d, which takes any
# Unicode digit). Names become Nix attribute names, file names and report keys: identifiers.
# Versions compare by their dotted numbers. Free text (names, licenses) may hold anything
# printable. A size fits 63 bits.
PNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")
PLATFORM_WORD = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
VERSION_WORD = re.compile(r"[0-9][0-9A-Za-z._+-]{0,63}")
_PRODUCT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")
_VARIANT = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_MD5 = re.compile(r"[0-9a-fA-F]{32}")
_SIZE_TEXT = re.compile(r"[0-9]{1,19}")
MAX_SIZE = (1 << 63) - 1
MAX_TEXT = 1024


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


# NVIDIA's manifests are under 1 MB (the largest, 12.2.2's, 56 KB); the cap keeps ``verify
# /dev/zero`` (or a 20 GB file) from being read whole into memory (24 GB RSS, then the OOM
# killer), and bounds what ``json`` makes of the bytes: about 28 bytes of objects per byte at
# worst (``[[],[],...]``), so 4 MiB is at most about 110 MB (16 MiB was 445 MB).
MAX_MANIFEST_BYTES = 4 << 20


@checked
def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate NVIDIA's ``redistrib_*.json``.

    Args:
        path: the manifest file.

    Returns:
        The :class:`Manifest`: release facts and every package's artifacts.

    Raises:
        ManifestError: the file cannot be read, is not JSON, or breaks the schema: a key
            missing, a size that is no number of bytes, a checksum that is not hex, a path
            that is absolute or climbs, a package name that is no identifier (the message
            names the file, the package and the key).
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
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError; an int of 4,300+ digits
        raise ManifestError(f"{name}: not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise ManifestError(f"{name}: not valid JSON (nested too deeply)") from exc
    return parse_manifest(data, source=name)


def parse_manifest(data: Any, *, source: str = "<manifest>") -> Manifest:
    """Check ``data`` (a manifest read as JSON) against the schema and flatten it.

    Raises:
        ManifestError: a key or value breaks the schema (the message names the file, the
            package, the platform and the key).
    """
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: the top level must be a JSON object")
    meta = {"release_date": _text(data, "release_date", source),
            "release_label": _word(data, "release_label", source, VERSION_WORD, "a version"),
            "release_product": _word(data, "release_product", source, _PRODUCT,
                                     "a name of letters, digits, '_' and '-'")}
    packages = tuple(
        _parse_package(pname, value, source)
        for pname, value in data.items()
        if pname not in _TOP_META_KEYS
    )
    return Manifest(source, meta["release_date"], meta["release_label"], meta["release_product"],
                    packages)


def _shown(value: object) -> str:
    """A value for a message: short, one line (the CLI escapes what is left)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + "..." + text[-12:]


def _text(table: Mapping[str, Any], key: str, where: str, *,
          required: bool = False) -> str | None:
    """Free text: a printable string of at most :data:`MAX_TEXT` characters (or absent)."""
    value = table.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.isprintable() or len(value) > MAX_TEXT \
            or (required and not value):
        raise ManifestError(f"{where}: {key!r} must be a printable string of at most "
                            f"{MAX_TEXT} characters, not {_shown(value)}")
    return value


def _word(table: Mapping[str, Any], key: str, where: str, pattern: re.Pattern[str],
          what: str, *, required: bool = False) -> str | None:
    """A string matching ``pattern`` whole (or absent unless ``required``)."""
    value = table.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ManifestError(f"{where}: {key!r} must be {what}, not {_shown(value)}")
    return value


def _path(value: Any, where: str, key: str) -> str:
    """A relative path: no ``..``, no empty component, nothing unprintable, no backslash."""
    parts = value.split("/") if isinstance(value, str) else []
    if (not isinstance(value, str) or not value or value.startswith("/")
            or len(value) > MAX_TEXT or not value.isprintable() or "\\" in value
            or any(p in ("", "..") or len(p) > 255 for p in parts)):
        raise ManifestError(f"{where}: {key!r} must be a relative path without '..' or empty "
                            f"components, not {_shown(value)}")
    return value


def _parse_package(pname: str, value: Any, source: str) -> Package:
    if not PNAME.fullmatch(pname):
        raise ManifestError(f"{source}: package name {_shown(pname)} is not an identifier "
                            "(letters, digits, '_' and '-', not starting with a digit)")
    where = f"{source}: package {pname!r}"
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: must be a JSON object")
    version = _word(value, "version", where, VERSION_WORD, "a version such as '12.9.79'",
                    required=True)
    assert version is not None
    variants = value.get("cuda_variant", [])
    if not isinstance(variants, list) or not all(
            isinstance(v, str) and _VARIANT.fullmatch(v) for v in variants):
        raise ManifestError(f"{where}: 'cuda_variant' must be a list of CUDA majors such as "
                            f"'12', not {_shown(variants)}")
    license_path = value.get("license_path")
    if license_path is not None:
        _path(license_path, where, "license_path")
    artifacts: list[Artifact] = []
    for key, entry in value.items():
        if key in _META_KEYS:
            continue
        if not PLATFORM_WORD.fullmatch(key):
            raise ManifestError(f"{where}: platform {_shown(key)} is not a platform name "
                                "(such as 'linux-x86_64')")
        if not isinstance(entry, dict):
            raise ManifestError(f"{where}: platform {key!r} must be a JSON object")
        artifacts.extend(_parse_platform(pname, key, entry, f"{where} platform {key!r}"))
    return Package(pname, _text(value, "name", where) or pname, _text(value, "license", where),
                   license_path, version, tuple(variants), tuple(artifacts))


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
                                f"found {_shown(key)}")
        artifacts.append(_parse_artifact(pname, platform, match[1], nested, f"{where} {key}"))
    return artifacts


def _parse_artifact(pname: str, platform: str, variant: str | None, entry: Mapping[str, Any],
                    where: str) -> Artifact:
    rel = _path(entry.get("relative_path"), where, "relative_path")
    sha256 = _word(entry, "sha256", where, _SHA256, "64 hex digits", required=True)
    md5 = _word(entry, "md5", where, _MD5, "32 hex digits")
    assert sha256 is not None
    return Artifact(pname, platform, variant, rel, sha256.lower(),
                    None if md5 is None else md5.lower(), _parse_size(entry.get("size"), where))


def _parse_size(value: Any, where: str) -> int:
    # NVIDIA writes the size as a string of digits; accept a JSON integer too.
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SIZE:
        return value
    if isinstance(value, str) and _SIZE_TEXT.fullmatch(value) and int(value) <= MAX_SIZE:
        return int(value)
    raise ManifestError(f"{where}: 'size' must be a number of bytes (at most {MAX_SIZE}), "
                        f"not {_shown(value)}")

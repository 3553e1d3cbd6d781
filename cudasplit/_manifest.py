"""NVIDIA ``redistrib_*.json`` manifests: parsing, platform selection and tarball verification.

A manifest names, per package and platform, one tarball (``relative_path``) with its size and
checksums. Packages built for several CUDA majors (cuDNN >= 9, cuTENSOR, ...) nest one level
deeper: ``"linux-x86_64": {"cuda12": {...}}`` and list the majors in ``"cuda_variant"``. Both
shapes parse into the same flat :class:`Artifact` records, whose ``cuda_variant`` is ``None``
for the plain shape.

Verification hashes in threads: :mod:`hashlib` releases the GIL while it digests buffers larger
than 2 KiB, so sha256 of several tarballs runs on several cores without processes.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import platform as _platform
import re
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ._sources import PLATFORMS
from .errors import ManifestError

__all__ = [
    "LINUX_PLATFORMS",
    "Artifact",
    "Manifest",
    "Package",
    "VerifyReport",
    "VerifyResult",
    "VerifyStatus",
    "arm_platform",
    "find_tarball",
    "host_platform",
    "load_manifest",
    "parse_manifest",
    "resolve_platform_word",
    "resolve_platforms",
    "select_artifacts",
    "verify",
]

LINUX_PLATFORMS: tuple[str, ...] = tuple(p for p in PLATFORMS if p.startswith("linux-"))
# Package keys that are not platforms; anything else holding an object is a platform.
_META_KEYS = frozenset({"name", "license", "license_path", "version", "cuda_variant"})
_TOP_META_KEYS = ("release_date", "release_label", "release_product")
_VARIANT_KEY = re.compile(r"^cuda(\d+(?:\.\d+)?)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 1 << 20  # 1 MiB: large enough that hashlib drops the GIL, small enough to stay cached


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
    source: str  # file name, for messages
    release_date: str | None
    release_label: str | None
    release_product: str | None
    packages: tuple[Package, ...]  # in manifest order

    def package(self, pname: str) -> Package:
        for package in self.packages:
            if package.pname == pname:
                return package
        raise KeyError(pname)

    @property
    def artifacts(self) -> tuple[Artifact, ...]:
        return tuple(a for p in self.packages for a in p.artifacts)

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.platform for a in self.artifacts))


# ---------------------------------------------------------------------------------------------
# Parsing


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a ``redistrib_*.json`` file; ManifestError names the file and key."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise ManifestError(f"{name}: cannot read manifest ({exc.strerror or exc})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{name}: not valid JSON ({exc})") from exc
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
        match = _VARIANT_KEY.match(key)
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


# ---------------------------------------------------------------------------------------------
# Selection


def host_platform() -> str | None:
    """The NVIDIA platform name of this machine (Arm servers read as ``linux-sbsa``)."""
    return {"x86_64": "linux-x86_64", "aarch64": "linux-sbsa",
            "ppc64le": "linux-ppc64le"}.get(_platform.machine())


# Jetson GPUs by compute capability (Nano 5.3, TX2 6.2, Xavier 7.2, Orin 8.7, Thor 10.1 on
# CUDA 12 / 11.0 on CUDA 13). Below the threshold a Jetson needs the L4T build (linux-aarch64);
# at or above it the server build (linux-sbsa) supports it (Nixpkgs' _cuda.lib.getRedistSystem).
JETSON_CAPABILITIES = frozenset({"5.3", "6.2", "7.2", "8.7", "8.8", "10.1", "11.0"})
JETSON_SBSA_THRESHOLD = {"12": "10.1", "13": "8.7"}
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
    CUDA 13.4 and later ship no ``linux-aarch64`` at all: asking for it there is an error.
    """
    major = (cuda_version or "13").split(".")[0]
    threshold = _capability(JETSON_SBSA_THRESHOLD.get(major, "8.7"))
    old_jetson = [c for c in capabilities
                  if c in JETSON_CAPABILITIES and _capability(c) < threshold]
    if not old_jetson:
        return "linux-sbsa"
    if cuda_version and _capability(".".join(cuda_version.split(".")[:2])) >= (13, 4):
        raise ManifestError(f"CUDA {cuda_version} has no linux-aarch64 build for capability "
                            f"{', '.join(old_jetson)}")
    return "linux-aarch64"


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
    match = _VARIANT_KEY.match(word)
    value = match[1] if match else word
    if not re.fullmatch(r"\d+(?:\.\d+)?", value):
        raise ManifestError(f"bad CUDA variant {word!r} (use e.g. 12 or cuda12)")
    return value


def select_artifacts(
    manifest: Manifest,
    *,
    platforms: Iterable[str] | None = None,
    cuda_variants: Iterable[str] | None = None,
    packages: Iterable[str] | None = None,
) -> tuple[Artifact, ...]:
    """The artifacts of the chosen platforms (words as :func:`resolve_platforms` takes them;
    ``None``: all), CUDA variants (``None``: all; packages without variants are always kept)
    and package names (``None``: all), in manifest order."""
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


# ---------------------------------------------------------------------------------------------
# Verification


class VerifyStatus(enum.StrEnum):
    OK = "ok"
    MISSING = "missing"
    SIZE_MISMATCH = "size-mismatch"
    HASH_MISMATCH = "hash-mismatch"
    UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class VerifyResult:
    artifact: Artifact
    status: VerifyStatus
    path: str | None = None
    actual_size: int | None = None
    actual_sha256: str | None = None
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        a = self.artifact
        return {
            "package": a.package, "platform": a.platform, "cuda_variant": a.cuda_variant,
            "relative_path": a.relative_path, "status": self.status.value, "path": self.path,
            "expected_size": a.size, "actual_size": self.actual_size,
            "expected_sha256": a.sha256, "actual_sha256": self.actual_sha256,
            "detail": self.detail,
        }

    def line(self) -> str:
        a = self.artifact
        if self.status is VerifyStatus.OK:
            return f"ok        {a.label}  {self.path}"
        if self.status is VerifyStatus.MISSING:
            return f"MISSING   {a.label}  {a.filename}"
        if self.status is VerifyStatus.SIZE_MISMATCH:
            return (f"SIZE      {a.label}  {self.path}: {self.actual_size} bytes, "
                    f"manifest says {a.size}")
        if self.status is VerifyStatus.HASH_MISMATCH:
            return (f"SHA256    {a.label}  {self.path}: {self.actual_sha256}, "
                    f"manifest says {a.sha256}")
        return f"UNREADABLE {a.label}  {self.path}: {self.detail}"


@dataclass(frozen=True, slots=True)
class VerifyReport:
    manifest: str
    tarball_dir: str
    results: tuple[VerifyResult, ...]  # in manifest order

    def with_status(self, *statuses: VerifyStatus) -> tuple[VerifyResult, ...]:
        return tuple(r for r in self.results if r.status in statuses)

    @property
    def ok(self) -> bool:
        return all(r.status is VerifyStatus.OK for r in self.results)

    def counts(self) -> dict[str, int]:
        return {s.value: len(self.with_status(s)) for s in VerifyStatus}

    def as_dict(self) -> dict[str, Any]:
        return {"manifest": self.manifest, "tarball_dir": self.tarball_dir, "ok": self.ok,
                "counts": self.counts(), "results": [r.as_dict() for r in self.results]}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n"


def verify(
    manifest: Manifest,
    tarball_dir: str | os.PathLike[str],
    *,
    platforms: Iterable[str] | None = None,
    cuda_variants: Iterable[str] | None = None,
    packages: Sequence[str] | None = None,
    jobs: int = 0,
) -> VerifyReport:
    """Check size, then sha256, of every selected artifact found in ``tarball_dir``.

    Never raises for a bad tarball: missing, short, altered and unreadable files are results.
    The size is compared first, so a truncated download is reported without hashing it.
    """
    artifacts = select_artifacts(manifest, platforms=platforms, cuda_variants=cuda_variants,
                                 packages=packages)
    workers = jobs if jobs > 0 else max(1, min(len(os.sched_getaffinity(0)), 8))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = tuple(pool.map(lambda a: verify_artifact(a, tarball_dir), artifacts))
    return VerifyReport(manifest.source, os.fspath(tarball_dir), results)


def verify_artifact(artifact: Artifact, tarball_dir: str | os.PathLike[str]) -> VerifyResult:
    path = find_tarball(artifact, tarball_dir)
    if path is None:
        return VerifyResult(artifact, VerifyStatus.MISSING)
    try:
        size = path.stat().st_size
        if size != artifact.size:
            return VerifyResult(artifact, VerifyStatus.SIZE_MISMATCH, str(path), size)
        digest = sha256_file(path)
    except OSError as exc:
        return VerifyResult(artifact, VerifyStatus.UNREADABLE, str(path),
                            detail=exc.strerror or str(exc))
    status = VerifyStatus.OK if digest == artifact.sha256 else VerifyStatus.HASH_MISMATCH
    return VerifyResult(artifact, status, str(path), size, digest)


def sha256_file(path: Path) -> str:
    """Stream in 1 MiB chunks into one reused buffer (no per-chunk allocation)."""
    digest = hashlib.sha256()
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buffer)
            if not n:
                return digest.hexdigest()
            digest.update(view[:n])

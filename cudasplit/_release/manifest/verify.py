"""Checking downloaded tarballs against their manifest: size first, then sha256.

Verification hashes in threads: :mod:`hashlib` releases the GIL while it digests buffers larger
than 2 KiB, so sha256 of several tarballs runs on several cores without processes.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudasplit._release.manifest.parse import Artifact, Manifest
from cudasplit._release.manifest.select import find_tarball, select_artifacts
from cudasplit._run import ByteGrid, ProgressCallback, Tally, resolve_jobs

__all__ = ["CHUNK", "VerifyReport", "VerifyResult", "VerifyStatus", "sha256_file", "verify",
           "verify_artifact"]

VERIFY_SCHEMA = 1  # the "schema" of VerifyReport.as_dict (cudasplit/schemas/verify.json)
CHUNK = 1 << 20  # 1 MiB: large enough that hashlib drops the GIL, small enough to stay cached


class VerifyStatus(enum.StrEnum):
    """How one tarball fared in :func:`verify_manifest`."""

    OK = "ok"
    MISSING = "missing"
    SIZE_MISMATCH = "size-mismatch"
    HASH_MISMATCH = "hash-mismatch"
    UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """One tarball checked against the manifest.

    Attributes:
        artifact: the tarball as the manifest names it.
        status: ``ok``, ``missing``, ``size-mismatch``, ``hash-mismatch`` or ``unreadable``.
        path: where it was found.
        actual_size: its size, where read.
        actual_sha256: its sha256, where hashed.
        detail: why it is not ok.

    Raises:
        Nothing: a value.
    """

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
    """What :func:`verify_manifest` found, one result per selected tarball.

    Attributes:
        manifest: the manifest file.
        tarball_dir: where the tarballs were looked for.
        results: one per tarball, in manifest order.

    Raises:
        Nothing: a value.
    """

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
        return {"schema": VERIFY_SCHEMA, "manifest": self.manifest,
                "tarball_dir": self.tarball_dir, "ok": self.ok,
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
    jobs: int | None = None,
    progress: ProgressCallback | None = None,
) -> VerifyReport:
    """Check size, then sha256, of every selected artifact found in ``tarball_dir``, ``jobs``
    tarballs at once (``None``/0: every available CPU); ``progress`` hears the bytes hashed.

    Never raises for a bad tarball: missing, short, altered and unreadable files are results.
    The size is compared first, so a truncated download is reported without hashing it.
    """
    artifacts = select_artifacts(manifest, platforms=platforms, cuda_variants=cuda_variants,
                                 packages=packages)
    workers = max(1, min(resolve_jobs(jobs), len(artifacts)))
    tally = Tally(manifest.source, progress)

    def one(artifact: Artifact) -> VerifyResult:
        meter = tally.meter(artifact.filename)
        result = verify_artifact(artifact, tarball_dir,
                                 on_bytes=meter if progress is not None else None)
        meter.finish(result.actual_size or 0)
        return result

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = tuple(pool.map(one, artifacts))
    tally.done()
    return VerifyReport(manifest.source, os.fspath(tarball_dir), results)


def verify_artifact(artifact: Artifact, tarball_dir: str | os.PathLike[str], *,
                    on_bytes: Callable[[int], None] | None = None) -> VerifyResult:
    """One artifact: found, its size, then its sha256 (``on_bytes``: bytes hashed so far)."""
    path = find_tarball(artifact, tarball_dir)
    if path is None:
        return VerifyResult(artifact, VerifyStatus.MISSING)
    try:
        size = path.stat().st_size
        if size != artifact.size:
            return VerifyResult(artifact, VerifyStatus.SIZE_MISMATCH, str(path), size)
        digest = sha256_file(path, on_bytes)
    except OSError as exc:
        return VerifyResult(artifact, VerifyStatus.UNREADABLE, str(path),
                            detail=exc.strerror or str(exc))
    status = VerifyStatus.OK if digest == artifact.sha256 else VerifyStatus.HASH_MISMATCH
    return VerifyResult(artifact, status, str(path), size, digest)


def sha256_file(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """Stream in 1 MiB chunks into one reused buffer (no per-chunk allocation);
    ``on_bytes(hashed so far)`` every :data:`~cudasplit._run.STEP` bytes."""
    digest = hashlib.sha256()
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    grid = None if on_bytes is None else ByteGrid(on_bytes)
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buffer)
            if not n:
                return digest.hexdigest()
            digest.update(view[:n])
            if grid is not None:
                grid.add(n)

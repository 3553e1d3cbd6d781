"""NVIDIA ``redistrib_*.json`` manifests: parsing, platform selection and tarball verification.

The three jobs live in :mod:`.parse`, :mod:`.select` and
:mod:`.verify`; their names are re-exported here, where the CLI and the release
tools import them from.

A manifest names, per package and platform, one tarball (``relative_path``) with its size and
checksums. Packages built for several CUDA majors (cuDNN >= 9, cuTENSOR, ...) nest one level
deeper: ``"linux-x86_64": {"cuda12": {...}}`` and list the majors in ``"cuda_variant"``. Both
shapes parse into the same flat :class:`Artifact` records, whose ``cuda_variant`` is ``None``
for the plain shape.

Verification hashes in threads: :mod:`hashlib` releases the GIL while it digests buffers larger
than 2 KiB, so sha256 of several tarballs runs on several cores without processes.
"""

from __future__ import annotations

from cudasplit._release.manifest.parse import (
    MAX_MANIFEST_BYTES,
    PLATFORM_WORD,
    PNAME,
    VERSION_WORD,
    Artifact,
    Manifest,
    Package,
    load_manifest,
    parse_manifest,
)
from cudasplit._release.manifest.select import (
    JETSON_CAPABILITIES,
    JETSON_SBSA_THRESHOLD,
    arm_platform,
    find_tarball,
    resolve_platform_word,
    resolve_platforms,
    select_artifacts,
)
from cudasplit._release.manifest.verify import (
    VerifyReport,
    VerifyResult,
    VerifyStatus,
    sha256_file,
    verify,
)

__all__ = [
    "JETSON_CAPABILITIES",
    "JETSON_SBSA_THRESHOLD",
    "MAX_MANIFEST_BYTES",
    "PLATFORM_WORD",
    "PNAME",
    "VERSION_WORD",
    "Artifact",
    "Manifest",
    "Package",
    "VerifyReport",
    "VerifyResult",
    "VerifyStatus",
    "arm_platform",
    "find_tarball",
    "load_manifest",
    "parse_manifest",
    "resolve_platform_word",
    "resolve_platforms",
    "select_artifacts",
    "sha256_file",
    "verify",
]
